"""Gated Linear Units (Shazeer 2020): a transformer's feed-forward block becomes a gated one of no more parameters.

A transformer's feed-forward block is ``act(x W1 + b1) W2 + b2`` with a hidden size ``h`` (4x the width in GPT-2 and
BERT). Its GLU variant multiplies the activated projection by a second, linear one: ``(act(x W + b) * (x V + c)) W2
+ d``. With three matrices instead of two, the hidden size is scaled by 2/3 (and rounded down to a multiple of
``multiple_of``) so that the block has at most the original's parameters and FLOPs. :func:`apply_gated_linear_units`
does that to our :class:`~composer.models.GPT` and to Hugging Face GPT-2 and BERT models; :class:`GatedLinearUnits`
does it at ``Event.INIT``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from composer.algorithms.gated_linear_units.layers import GatedLinearUnit, GLUFeedForward, check_activation
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.models.gpt import GPTBlock
from composer.utils.module_surgery import update_optimizer_params

__all__ = ["GatedLinearUnits", "GatedLinearUnitsHparams", "apply_gated_linear_units", "glu_hidden_size"]

_GPT2_MLP = "transformers.models.gpt2.modeling_gpt2.GPT2MLP"
_BERT_LAYER = "transformers.models.bert.modeling_bert.BertLayer"


def _check_multiple_of(multiple_of: int) -> None:
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of < 1:
        raise ValueError(
            f"multiple_of={multiple_of!r} must be a positive int (the GLU hidden size is rounded down to a multiple "
            "of it), such as 8, or 1 for no rounding."
        )


def glu_hidden_size(d_model: int, d_hidden: int, bias: bool = True, multiple_of: int = 8) -> int:
    """The hidden size of a GLU block that replaces a ``d_model -> d_hidden -> d_model`` feed-forward block.

    Starts from ``2 * d_hidden / 3`` rounded down to a multiple of ``multiple_of`` and goes down by ``multiple_of``
    until the GLU block (three matrices, biases if ``bias``) has at most the original block's parameters:
    ``3 d h' (+ 2 h' + d) <= 2 d h (+ h + d)``.

    Args:
        d_model: The block's input and output width.
        d_hidden: The original hidden size.
        bias: Whether the layers have biases.
        multiple_of: The GLU hidden size is a multiple of this.

    Returns:
        int: The GLU hidden size.

    Raises:
        ValueError: If no positive multiple of ``multiple_of`` fits.

    Example:
        >>> glu_hidden_size(128, 512)  # 2/3 of 512 is 341.3: 336, and 3*128*336 + 2*336 + 128 <= 2*128*512 + 640
        336
    """
    _check_multiple_of(multiple_of)

    def params(width: int, gated: bool) -> int:
        matrices = 3 if gated else 2
        return matrices * d_model * width + (((2 if gated else 1) * width + d_model) if bias else 0)

    budget = params(d_hidden, gated=False)
    size = (2 * d_hidden // 3) // multiple_of * multiple_of
    while size > 0 and params(size, gated=True) > budget:
        size -= multiple_of
    if size <= 0:
        raise ValueError(
            f"No GLU hidden size that is a multiple of multiple_of={multiple_of} fits the parameter budget of a "
            f"{d_model} -> {d_hidden} -> {d_model} feed-forward block; use a smaller multiple_of (such as 1)."
        )
    return size


def _class_names(module: nn.Module) -> set[str]:
    return {f"{cls.__module__}.{cls.__qualname__}" for cls in type(module).__mro__}


def _normal(shape: tuple[int, int], std: float, like: torch.Tensor, generator: torch.Generator | None) -> nn.Parameter:
    # Drawn on the CPU (the generator's device), then moved: the same seed gives the same weights on any device.
    weight = torch.randn(shape, generator=generator) * std
    return nn.Parameter(weight.to(device=like.device, dtype=like.dtype))


def _init_like(layer: nn.Linear, weight_std: float, like: torch.Tensor, generator: torch.Generator | None) -> nn.Linear:
    """``layer`` on ``like``'s device and dtype, weights ``N(0, weight_std)``, biases zero."""
    layer.weight = _normal((layer.out_features, layer.in_features), weight_std, like, generator)
    if layer.bias is not None:
        layer.bias = nn.Parameter(torch.zeros(layer.out_features, device=like.device, dtype=like.dtype))
    return layer


def _glu_block(
    w1: torch.Tensor,
    w2: torch.Tensor,
    d_model: int,
    d_hidden: int,
    bias: bool,
    dropout: float,
    activation: str,
    multiple_of: int,
    generator: torch.Generator | None,
) -> GLUFeedForward:
    """A GLU block for a feed-forward block with weights ``w1`` (in) and ``w2`` (out), initialised at their scales."""
    size = glu_hidden_size(d_model, d_hidden, bias=bias, multiple_of=multiple_of)
    block = GLUFeedForward(d_model, size, activation=activation, bias=bias, dropout=dropout)
    std_in, std_out = float(w1.detach().float().std()), float(w2.detach().float().std())
    _init_like(block.glu.w, std_in, w1, generator)
    _init_like(block.glu.v, std_in, w1, generator)
    _init_like(block.w2, std_out, w2, generator)
    return block


def _replace_gpt_mlp(block: GPTBlock, activation: str, multiple_of: int, generator: torch.Generator | None) -> bool:
    mlp = block.mlp
    if not isinstance(mlp, nn.Sequential) or len(mlp) != 4:
        return False  # already replaced, or changed by someone else
    fc, proj, drop = mlp[0], mlp[2], mlp[3]
    assert isinstance(fc, nn.Linear) and isinstance(proj, nn.Linear) and isinstance(drop, nn.Dropout)
    bias = fc.bias is not None
    d_model, d_hidden = fc.in_features, fc.out_features
    glu = _glu_block(fc.weight, proj.weight, d_model, d_hidden, bias, drop.p, activation, multiple_of, generator)
    setattr(block, "mlp", glu)  # noqa: B010 (GPTBlock declares mlp as the Sequential it builds)
    return True


def _gpt2_glu(mlp: Any, activation: str, multiple_of: int, generator: torch.Generator | None) -> nn.Module:
    # transformers' Conv1D stores its weight as (in_features, out_features).
    d_model, d_hidden = mlp.c_fc.weight.shape
    dropout = mlp.dropout.p if isinstance(mlp.dropout, nn.Dropout) else 0.0
    bias = mlp.c_fc.bias is not None
    block: nn.Module = _glu_block(
        mlp.c_fc.weight, mlp.c_proj.weight, d_model, d_hidden, bias, dropout, activation, multiple_of, generator
    )
    return block


def _replace_bert_ffn(layer: Any, activation: str, multiple_of: int, generator: torch.Generator | None) -> bool:
    # BertLayer's feed-forward is intermediate (dense + act) then output (dense, dropout, LayerNorm of the residual):
    # the gated layer takes intermediate's place and a narrower dense output.dense's; the rest of output stays.
    if isinstance(layer.intermediate, GatedLinearUnit):
        return False
    fc, proj = layer.intermediate.dense, layer.output.dense
    bias = fc.bias is not None
    block = _glu_block(
        fc.weight, proj.weight, fc.in_features, fc.out_features, bias, 0.0, activation, multiple_of, generator
    )
    layer.intermediate, layer.output.dense = block.glu, block.w2
    return True


def apply_gated_linear_units(
    model: nn.Module,
    activation: str = "gelu",
    multiple_of: int = 8,
    generator: torch.Generator | None = None,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> nn.Module:
    """Replaces the feed-forward blocks of a transformer with GLU blocks of at most as many parameters, in place.

    Knows our :class:`~composer.models.GPT` (each ``GPTBlock.mlp``), Hugging Face GPT-2 (each ``GPT2MLP``) and
    Hugging Face BERT (each ``BertLayer``'s ``intermediate`` and ``output.dense``). Each block ``d -> h -> d``
    becomes ``(act(x W + b) * (x V + c)) W2 + d`` with hidden size :func:`glu_hidden_size` (about ``2h/3``), the
    same biases as the original (present or not) and the same output dropout. The new weights are drawn from
    ``N(0, s)``, where ``s`` is the standard deviation of the original layer's weights (so a model's own
    initialisation scale, such as GPT-2's smaller residual projections, is kept), and the biases are zero: the
    method is for training from scratch. Warns when the model has no block it knows.

    Args:
        model: The model to change.
        activation: The gate's activation: ``'gelu'`` (GEGLU), ``'gelu_tanh'``, ``'relu'`` (ReGLU) or ``'silu'``
            (SwiGLU).
        multiple_of: The GLU hidden size is rounded down to a multiple of this (8 suits tensor cores).
        generator: Draws the new weights (None: torch's global generator).
        optimizers: Optimizers already training ``model``: the replaced parameters leave them and the new ones join
            them (see :func:`~composer.utils.update_optimizer_params`).

    Returns:
        nn.Module: ``model``.

    Example:
        >>> from composer.models import GPT, GPTConfig
        >>> model = GPT(GPTConfig(n_layer=2, n_embd=32, n_head=2))
        >>> before = sum(p.numel() for p in model.parameters())
        >>> model = apply_gated_linear_units(model, activation="silu", generator=torch.Generator().manual_seed(0))
        >>> model.blocks[0].mlp.glu.w
        Linear(in_features=32, out_features=80, bias=True)
        >>> sum(p.numel() for p in model.parameters()) <= before
        True
    """
    check_activation(activation)
    _check_multiple_of(multiple_of)
    before = dict(model.named_parameters())
    replaced = 0
    for module in list(model.modules()):
        names = _class_names(module)
        if isinstance(module, GPTBlock):
            replaced += _replace_gpt_mlp(module, activation, multiple_of, generator)
        elif _BERT_LAYER in names:
            replaced += _replace_bert_ffn(module, activation, multiple_of, generator)
        else:
            for name, child in list(module.named_children()):
                if _GPT2_MLP in _class_names(child):
                    setattr(module, name, _gpt2_glu(child, activation, multiple_of, generator))
                    replaced += 1
    if not replaced and not any(isinstance(m, (GatedLinearUnit, GLUFeedForward)) for m in model.modules()):
        warnings.warn(
            f"apply_gated_linear_units replaced nothing in {type(model).__name__}: it knows the feed-forward blocks of "
            "composer.models.GPT (GPTBlock.mlp), transformers GPT-2 (GPT2MLP) and BERT (BertLayer).",
            stacklevel=2,
        )
    if optimizers is not None and replaced:
        optimizer_list = [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
        update_optimizer_params(optimizer_list, before, dict(model.named_parameters()))
    return model


class GatedLinearUnits(Algorithm):
    """Replaces a transformer's feed-forward blocks with Gated Linear Unit blocks (GEGLU, ReGLU or SwiGLU).

    At ``Event.INIT``, :func:`apply_gated_linear_units` turns each feed-forward block of the model (our GPT,
    Hugging Face GPT-2 or BERT) into a GLU block with a hidden size of about 2/3 of the original's, so the parameter
    count does not grow; the new weights are drawn from the run's seeded generator. Logs
    ``GatedLinearUnits/num_new_modules``.

    Shazeer 2020, "GLU Variants Improve Transformer", https://arxiv.org/abs/2002.05202.

    Args:
        activation: ``'gelu'`` (GEGLU), ``'gelu_tanh'``, ``'relu'`` (ReGLU) or ``'silu'`` (SwiGLU).
        multiple_of: The GLU hidden size is rounded down to a multiple of this.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import GPT, GPTConfig
        >>> from composer.datasets import ByteTextDataset
        >>> from torch.utils.data import DataLoader
        >>> model = GPT(GPTConfig(n_layer=1, n_embd=16, n_head=2, max_sequence_length=16))
        >>> data = DataLoader(ByteTextDataset(b"some text to learn, byte by byte. " * 4, seq_len=16), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="2ba",
        ...                   algorithms=[GatedLinearUnits(activation="silu")], progress_bar=False)
        >>> trainer.fit()
        >>> type(model.blocks[0].mlp).__name__
        'GLUFeedForward'
    """

    def __init__(self, activation: str = "gelu", multiple_of: int = 8) -> None:
        check_activation(activation)
        _check_multiple_of(multiple_of)
        self.activation = activation
        self.multiple_of = multiple_of

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Replaces the model's feed-forward blocks; logs how many GLU layers it has."""
        apply_gated_linear_units(
            state.model, activation=self.activation, multiple_of=self.multiple_of, generator=state.rng
        )
        count = sum(isinstance(m, GatedLinearUnit) for m in state.model.modules())
        logger.metric_fit({"GatedLinearUnits/num_new_modules": count})


GatedLinearUnitsHparams = hparams_for(GatedLinearUnits)
"""See :class:`GatedLinearUnits`; the fields are its arguments (YAML key ``gated_linear_units``)."""
