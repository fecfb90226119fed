"""What the low-precision norms (LayerNorm, GroupNorm) share: the autocast dtype, parameter casts, the algorithm.

Each norm's module is a :class:`LowPrecisionNormModule`, which runs the module's functional op through
:func:`norm_in_autocast_dtype` (input, weight and bias cast to :func:`autocast_dtype`, autocast disabled);
:func:`swap_norms` replaces a model's norms with such modules; each norm's algorithm is a
:class:`LowPrecisionNormAlgorithm` that names the norm and how to swap it.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self, TypeVar

import torch
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.logging.logger import Logger
from composer.core.precision import Precision
from composer.core.state import State
from composer.utils.module_surgery import replace_module_classes

__all__ = [
    "LowPrecisionNormAlgorithm",
    "LowPrecisionNormModule",
    "autocast_dtype",
    "norm_in_autocast_dtype",
    "swap_norms",
]

_Norm = TypeVar("_Norm", bound=nn.Module)


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype autocast runs in on ``device``'s type, or None when autocast is off there.

    Example:
        >>> autocast_dtype(torch.device("cpu")) is None
        True
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     autocast_dtype(torch.device("cpu"))
        torch.bfloat16
    """
    if not torch.is_autocast_enabled(device.type):
        return None
    return torch.get_autocast_dtype(device.type)


def _cast(tensor: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return None if tensor is None else tensor.to(dtype)


def norm_in_autocast_dtype(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    norm: Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor | None], torch.Tensor],
) -> torch.Tensor | None:
    """``norm(input, weight, bias)`` with the three cast to the autocast dtype and autocast disabled, or None when
    autocast is off for ``input``'s device (the caller then runs its float32 norm).

    Example:
        >>> x = torch.randn(2, 8)
        >>> norm_in_autocast_dtype(x, None, None, lambda x, w, b: x) is None
        True
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     norm_in_autocast_dtype(x, None, None, lambda x, w, b: torch.nn.functional.layer_norm(x, (8,), w, b)).dtype
        torch.bfloat16
    """
    dtype = autocast_dtype(input.device)
    if dtype is None:
        return None
    with torch.autocast(device_type=input.device.type, enabled=False):
        return norm(input.to(dtype), _cast(weight, dtype), _cast(bias, dtype))


class LowPrecisionNormModule(nn.Module):
    """Base of the low-precision norm modules: under autocast, :meth:`normalize` runs in the autocast dtype.

    A subclass lists it before the ``torch.nn`` norm it changes (``class M(LowPrecisionNormModule, nn.LayerNorm)``)
    and implements :meth:`normalize`, the functional op with the module's settings. Under autocast, ``forward`` runs it
    through :func:`norm_in_autocast_dtype`; without autocast it is the ``torch.nn`` norm's own ``forward``.

    Example:
        >>> from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNormModule
        >>> isinstance(LowPrecisionLayerNormModule(8), LowPrecisionNormModule)
        True
    """

    weight: Any
    bias: Any

    def normalize(self, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
        """The norm of ``x`` with the given weight and bias, and the module's other settings (shape, groups, eps).

        Args:
            x: The input.
            weight: The weight, already cast as the input.
            bias: The bias, already cast as the input.

        Returns:
            torch.Tensor: The normalised input.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement normalize(x, weight, bias)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """The norm of ``input``, in the autocast dtype when autocast is on for its device."""
        out = norm_in_autocast_dtype(input, self.weight, self.bias, self.normalize)
        return super().forward(input) if out is None else out

    def adopt(self, module: nn.Module) -> Self:
        """Takes ``module``'s weight and bias (the same tensors, so the same state-dict keys) and its training mode.

        Args:
            module: The ``torch.nn`` norm this module replaces.

        Returns:
            Self: This module.
        """
        self.weight, self.bias = module.weight, module.bias
        self.train(module.training)
        return self


def swap_norms(
    model: nn.Module,
    norm_class: type[nn.Module],
    low_class: type[_Norm],
    build: Callable[[_Norm], nn.Module],
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None,
) -> None:
    """Replaces each ``norm_class`` module of ``model`` that is not already a ``low_class`` with ``build(module)``,
    in place (see :func:`~composer.utils.replace_module_classes`, which warns when nothing is replaced).

    Example:
        >>> from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNormModule
        >>> model = torch.nn.Sequential(torch.nn.LayerNorm(4))
        >>> ln = torch.nn.LayerNorm
        >>> swap_norms(model, ln, LowPrecisionLayerNormModule, LowPrecisionLayerNormModule.from_layernorm, None)
        >>> type(model[0]).__name__
        'LowPrecisionLayerNormModule'
    """

    def policy(module: nn.Module, index: int) -> nn.Module | None:
        if isinstance(module, low_class):
            return None
        assert isinstance(module, norm_class)
        return build(module)  # type: ignore[arg-type]  # a norm_class module, as built by `build`

    replace_module_classes(model, {norm_class: policy}, optimizers=optimizers)


class LowPrecisionNormAlgorithm(Algorithm):
    """Base of the algorithms that swap a norm for its low-precision module at ``Event.INIT``.

    A subclass names the norm (``norm``, e.g. ``"LayerNorm"``; ``op``, e.g. ``"layer norm"``), the module class it
    installs (``module_class``) and implements :meth:`swap`. With ``precision='fp32'`` it warns (the norm already runs in
    float32) and swaps anyway; it logs ``LowPrecision<norm>/num_new_modules``.

    Example:
        >>> from composer.algorithms import LowPrecisionLayerNorm
        >>> isinstance(LowPrecisionLayerNorm(), LowPrecisionNormAlgorithm)
        True
    """

    norm: ClassVar[str]
    """The norm's class name in ``torch.nn``, e.g. ``"LayerNorm"``."""
    op: ClassVar[str]
    """The norm's operation in words, e.g. ``"layer norm"``."""
    module_class: ClassVar[type[nn.Module]]
    """The low-precision module class that :meth:`swap` installs."""

    @abstractmethod
    def swap(self, model: nn.Module) -> None:
        """Replaces the norms of ``model`` with :attr:`module_class`, in place."""

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Swaps the model's norms; warns when the run is in float32; logs how many modules it swapped."""
        name = f"LowPrecision{self.norm}"
        if state.precision == Precision.FP32:
            warnings.warn(
                f"{name} has no effect with precision='fp32': {self.op} already runs in float32. The "
                f"{self.norm}s are replaced anyway and behave exactly as nn.{self.norm} without autocast. To use it, "
                "train with precision='bf16' (CPU or GPU) or 'amp' (GPU), or remove the algorithm.",
                stacklevel=2,
            )
        self.swap(state.model)
        count = sum(isinstance(m, self.module_class) for m in state.model.modules())
        logger.metric_fit({f"{name}/num_new_modules": count})
