"""The dry run: one sample of a dataset through the model when a recipe is built, so that a mismatch is refused early.

A model and data that do not fit (an MLP's ``in_features`` against the data's ``shape``, a class count below the
labels, an eval set of another shape) would otherwise fail mid-run with a raw torch error. Before the Trainer is built,
:func:`fit_problems` takes the first sample of a dataset (without iterating its loader, so the shuffling order is
untouched), runs it through the model under ``torch.no_grad`` in eval mode (the model's mode is restored after), and
computes the loss (training data) or updates fresh evaluation metrics (evaluation data). A failure becomes a
:class:`~composer.config.ConfigError` naming the model's key and the dataset's key, with the fix.

Methods that reshape the training inputs are tried at their extreme too (:func:`method_extremes`): the smallest
images ProgressiveResizing makes, at its ``initial_scale``, must still go through the model. Methods that change the
model at ``INIT`` (:func:`method_surgery`: ALiBi) have changed it before the sample goes through, and a limit they set
on what it takes (:func:`method_limits`: ALiBi's ``max_sequence_length``) is checked against the sample.

Example:
    >>> from composer.config.datasets import SyntheticClassificationHparams
    >>> from composer.config.models import MLPHparams
    >>> model_config = MLPHparams(in_features=15, hidden=[8])
    >>> data_config = SyntheticClassificationHparams(shape=[16], num_samples=4)
    >>> spec = data_config.initialize_object(batch_size=2, train=True)
    >>> model = model_config.initialize_object()
    >>> (problem,) = fit_problems(model_config, "model.mlp", model, data_config, "train_dataset.synthetic_classification", spec, train=True)
    >>> problem.where
    'model.mlp.in_features and train_dataset.synthetic_classification.shape'
    >>> "Set model.mlp.in_features: 16" in problem.message
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from composer.config.config_error import ConfigError
from composer.config.datasets import DatasetHparams
from composer.config.models import ModelHparams
from composer.core.data_spec import DataSpec
from composer.core.hparams import Hparams
from composer.models.base import ComposerModel
from composer.models.huggingface import UnmaskedBatchError

__all__ = ["fit_problems", "method_extremes", "method_limits", "method_surgery"]

Extreme = tuple[str, Callable[[Any], Any]]
"""A recipe key and what the method it configures makes of a training batch at that setting's extreme."""

# What a model raises on inputs or labels it cannot take (shapes, dtypes, indices out of range, missing keys).
_MISFITS = (RuntimeError, IndexError, ValueError, TypeError, KeyError, AssertionError)


def _keys(path: str, fields: tuple[str, ...]) -> str:
    return " / ".join(f"{path}.{name}" for name in fields) if fields else path


def _first_tensor(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def _one_sample(spec: DataSpec) -> tuple[Any, Any] | None:
    """The dataset and a batch of its first sample (collated and transformed as training does), or None when the data
    is not an indexable dataset behind a DataLoader (then nothing is checked)."""
    loader = spec.dataloader
    dataset = getattr(loader, "dataset", None)
    if not isinstance(loader, DataLoader) or dataset is None or isinstance(dataset, IterableDataset):
        return None
    try:
        if len(dataset) == 0:
            return None
    except TypeError:
        return None
    return dataset, spec.device_transforms(loader.collate_fn([dataset[0]]))


def _largest_label(dataset: Any) -> int | None:
    """The largest integer label of a dataset that keeps its labels (``labels`` or ``targets``), else None."""
    for name in ("labels", "targets"):
        labels = getattr(dataset, name, None)
        if isinstance(labels, torch.Tensor) and labels.numel() and not labels.is_floating_point():
            return int(labels.max())
        if isinstance(labels, list) and labels and all(isinstance(label, int) for label in labels):
            return int(max(labels))
    return None


def method_extremes(algorithms: Mapping[str, Hparams]) -> list[Extreme]:
    """The reshaping of training batches by the recipe's methods at their extremes, for :func:`fit_problems`.

    Args:
        algorithms: The recipe's methods by registry name.
    """
    config: Any = algorithms.get("progressive_resizing")
    if config is None:
        return []
    from composer.algorithms.progressive_resizing import resize_inputs

    def smallest(batch: Any) -> Any:
        inputs, targets = batch
        scale, resize_targets, multiple = config.initial_scale, config.resize_targets, config.size_multiple
        return resize_inputs(inputs, targets, scale, "resize", resize_targets, size_multiple=multiple)

    return [("algorithms.progressive_resizing.initial_scale", smallest)]


def method_surgery(algorithms: Mapping[str, Hparams]) -> list[tuple[str, Callable[[torch.nn.Module], None]]]:
    """The changes the recipe's methods make to the model once, at ``INIT``, by the key that configures them (ALiBi's).

    The recipe applies them to the model before it builds the optimizer and runs the dry run, so that the sample goes
    through the model as training sees it: with ALiBi, longer sequences than the model was built for. ``INIT`` applies
    them again, which changes nothing more.

    Args:
        algorithms: The recipe's methods by registry name.
    """
    config: Any = algorithms.get("alibi")
    return [] if config is None else [("algorithms.alibi", config.initialize_object().apply_to_model)]


def method_limits(algorithms: Mapping[str, Hparams]) -> list[tuple[str, int]]:
    """The longest token sequence the model takes once the recipe's methods changed it, by the key that sets it.

    Args:
        algorithms: The recipe's methods by registry name.
    """
    config: Any = algorithms.get("alibi")
    return [] if config is None else [("algorithms.alibi.max_sequence_length", config.max_sequence_length)]


def _unmasked_problem(
    error: UnmaskedBatchError, model_path: str, data_config: DatasetHparams, data_path: str, field: str
) -> ConfigError:
    """A masked language model over unmasked data: the fix is the dataset's masking keys, not the shapes."""
    if not hasattr(data_config, "mlm_probability"):
        return ConfigError(
            f"{model_path} and {data_path}",
            f"{error.model_name} is a masked language model, but the labels of {field} equal its input tokens: it "
            "would learn to copy its input. Use a masked text dataset (python_docs or text_files with "
            "mlm_probability: 0.15), or a causal model (task: causal_lm).",
        )
    mask = error.mask_token_id if error.mask_token_id is not None else getattr(data_config, "mask_token_id", None)
    vocab = f" (the model's vocab_size, {error.vocab_size}, must be above it)" if error.vocab_size is not None else ""
    return ConfigError(
        f"{data_path}.mlm_probability",
        f"received null, but {model_path} is a masked language model ({error.model_name}): on unmasked data it "
        f"would learn to copy its input and its token accuracy would measure nothing. Set "
        f"{data_path}.mlm_probability: 0.15 (BERT's rate) and {data_path}.mask_token_id: {mask}, the model's "
        f"mask token{vocab}; or use a causal model (task: causal_lm).",
    )


def fit_problems(
    model_config: ModelHparams,
    model_path: str,
    model: ComposerModel,
    data_config: DatasetHparams,
    data_path: str,
    spec: DataSpec,
    train: bool,
    extremes: list[Extreme] | None = None,
    limits: list[tuple[str, int]] | None = None,
) -> list[ConfigError]:
    """Runs the first sample of ``spec`` through ``model``; a problem if they do not fit, naming both recipe keys.

    Args:
        model_config: The model's config (its ``input_fields`` and ``output_fields`` are named in the problem).
        model_path: The model's key path (``model.mlp``).
        model: The model built from ``model_config``.
        data_config: The dataset's config (its ``sample_fields`` and ``label_fields`` are named).
        data_path: The dataset's key path (``train_dataset.synthetic_classification``).
        spec: The loader built from ``data_config``.
        train: Training data (forward and loss) or evaluation data (``eval_forward`` and the evaluation metrics).
        extremes: Training only: the methods' reshaping of a batch at their extremes (:func:`method_extremes`);
            each reshaped sample must go through the model too.
        limits: The longest sequence the model takes once the methods changed it (:func:`method_limits`); a
            sample of token ids must not be longer.

    Returns:
        No problem, or one.
    """
    field = data_path.split(".", 1)[0]
    try:
        found = _one_sample(spec)
    except _MISFITS as error:
        return [ConfigError(data_path, f"reading the first sample of {field} fails: {type(error).__name__}: {error}")]
    if found is None:
        return []
    fit = _Fit(model_config, model_path, model, data_config, data_path, field, *found)
    problem = fit.length_problem(limits or []) or fit.vocab_problem()
    if problem is not None:
        return [problem]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            problem = fit.model_problem(train, extremes or [])
    finally:
        model.train(was_training)
    return [] if problem is None else [problem]


@dataclasses.dataclass
class _Fit:
    """One sample of a dataset against the model: each check returns the problem it finds, or None."""

    model_config: ModelHparams
    model_path: str
    model: ComposerModel
    data_config: DatasetHparams
    data_path: str
    field: str
    dataset: Any
    batch: Any

    def __post_init__(self) -> None:
        sample = _first_tensor(self.batch)
        self.shape = list(sample.shape[1:]) if sample is not None else []
        self.tokens = sample is not None and len(self.shape) == 1 and not sample.is_floating_point()
        self.input_keys = _keys(self.model_path, self.model_config.input_fields)
        self.sample_keys = _keys(self.data_path, self.data_config.sample_fields)
        self.output_keys = _keys(self.model_path, self.model_config.output_fields)
        self.label_keys = _keys(self.data_path, self.data_config.label_fields)

    def length_problem(self, limits: list[tuple[str, int]]) -> ConfigError | None:
        for key, longest in limits:
            if self.tokens and self.shape[0] > longest:
                return ConfigError(
                    f"{key} and {self.sample_keys}",
                    f"do not fit: one sample of {self.field} holds {self.shape[0]} tokens, but with {key}={longest} "
                    f"the model takes at most {longest}. Set {key}: {self.shape[0]} or more, or shorten the samples.",
                )
        return None

    def vocab_problem(self) -> ConfigError | None:
        """The recipe's tokenizer has ids past the model's vocabulary (``vocab_size`` of the data and the model)."""
        needed = getattr(self.dataset, "vocab_size", None)
        has = getattr(getattr(self.model, "config", None), "vocab_size", None)
        if (
            getattr(self.data_config, "tokenizer", None) is None
            or not isinstance(needed, int)
            or not isinstance(has, int)
        ):
            return None
        if has >= needed:
            return None
        fields = {f.name for f in dataclasses.fields(self.model_config)}  # type: ignore[arg-type]
        model_key = f"{self.model_path}.{'vocab_size' if 'vocab_size' in fields else 'config.vocab_size'}"
        data_key = f"{self.data_path}.tokenizer"
        return ConfigError(
            f"{model_key} and {data_key}",
            f"do not fit: the tokenizer of {self.field} has {needed} token ids, but the model's vocab_size is {has}, so "
            f"ids from {has} up have no embedding. Set {model_key}: {needed} (or more), or use a smaller tokenizer.",
        )

    def model_problem(self, train: bool, extremes: list[Extreme]) -> ConfigError | None:
        """Forward (or ``eval_forward``), the labels against the outputs, the loss (or metrics), the extremes."""
        try:
            outputs = self.model(self.batch) if train else self.model.eval_forward(self.batch)
        except UnmaskedBatchError as error:
            return _unmasked_problem(error, self.model_path, self.data_config, self.data_path, self.field)
        except _MISFITS as error:
            hint = self.model_config.input_hint(self.shape)
            fix = f"Set {self.model_path}.{hint}, or change {self.sample_keys}" if hint else None
            fix = fix or f"Change {self.input_keys} or {self.sample_keys}"
            return ConfigError(
                f"{self.input_keys} and {self.sample_keys}",
                f"do not fit: one sample of {self.field} (first input of shape {self.shape}) through the model fails "
                f"with {type(error).__name__}: {str(error).strip()}. {fix} so that they agree.",
            )
        return self.label_problem(outputs) or self.loss_problem(outputs, train) or self.extreme_problem(extremes)

    def label_problem(self, outputs: Any) -> ConfigError | None:
        largest = _largest_label(self.dataset)
        if not isinstance(outputs, torch.Tensor) or outputs.ndim < 2 or largest is None:
            return None
        width = outputs.shape[-1]
        if largest < width:
            return None
        return ConfigError(
            f"{self.output_keys} and {self.label_keys}",
            f"do not fit: the model gives {width} outputs per sample but the labels of {self.field} run up to "
            f"{largest}, and every label needs an output. Set {self.output_keys} to {largest + 1} or more, or change "
            f"{self.label_keys}.",
        )

    def loss_problem(self, outputs: Any, train: bool) -> ConfigError | None:
        try:
            if train:
                self.model.loss(outputs, self.batch)
            else:
                for metric in self.model.get_metrics(is_train=False).values():
                    self.model.update_metric(self.batch, outputs, metric)
        except _MISFITS as error:
            what = "loss" if train else "evaluation metrics"
            return ConfigError(
                f"{self.output_keys} and {self.label_keys}",
                f"do not fit: the model's {what} on one sample of {self.field} fail with {type(error).__name__}: "
                f"{str(error).strip()}. Change {self.output_keys} or {self.label_keys} so that they agree.",
            )
        return None

    def extreme_problem(self, extremes: list[Extreme]) -> ConfigError | None:
        for key, reshape in extremes:
            try:
                reshaped = reshape(self.batch)
            except _MISFITS:
                continue  # a batch the method does not reshape
            try:
                self.model(reshaped)
            except _MISFITS as error:
                smallest = _first_tensor(reshaped)
                shown = list(smallest.shape[1:]) if smallest is not None else "?"
                return ConfigError(
                    f"{key} and {self.model_path}",
                    f"do not fit: at this setting one sample of {self.field} becomes of shape {shown}, and the model "
                    f"fails on it with {type(error).__name__}: {str(error).strip()}. Raise {key.rsplit('.', 1)[1]}, "
                    "or use a model that takes smaller inputs.",
                )
        return None
