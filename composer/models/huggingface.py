"""HuggingFaceModel: any Hugging Face ``transformers`` causal or masked language model as a ComposerModel.

``transformers`` is an optional dependency (``pip install 'opencomposer[nlp]'``, version 5.0 or newer); this module
imports it only when a model is wrapped, so ``import composer.models`` stays cheap without it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from composer.core.data_spec import Batch
from composer.models.base import ComposerModel

if TYPE_CHECKING:  # torchmetrics is imported when the metrics are built, not with the model
    from torchmetrics import Metric

__all__ = [
    "MIN_TRANSFORMERS_VERSION",
    "HuggingFaceModel",
    "UnmaskedBatchError",
    "is_transformers_available",
    "require_transformers",
]

MIN_TRANSFORMERS_VERSION = (5, 0)
"""The oldest ``transformers`` release (major, minor) this library supports."""


def is_transformers_available() -> bool:
    """Whether the ``transformers`` package is installed (without importing it).

    Example:
        >>> isinstance(is_transformers_available(), bool)
        True
    """
    return importlib.util.find_spec("transformers") is not None


def require_transformers(feature: str) -> None:
    """Raises an :class:`ImportError` naming the extra to install unless a supported ``transformers`` is installed.

    Args:
        feature: What needs it, for the message (for example ``'HuggingFaceModel'``).
    """
    wanted = ".".join(map(str, MIN_TRANSFORMERS_VERSION))
    if not is_transformers_available():
        raise ImportError(
            f"{feature} needs the Hugging Face transformers package (>= {wanted}), which is not installed. To fix, "
            "install the nlp extra: pip install 'opencomposer[nlp]'."
        )
    installed = importlib.metadata.version("transformers")
    numbers = tuple(int(part) for part in installed.split(".")[:2] if part.isdigit())
    if numbers < MIN_TRANSFORMERS_VERSION:
        raise ImportError(
            f"{feature} needs transformers >= {wanted}, but {installed} is installed. To fix, upgrade it: "
            "pip install -U 'opencomposer[nlp]'."
        )


def _is_causal_lm(model: torch.nn.Module) -> bool | None:
    """True for a causal-LM class, False for a masked-LM class, None when transformers lists it as neither."""
    from transformers.models.auto import modeling_auto

    def names(mapping: Mapping[str, str | tuple[str, ...]]) -> set[str]:
        return {name for value in mapping.values() for name in ((value,) if isinstance(value, str) else value)}

    class_name = type(model).__name__
    if class_name in names(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        return True
    if class_name in names(modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        return False
    return None


class UnmaskedBatchError(ValueError):
    """A masked language model was given labels equal to its inputs: nothing is masked, it would learn the identity.

    Attributes:
        model_name: The model's class name (``'BertForMaskedLM'``).
        mask_token_id: The model config's ``mask_token_id``, or None when it has none.
        vocab_size: The model config's ``vocab_size``, or None.
    """

    def __init__(self, message: str, model_name: str, mask_token_id: int | None, vocab_size: int | None) -> None:
        super().__init__(message)
        self.model_name = model_name
        self.mask_token_id = mask_token_id
        self.vocab_size = vocab_size


def _refuse_unmasked(model: torch.nn.Module, batch: Mapping[str, Any]) -> None:
    """Raises when a masked LM gets labels equal to its inputs: it would learn to copy them (the identity).

    Unmasked means: every scored label (not -100) equals its input token, and more than half of the attended tokens
    are scored. Masking scores a few (BERT: 15%) and hides 80% of those, so a masked batch is never taken for one.
    """
    input_ids, labels = batch.get("input_ids"), batch.get("labels")
    if not isinstance(input_ids, torch.Tensor) or not isinstance(labels, torch.Tensor):
        return
    if input_ids.shape != labels.shape:
        return
    scored = labels != -100
    attention_mask = batch.get("attention_mask")
    attended = attention_mask != 0 if isinstance(attention_mask, torch.Tensor) else torch.ones_like(scored)
    copied = (labels == input_ids) | ~scored
    # One host sync per batch: the refusal needs a Python bool.
    if not bool(copied.all() & (2 * scored.sum() > attended.sum())):
        return
    config = getattr(model, "config", None)
    mask_token_id = getattr(config, "mask_token_id", None)
    vocab_size = getattr(config, "vocab_size", None)
    mask_text = (
        f"mask_token_id={mask_token_id}"
        if mask_token_id is not None
        else "mask_token_id=composer.datasets.BYTE_MASK_TOKEN_ID (256; the model's config has no mask_token_id)"
    )
    raise UnmaskedBatchError(
        f"{type(model).__name__} is a masked language model, but the batch's labels equal its input_ids wherever scored "
        f"(shape {tuple(labels.shape)}): nothing is masked, so the model would learn to copy its input and its "
        "token accuracy would measure nothing. Expected labels of -100 except at masked positions. To fix, mask "
        f"the batches: python_docs_dataloaders(..., mlm_probability=0.15, {mask_text}) or text_file_dataloader(...) "
        "with the same arguments; collate_fn=composer.datasets.MaskingCollator(mask_token_id, ...) for your own "
        "DataLoader; in a recipe, set mlm_probability: 0.15 (and mask_token_id) in the python_docs or text_files "
        f"dataset. The model's vocab_size ({vocab_size}) must include the mask token",
        type(model).__name__,
        mask_token_id,
        vocab_size,
    )


class HuggingFaceModel(ComposerModel):
    """Wraps a Hugging Face ``transformers`` causal-LM or masked-LM model so the Trainer can train it.

    Batches are dicts of the model's inputs (``input_ids``, ``attention_mask``, ``labels``, ...), as the
    ``transformers`` data collators produce them; :meth:`forward` calls ``model(**batch)``, and :meth:`loss` is the
    loss the model computes from ``labels``. Metrics (training and evaluation), over the tokens whose label is not
    ``-100``: ``CrossEntropy`` (nats per token), ``Perplexity``, ``TokenAccuracy``. For a causal model the logits at
    position ``t`` are scored against the label at ``t + 1``, as the model's own loss does; for a masked model,
    against the label at ``t``.

    A masked model given a batch whose ``labels`` equal its ``input_ids`` everywhere is refused with a
    :class:`ValueError`: nothing is masked, so it would learn to copy its input. Mask the batches with
    :class:`~composer.datasets.MaskingCollator` or the ``mlm_probability`` argument of the text loaders.

    Args:
        model: A ``transformers`` model with a language-modelling head (``GPT2LMHeadModel``, ``BertForMaskedLM``,
            any ``AutoModelForCausalLM`` or ``AutoModelForMaskedLM`` model).
        shift_labels: Whether logits predict the next token's label (causal) or their own (masked). Default: read
            from the model's class; pass it for a class that ``transformers`` lists as neither.

    Raises:
        ImportError: If ``transformers`` (>= 5.0) is not installed; install ``opencomposer[nlp]``.

    Example:
        >>> import pytest
        >>> transformers = pytest.importorskip("transformers")
        >>> config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=32,
        ...                                  bos_token_id=0, eos_token_id=0)
        >>> model = HuggingFaceModel(transformers.GPT2LMHeadModel(config))
        >>> ids = torch.randint(0, 64, (2, 8))
        >>> batch = {"input_ids": ids, "labels": ids}
        >>> outputs = model(batch)
        >>> outputs.logits.shape, model.loss(outputs, batch).shape
        (torch.Size([2, 8, 64]), torch.Size([]))
        >>> sorted(model.get_metrics(is_train=False))
        ['CrossEntropy', 'Perplexity', 'TokenAccuracy']
    """

    def __init__(self, model: torch.nn.Module, shift_labels: bool | None = None) -> None:
        super().__init__()
        require_transformers("HuggingFaceModel")
        from transformers import PreTrainedModel

        if not isinstance(model, PreTrainedModel):
            raise TypeError(
                f"HuggingFaceModel model must be a transformers PreTrainedModel, got {type(model).__name__}. Wrap a "
                "plain torch module with ComposerClassifier, or subclass ComposerModel."
            )
        if shift_labels is None:
            shift_labels = _is_causal_lm(model)
            if shift_labels is None:
                raise ValueError(
                    f"HuggingFaceModel cannot tell whether {type(model).__name__} is a causal or a masked language "
                    "model. Pass shift_labels=True (logits at t predict the label at t + 1) or shift_labels=False "
                    "(logits at t predict the label at t)."
                )
        self.model = model
        self.config = model.config
        self.shift_labels = shift_labels

    def forward(self, batch: Batch) -> Any:
        """Returns ``model(**batch)``, the model's output (with ``loss`` when the batch has ``labels``)."""
        if not isinstance(batch, Mapping):
            raise TypeError(
                f"HuggingFaceModel expects each batch to be a dict of model inputs such as {{'input_ids': ..., "
                f"'labels': ...}}, got a {type(batch).__name__}. Use a transformers data collator or a dataset of dicts."
            )
        if not self.shift_labels:
            _refuse_unmasked(self.model, batch)
        return self.model(**batch)

    def loss(self, outputs: Any, batch: Batch, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Returns the loss the model computed from the batch's ``labels``."""
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
        if loss is None:
            keys = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
            raise ValueError(
                f"The model returned no loss: the batch needs a 'labels' entry (got {keys}). For causal language "
                "modelling set labels to the input ids (the model shifts them); for masked language modelling use "
                "transformers' DataCollatorForLanguageModeling."
            )
        result: torch.Tensor = loss
        return result

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        """Returns new ``CrossEntropy``, ``Perplexity`` and ``TokenAccuracy`` metrics over the scored tokens."""
        from composer.models.language_metrics import language_model_metrics

        del is_train
        return language_model_metrics()

    def update_metric(self, batch: Batch, outputs: Any, metric: Metric) -> None:
        """Updates ``metric`` with the output logits against ``batch['labels']`` (shifted for a causal model)."""
        from composer.models.language_metrics import update_language_metric

        update_language_metric(metric, outputs.logits, self.targets(batch), shift=self.shift_labels)
