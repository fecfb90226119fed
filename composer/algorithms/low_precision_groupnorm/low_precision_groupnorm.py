"""Low-precision GroupNorm: under bf16 or fp16 autocast, group norm runs in the autocast dtype instead of float32.

Autocast treats group norm as a precision-sensitive op: on CUDA it upcasts the input to float32 and returns float32,
so each GroupNorm of a network reads and writes activations twice the size of the convolutions' around it.
:class:`LowPrecisionGroupNormModule` casts the input, weight and bias to the autocast dtype and runs
:func:`torch.nn.functional.group_norm` with autocast disabled (the kernels still accumulate the statistics in
float32). Without autocast it is ``nn.GroupNorm`` exactly. :func:`apply_low_precision_groupnorm` swaps a model's
GroupNorms for it; :class:`LowPrecisionGroupNorm` does that at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from composer.algorithms.utils.low_precision import LowPrecisionNormAlgorithm, LowPrecisionNormModule, swap_norms
from composer.core.hparams import hparams_for

__all__ = [
    "LowPrecisionGroupNorm",
    "LowPrecisionGroupNormHparams",
    "LowPrecisionGroupNormModule",
    "apply_low_precision_groupnorm",
]


class LowPrecisionGroupNormModule(LowPrecisionNormModule, nn.GroupNorm):
    """``nn.GroupNorm`` that, under autocast, normalises in the autocast dtype (bf16 or fp16) instead of float32.

    With autocast on for the input's device, the input, weight and bias are cast to the autocast dtype and
    :func:`torch.nn.functional.group_norm` runs with autocast disabled; the output has the autocast dtype. Without
    autocast it is ``nn.GroupNorm`` (same call, same result). The parameters stay float32.

    Args:
        num_groups: Groups the channels are split into.
        num_channels: Channels ``C`` of the ``(N, C, ...)`` input.
        eps: Added to the variance for stability.
        affine: Learn a per-channel weight and bias.
        bias: Learn the bias too (with ``affine``).
        device: Device of the parameters.
        dtype: Dtype of the parameters.

    Example:
        >>> norm = LowPrecisionGroupNormModule(2, 4)
        >>> x = torch.randn(3, 4, 5, 5)
        >>> torch.equal(norm(x), torch.nn.GroupNorm(2, 4)(x))  # no autocast: plain GroupNorm
        True
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     norm(x).dtype
        torch.bfloat16
    """

    @classmethod
    def from_groupnorm(cls, module: nn.GroupNorm) -> LowPrecisionGroupNormModule:
        """Builds the low-precision version of ``module``, sharing its parameters (same state-dict keys)."""
        new = cls(module.num_groups, module.num_channels, eps=module.eps, affine=False)
        new.affine = module.affine
        return new.adopt(module)

    def normalize(self, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
        """Group norm of ``x`` (``(N, C, ...)``) in ``num_groups`` groups, with the given weight and bias."""
        return F.group_norm(x, self.num_groups, weight, bias, self.eps)


def apply_low_precision_groupnorm(
    model: nn.Module,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> nn.Module:
    """Replaces every ``nn.GroupNorm`` of ``model`` with a :class:`LowPrecisionGroupNormModule`, in place.

    The new modules share the old ones' parameters, so the state-dict keys do not change and an optimizer built
    earlier keeps training the same tensors. The change only shows under bf16 or fp16 autocast; in float32 the model
    computes exactly what it did. Warns (and changes nothing) when the model has no GroupNorm.

    Args:
        model: The model to change.
        optimizers: Optimizers already training ``model`` (see :func:`~composer.utils.replace_module_classes`).

    Returns:
        nn.Module: ``model``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(4, 8))
        >>> model = apply_low_precision_groupnorm(model)
        >>> type(model[1]).__name__
        'LowPrecisionGroupNormModule'
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     model(torch.randn(2, 3, 6, 6)).dtype
        torch.bfloat16
    """

    swap_norms(model, nn.GroupNorm, LowPrecisionGroupNormModule, LowPrecisionGroupNormModule.from_groupnorm, optimizers)
    return model


class LowPrecisionGroupNorm(LowPrecisionNormAlgorithm):
    """Runs the model's GroupNorms in bf16 or fp16 under mixed precision, instead of upcasting them to float32.

    At ``Event.INIT`` every ``nn.GroupNorm`` becomes a :class:`LowPrecisionGroupNormModule` sharing its parameters.
    It helps with ``precision='bf16'`` or ``'amp'``. With ``precision='fp32'`` there is nothing to do: the algorithm
    warns, and still swaps the modules (which then behave exactly as ``nn.GroupNorm``). Logs
    ``LowPrecisionGroupNorm/num_new_modules``.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import ComposerClassifier
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.GroupNorm(2, 8), torch.nn.ReLU(),
        ...                           torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 3))
        >>> model = ComposerClassifier(net, num_classes=3)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="2ba", precision="bf16",
        ...                   algorithms=[LowPrecisionGroupNorm()], progress_bar=False)
        >>> trainer.fit()
        >>> type(net[1]).__name__
        'LowPrecisionGroupNormModule'
    """

    norm = "GroupNorm"
    op = "group norm"
    module_class = LowPrecisionGroupNormModule

    def swap(self, model: nn.Module) -> None:
        """Replaces the model's GroupNorms (see :func:`apply_low_precision_groupnorm`)."""
        apply_low_precision_groupnorm(model)


LowPrecisionGroupNormHparams = hparams_for(LowPrecisionGroupNorm)
"""See :class:`LowPrecisionGroupNorm`; the fields are its arguments (YAML key ``low_precision_groupnorm``)."""
