"""Low-precision LayerNorm: under bf16 or fp16 autocast, layer norm runs in the autocast dtype instead of float32.

Autocast treats layer norm as a precision-sensitive op: on CUDA it upcasts the input to float32 and returns float32,
so every LayerNorm of a transformer reads and writes activations twice the size of the matmuls' and the next matmul
casts them back down. :class:`LowPrecisionLayerNorm` casts the input, weight and bias to the autocast dtype and runs
:func:`torch.nn.functional.layer_norm` with autocast disabled, so the norm reads and writes half-size tensors (the
kernels still accumulate the mean and variance in float32). Without autocast it is ``nn.LayerNorm`` exactly.
:func:`apply_low_precision_layernorm` swaps a model's LayerNorms for it; :class:`LowPrecisionLayerNorm` (the
algorithm) does that at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from composer.algorithms.utils.low_precision import LowPrecisionNormAlgorithm, LowPrecisionNormModule, swap_norms
from composer.core.hparams import hparams_for

__all__ = [
    "LowPrecisionLayerNorm",
    "LowPrecisionLayerNormHparams",
    "LowPrecisionLayerNormModule",
    "apply_low_precision_layernorm",
]


class LowPrecisionLayerNormModule(LowPrecisionNormModule, nn.LayerNorm):
    """``nn.LayerNorm`` that, under autocast, normalises in the autocast dtype (bf16 or fp16) instead of float32.

    With autocast on for the input's device, the input, weight and bias are cast to the autocast dtype and
    :func:`torch.nn.functional.layer_norm` runs with autocast disabled; the output has the autocast dtype. Without
    autocast it is ``nn.LayerNorm`` (same call, same result). The parameters stay float32: only their copies for the
    forward are cast, so the optimizer still updates float32 weights.

    Args:
        normalized_shape: Trailing shape to normalise over, as for ``nn.LayerNorm``.
        eps: Added to the variance for stability.
        elementwise_affine: Learn a per-element weight (and bias).
        bias: Learn a bias (with ``elementwise_affine``).
        device: Device of the parameters.
        dtype: Dtype of the parameters.

    Example:
        >>> norm = LowPrecisionLayerNormModule(8)
        >>> x = torch.randn(2, 8)
        >>> torch.equal(norm(x), torch.nn.LayerNorm(8)(x))  # no autocast: plain LayerNorm
        True
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     norm(x).dtype
        torch.bfloat16
    """

    @classmethod
    def from_layernorm(cls, module: nn.LayerNorm) -> LowPrecisionLayerNormModule:
        """Builds the low-precision version of ``module``, sharing its parameters (same state-dict keys)."""
        new = cls(module.normalized_shape, eps=module.eps, elementwise_affine=False)
        new.elementwise_affine = module.elementwise_affine
        return new.adopt(module)

    def normalize(self, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
        """Layer norm of ``x`` over ``normalized_shape``, with the given weight and bias."""
        return F.layer_norm(x, self.normalized_shape, weight, bias, self.eps)


def apply_low_precision_layernorm(
    model: nn.Module,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> nn.Module:
    """Replaces every ``nn.LayerNorm`` of ``model`` with a :class:`LowPrecisionLayerNormModule`, in place.

    The new modules share the old ones' parameters, so the state-dict keys do not change and an optimizer built
    earlier keeps training the same tensors. The change only shows under bf16 or fp16 autocast (the Trainer's
    ``precision='bf16'`` or ``'amp'``); in float32 the model computes exactly what it did. Warns (and changes
    nothing) when the model has no LayerNorm.

    Args:
        model: The model to change.
        optimizers: Optimizers already training ``model`` (see :func:`~composer.utils.replace_module_classes`).

    Returns:
        nn.Module: ``model``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8))
        >>> model = apply_low_precision_layernorm(model)
        >>> type(model[1]).__name__
        'LowPrecisionLayerNormModule'
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     model(torch.randn(3, 4)).dtype
        torch.bfloat16
    """

    swap_norms(model, nn.LayerNorm, LowPrecisionLayerNormModule, LowPrecisionLayerNormModule.from_layernorm, optimizers)
    return model


class LowPrecisionLayerNorm(LowPrecisionNormAlgorithm):
    """Runs the model's LayerNorms in bf16 or fp16 under mixed precision, instead of upcasting them to float32.

    At ``Event.INIT`` every ``nn.LayerNorm`` becomes a :class:`LowPrecisionLayerNormModule` sharing its parameters.
    It helps with ``precision='bf16'`` or ``'amp'``, where the norms then read and write half-size activations.
    With ``precision='fp32'`` there is nothing to do: the algorithm warns, and still swaps the modules (which then
    behave exactly as ``nn.LayerNorm``), so that a later run of the same model in mixed precision benefits. Logs
    ``LowPrecisionLayerNorm/num_new_modules``.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import GPT, GPTConfig
        >>> from composer.datasets import ByteTextDataset
        >>> from torch.utils.data import DataLoader
        >>> model = GPT(GPTConfig(n_layer=1, n_embd=16, n_head=2, max_sequence_length=16))
        >>> data = DataLoader(ByteTextDataset(b"some text to learn, byte by byte. " * 4, seq_len=16), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="2ba", precision="bf16",
        ...                   algorithms=[LowPrecisionLayerNorm()], progress_bar=False)
        >>> trainer.fit()
        >>> type(model.ln_f).__name__
        'LowPrecisionLayerNormModule'
    """

    norm = "LayerNorm"
    op = "layer norm"
    module_class = LowPrecisionLayerNormModule

    def swap(self, model: nn.Module) -> None:
        """Replaces the model's LayerNorms (see :func:`apply_low_precision_layernorm`)."""
        apply_low_precision_layernorm(model)


LowPrecisionLayerNormHparams = hparams_for(LowPrecisionLayerNorm)
"""See :class:`LowPrecisionLayerNorm`; the fields are its arguments (YAML key ``low_precision_layernorm``)."""
