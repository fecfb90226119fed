"""ALiBi: replace position embeddings by a linear attention bias, so models extrapolate to longer sequences.

Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation"
(https://arxiv.org/abs/2108.12409). :func:`apply_alibi` is the model surgery; :class:`Alibi` applies it at
``INIT`` and, to exploit the extrapolation, trains on shorter sequences (``train_sequence_length_scaling``).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from composer.algorithms.alibi.bias import AlibiBias, ZeroPositionEmbedding
from composer.algorithms.alibi.policies import ALIBI_POLICIES
from composer.algorithms.utils.ported_calls import explain_call
from composer.algorithms.utils.sequence_length import cut_sequences, scaled_length
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils.module_surgery import update_optimizer_params

__all__ = ["Alibi", "AlibiHparams", "apply_alibi", "scale_sequence_length"]

# Attributes under which attention modules keep their head count (composer GPT, transformers GPT-2, BERT).
_HEAD_ATTRIBUTES = ("n_head", "num_heads", "num_attention_heads")


def _import_object(path: str, argument: str) -> Any:
    """The object at dotted import path ``path`` (``'package.module.name'``); errors name ``argument``."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(
            f"{argument}={path!r} is not a dotted import path; give the full path, for example "
            "'composer.models.gpt.CausalSelfAttention'."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{argument}={path!r}: cannot import {module_name!r} ({error}).") from error
    if not hasattr(module, name):
        raise ValueError(f"{argument}={path!r}: module {module_name!r} has no attribute {name!r}.")
    return getattr(module, name)


def _check_alibi_args(
    heads_per_layer: int | None, max_sequence_length: int, train_sequence_length_scaling: float
) -> None:
    if heads_per_layer is not None and (
        isinstance(heads_per_layer, bool) or not isinstance(heads_per_layer, int) or heads_per_layer < 1
    ):
        raise ValueError(
            f"heads_per_layer must be a positive int or None (read from the model), got {heads_per_layer!r}."
        )
    if isinstance(max_sequence_length, bool) or not isinstance(max_sequence_length, int) or max_sequence_length < 1:
        raise ValueError(f"max_sequence_length must be a positive int, got {max_sequence_length!r}.")
    scaling = train_sequence_length_scaling
    if isinstance(scaling, bool) or not isinstance(scaling, (int, float)) or not 0.0 < scaling <= 1.0:
        raise ValueError(
            f"train_sequence_length_scaling must be in (0, 1], got {scaling!r}; for example 0.25 trains on "
            "sequences a quarter as long (and four times as many), 1.0 leaves the batches alone."
        )


def _attention_heads(attention_modules: Sequence[nn.Module]) -> int:
    for attribute in _HEAD_ATTRIBUTES:
        value = getattr(attention_modules[0], attribute, None)
        if isinstance(value, int):
            return value
    raise ValueError(
        f"Cannot read the number of heads from {type(attention_modules[0]).__name__} (it has none of "
        f"{list(_HEAD_ATTRIBUTES)}); pass heads_per_layer."
    )


def _replace_position_embedding(model: nn.Module, path: str, max_sequence_length: int) -> None:
    parent_path, _, name = path.rpartition(".")
    try:
        parent = model.get_submodule(parent_path) if parent_path else model
        embedding = getattr(parent, name)
    except AttributeError as error:
        candidates = [n for n, m in model.named_modules() if isinstance(m, (nn.Embedding, ZeroPositionEmbedding))]
        raise ValueError(
            f"position_embedding_attribute={path!r} names no module of {type(model).__name__}. Give the dotted "
            f"path from the model to its position embedding; the embeddings in this model are {candidates}."
        ) from error
    weight = embedding.zero if isinstance(embedding, ZeroPositionEmbedding) else getattr(embedding, "weight", None)
    if not isinstance(embedding, nn.Module) or not isinstance(weight, torch.Tensor):
        raise ValueError(
            f"position_embedding_attribute={path!r} names a {type(embedding).__name__}, not a position embedding "
            "module (an nn.Embedding with a weight of shape (max_positions, dim))."
        )
    width = int(getattr(embedding, "embedding_dim", None) or weight.shape[-1])
    dtype = weight.dtype
    setattr(parent, name, ZeroPositionEmbedding(max_sequence_length, width, dtype=dtype))


def apply_alibi(
    model: nn.Module,
    heads_per_layer: int | None,
    max_sequence_length: int,
    position_embedding_attribute: str,
    attention_module: type[nn.Module],
    attr_to_replace: str,
    alibi_attention: Callable[..., Any],
    mask_replacement_function: Callable[[nn.Module, int], Any] | None = None,
    *,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> None:
    """Removes the position embedding and makes every ``attention_module`` attend with ALiBi, in place.

    The position embedding becomes a :class:`ZeroPositionEmbedding` (no parameters), every attention module attends
    with the shared :class:`AlibiBias`, and the removed parameters leave ``optimizers``; the method card
    (``README.md``) lists the steps.

    Applying it again replaces the previous ALiBi set-up. The built-in policies
    (:data:`~composer.algorithms.alibi.policies.ALIBI_POLICIES`) give the arguments for
    :class:`~composer.models.GPT` and Hugging Face GPT-2 and BERT; :meth:`Alibi.from_model` fills them in.

    Args:
        model: The model to change.
        heads_per_layer: Attention heads per layer; None reads it from the attention modules.
        max_sequence_length: Longest sequence the model will accept.
        position_embedding_attribute: Dotted path from ``model`` to its position embedding (``'wpe'``,
            ``'model.transformer.wpe'``).
        attention_module: The attention class whose method is replaced.
        attr_to_replace: Name of that method (``'forward'``).
        alibi_attention: The replacement, a function taking the module as its first argument.
        mask_replacement_function: ``function(model, max_sequence_length)`` or None.
        optimizers: Optimizers built on ``model``'s parameters, kept in step with the surgery.

    Raises:
        ValueError: If the model has no ``attention_module``, or the position embedding path is wrong.

    Example:
        >>> from composer.models import GPT, GPTConfig
        >>> from composer.algorithms.alibi.policies import gpt_alibi_forward
        >>> from composer.models.gpt import CausalSelfAttention
        >>> model = GPT(GPTConfig(n_layer=2, n_embd=32, max_sequence_length=16))
        >>> apply_alibi(model, heads_per_layer=4, max_sequence_length=64, position_embedding_attribute="wpe",
        ...             attention_module=CausalSelfAttention, attr_to_replace="forward",
        ...             alibi_attention=gpt_alibi_forward, mask_replacement_function=None)
        >>> "wpe.weight" in dict(model.named_parameters())
        False
        >>> model({"input_ids": torch.zeros(1, 64, dtype=torch.long)}).shape  # longer than the 16 it was built for
        torch.Size([1, 64, 256])
    """
    _check_alibi_args(heads_per_layer, max_sequence_length, 1.0)
    if not isinstance(attention_module, type):
        raise TypeError(f"attention_module must be a class, got {attention_module!r}.")
    if not callable(alibi_attention):
        raise TypeError(f"alibi_attention must be a function, got {alibi_attention!r}.")
    targets = [module for module in model.modules() if isinstance(module, attention_module)]
    if not targets:
        raise ValueError(
            f"{type(model).__name__} has no {attention_module.__name__} module, so ALiBi has nothing to change. "
            "Check attention_module (attention_module_name for the Alibi algorithm)."
        )
    before = dict(model.named_parameters())
    _replace_position_embedding(model, position_embedding_attribute, max_sequence_length)
    alibi = AlibiBias(heads_per_layer or _attention_heads(targets), max_sequence_length)
    for module in targets:
        module.alibi = alibi  # type: ignore[assignment]  # a plain attribute, outside the state dict
        setattr(module, attr_to_replace, types.MethodType(alibi_attention, module))
    if mask_replacement_function is not None:
        mask_replacement_function(model, max_sequence_length)
    if optimizers is not None:
        optimizer_list = [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
        update_optimizer_params(optimizer_list, before, dict(model.named_parameters()))


def scale_sequence_length(batch: Mapping[str, Any], scaling: float) -> Mapping[str, Any]:
    """Reshapes a batch of ``B`` sequences of ``S`` tokens into ``B / scaling`` sequences of ``S * scaling``.

    Every token is kept and every ``(B, S, ...)`` entry (``input_ids``, ``labels``, ``attention_mask``, ...) is
    reshaped the same way; each new sequence is a piece of one original sequence.

    Args:
        batch: A dict with ``'input_ids'`` of shape ``(B, S)``.
        scaling: Fraction of the length to keep, in ``(0, 1]``; ``S * scaling`` must be a whole number dividing
            ``S``.

    Returns:
        Mapping: A batch of the same mapping type whose ``(B, S, ...)`` entries are now
        ``(B / scaling, S * scaling, ...)``.

    Example:
        >>> batch = {"input_ids": torch.arange(8).view(1, 8), "labels": torch.arange(8).view(1, 8)}
        >>> scale_sequence_length(batch, 0.25)["labels"]
        tensor([[0, 1],
                [2, 3],
                [4, 5],
                [6, 7]])
    """
    _check_alibi_args(None, 1, scaling)
    if scaling == 1.0:
        return batch
    input_ids = batch.get("input_ids") if isinstance(batch, Mapping) else None
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise ValueError(
            "Alibi's train_sequence_length_scaling needs dict batches with 'input_ids' of shape (B, S); got "
            f"{type(batch).__name__}"
            + (f" with keys {sorted(batch)}" if isinstance(batch, Mapping) else "")
            + ". Set train_sequence_length_scaling=1.0 to leave batches alone."
        )
    return cut_sequences(batch, scaled_length(input_ids.shape[1], scaling), truncate=False)


def _find_policy(model: nn.Module) -> tuple[str, dict[str, Any]]:
    """The first built-in policy whose attention class ``model`` contains, as Alibi's path arguments."""
    for family, policy in ALIBI_POLICIES.items():
        try:
            attention_class = _import_object(policy.attention_module_name, "attention_module_name")
            owner_class = _import_object(policy.embedding_owner, "embedding_owner")
        except ValueError:
            continue  # an optional library (transformers) is not installed: the family cannot be present
        if not any(isinstance(module, attention_class) for module in model.modules()):
            continue
        owner = next((name for name, module in model.named_modules() if isinstance(module, owner_class)), None)
        if owner is None:
            continue
        return family, {
            "position_embedding_attribute": f"{owner}.{policy.position_embedding_name}".lstrip("."),
            "attention_module_name": policy.attention_module_name,
            "attr_to_replace": policy.attr_to_replace,
            "alibi_attention": policy.alibi_attention,
            "mask_replacement_function": policy.mask_replacement_function,
        }
    raise ValueError(
        f"Alibi has no built-in policy for {type(model).__name__}: it contains none of the attention classes of "
        f"the families {list(ALIBI_POLICIES)}. Give the dotted paths yourself: Alibi(position_embedding_attribute="
        "..., attention_module_name=..., attr_to_replace=..., alibi_attention=..., mask_replacement_function=..., "
        "...)."
    )


_FROM_MODEL_KEYWORDS = ("max_sequence_length", "train_sequence_length_scaling", "heads_per_layer")


def _explain_model_free_call(kwargs: dict[str, Any]) -> str | None:
    """The message for v0.32.1's ``Alibi(max_sequence_length=...)``, which found the model's paths by itself."""
    if not kwargs or any(name not in _FROM_MODEL_KEYWORDS for name in kwargs):
        return None
    given = ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
    return (
        f"Alibi({given}) lacks the model's dotted paths (position_embedding_attribute, attention_module_name, "
        "attr_to_replace, alibi_attention, mask_replacement_function), which MosaicML Composer v0.32.1 found from the "
        f"model by itself. Here Alibi.from_model does that: Alibi.from_model(model, {given}) (a GPT, or a Hugging "
        "Face GPT-2 or BERT model)."
    )


class Alibi(Algorithm):
    """ALiBi (Attention with Linear Biases) dispenses with position embeddings and biases attention instead.

    Nearby tokens attend to one another more strongly: head ``h`` adds ``-slope[h] * distance`` to each attention
    score. ALiBi extrapolates to longer sequences than it was trained on, which this algorithm exploits by training
    on shorter ones: with ``train_sequence_length_scaling=0.25`` each training batch of ``B`` sequences of ``S``
    tokens becomes ``4B`` sequences of ``S/4`` (every token kept; evaluation batches are left alone).

    Runs on ``INIT`` (the surgery of :func:`apply_alibi`, before the model moves to an accelerator; the optimizers
    lose the removed parameters) and on ``AFTER_DATALOADER`` when ``train_sequence_length_scaling != 1``, unless
    the run also has :class:`~composer.algorithms.SeqLengthWarmup`: at ``INIT`` each says its part in
    ``state.sequence_cut`` (this one its scaling), and the warmup then cuts each batch once, to the shorter of the
    two lengths (ALiBi's never below the warmup's ``min_seq_length``), whatever the order of the two in
    ``algorithms`` (see :meth:`train_sequence_length` and the method cards). The five
    path arguments let it target any attention class; :meth:`from_model` fills them in for
    :class:`~composer.models.GPT` and Hugging Face GPT-2 and BERT (under ``attn_implementation`` ``'sdpa'``, the
    default, or ``'eager'``).

    Args:
        position_embedding_attribute: Dotted path from the model to its position embedding (for Hugging Face
            GPT-2 inside :class:`~composer.models.HuggingFaceModel`: ``'model.transformer.wpe'``).
        attention_module_name: Dotted import path of the attention class, e.g.
            ``'transformers.models.gpt2.modeling_gpt2.GPT2Attention'``.
        attr_to_replace: Method of that class to replace, e.g. ``'forward'``.
        alibi_attention: Dotted import path of the replacement, e.g.
            ``'composer.algorithms.alibi.policies.gpt2_alibi_forward'``.
        mask_replacement_function: Dotted import path of ``function(model, max_sequence_length)`` that lifts other
            length limits of the model, or None.
        heads_per_layer: Attention heads per layer; None reads it from the model.
        max_sequence_length: Longest sequence the model will accept afterwards.
        train_sequence_length_scaling: Fraction of the training sequence length to train on, in ``(0, 1]``.

    Example:
        >>> from composer.algorithms import Alibi
        >>> from composer.models import GPT, GPTConfig
        >>> alibi = Alibi.from_model(GPT(GPTConfig(n_layer=2)), max_sequence_length=1024)
        >>> alibi.attention_module_name, alibi.position_embedding_attribute
        ('composer.models.gpt.CausalSelfAttention', 'wpe')
    """

    @explain_call(_explain_model_free_call)
    def __init__(
        self,
        position_embedding_attribute: str,
        attention_module_name: str,
        attr_to_replace: str,
        alibi_attention: str,
        mask_replacement_function: str | None,
        heads_per_layer: int | None,
        max_sequence_length: int,
        train_sequence_length_scaling: float,
    ) -> None:
        for name, value in (
            ("position_embedding_attribute", position_embedding_attribute),
            ("attention_module_name", attention_module_name),
            ("attr_to_replace", attr_to_replace),
            ("alibi_attention", alibi_attention),
        ):
            if not isinstance(value, str) or not value:
                raise ValueError(
                    f"{name} must be a non-empty string, got {value!r}. Use Alibi.from_model(model) to fill in the "
                    "paths for a built-in model family."
                )
        if mask_replacement_function is not None and not isinstance(mask_replacement_function, str):
            raise ValueError(
                f"mask_replacement_function must be a dotted path or None, got {mask_replacement_function!r}."
            )
        _check_alibi_args(heads_per_layer, max_sequence_length, train_sequence_length_scaling)
        self.position_embedding_attribute = position_embedding_attribute
        self.attention_module_name = attention_module_name
        self.attr_to_replace = attr_to_replace
        self.alibi_attention = alibi_attention
        self.mask_replacement_function = mask_replacement_function
        self.heads_per_layer = heads_per_layer
        self.max_sequence_length = max_sequence_length
        self.train_sequence_length_scaling = train_sequence_length_scaling

    @classmethod
    def from_model(
        cls,
        model: nn.Module,
        max_sequence_length: int = 8192,
        train_sequence_length_scaling: float = 0.25,
        heads_per_layer: int | None = None,
    ) -> Alibi:
        """Returns an :class:`Alibi` whose paths come from the built-in policy for ``model``'s family.

        Args:
            model: A :class:`~composer.models.GPT`, a Hugging Face GPT-2 or BERT model, or a
                :class:`~composer.models.HuggingFaceModel` wrapping one.
            max_sequence_length: Longest sequence the model will accept afterwards.
            train_sequence_length_scaling: Fraction of the training sequence length to train on.
            heads_per_layer: Attention heads per layer; None reads it from the model.

        Raises:
            ValueError: If no built-in policy fits the model (the message says which arguments to give instead).
        """
        _, paths = _find_policy(model)
        return cls(
            **paths,
            heads_per_layer=heads_per_layer,
            max_sequence_length=max_sequence_length,
            train_sequence_length_scaling=train_sequence_length_scaling,
        )

    def apply_to_model(
        self, model: nn.Module, optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None
    ) -> None:
        """The surgery this algorithm makes at ``INIT``: :func:`apply_alibi` with its paths imported.

        Applying it again (as ``INIT`` does on a model it was applied to) replaces the first set-up and changes nothing
        else; the recipe layer applies it before its dry run, so that the sample goes through the model training sees.

        Args:
            model: The model to change, in place.
            optimizers: Optimizers built on ``model``'s parameters; the removed parameters leave them.

        Example:
            >>> from composer.models import GPT, GPTConfig
            >>> model = GPT(GPTConfig(n_layer=1, n_embd=32, max_sequence_length=16))
            >>> Alibi.from_model(model, max_sequence_length=64).apply_to_model(model)
            >>> model({"input_ids": torch.zeros(1, 64, dtype=torch.long)}).shape
            torch.Size([1, 64, 256])
        """
        mask_function = self.mask_replacement_function
        apply_alibi(
            model,
            heads_per_layer=self.heads_per_layer,
            max_sequence_length=self.max_sequence_length,
            position_embedding_attribute=self.position_embedding_attribute,
            attention_module=_import_object(self.attention_module_name, "attention_module_name"),
            attr_to_replace=self.attr_to_replace,
            alibi_attention=_import_object(self.alibi_attention, "alibi_attention"),
            mask_replacement_function=(
                None if mask_function is None else _import_object(mask_function, "mask_replacement_function")
            ),
            optimizers=optimizers,
        )

    def train_sequence_length(self, seq_len: int) -> int:
        """The length of the training sequences made from batches of ``seq_len`` tokens per sequence.

        Args:
            seq_len: Tokens per sequence in the batches the dataloader yields.

        Returns:
            int: ``seq_len * train_sequence_length_scaling``.

        Raises:
            ValueError: If that is not a whole number of tokens dividing ``seq_len``.

        Example:
            >>> from composer.models import GPT, GPTConfig
            >>> alibi = Alibi.from_model(GPT(GPTConfig(n_layer=1)), train_sequence_length_scaling=0.25)
            >>> alibi.train_sequence_length(64)
            16
        """
        if self.train_sequence_length_scaling == 1.0:
            return seq_len
        return scaled_length(seq_len, self.train_sequence_length_scaling)

    def match(self, event: Event, state: State) -> bool:
        """Runs on ``INIT``; on ``AFTER_DATALOADER`` when scaling, unless a scheduled cut applies the scaling."""
        return event == Event.INIT or (
            event == Event.AFTER_DATALOADER
            and self.train_sequence_length_scaling != 1.0
            and not state.sequence_cut.scheduled
        )

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Performs the surgery at ``INIT``; reshapes the training batch to shorter sequences afterwards."""
        if event == Event.INIT:
            self.apply_to_model(state.model, optimizers=state.optimizers)
            cut = state.sequence_cut  # the shortest of the runs' scalings, should there be several ALiBis
            cut.scaling = min(cut.scaling, self.train_sequence_length_scaling)
            return
        state.batch = scale_sequence_length(state.batch_dict, self.train_sequence_length_scaling)


AlibiHparams = hparams_for(
    Alibi,
    defaults={
        "mask_replacement_function": None,
        "heads_per_layer": None,
        "max_sequence_length": 8192,
        "train_sequence_length_scaling": 0.25,
    },
)
"""See :class:`Alibi`; the fields are its arguments (YAML key ``alibi``).

The seed's defaults for the last four fields.
"""
