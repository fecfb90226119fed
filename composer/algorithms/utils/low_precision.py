"""What the low-precision norms (LayerNorm, GroupNorm) share: the autocast dtype, parameter casts, the algorithm.

Each norm's module runs its functional op in :func:`autocast_dtype` with autocast disabled, casting its weight and
bias with :func:`cast_optional`; each norm's algorithm is a :class:`LowPrecisionNormAlgorithm` that names the norm
and how to swap it.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import torch
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.logging.logger import Logger
from composer.core.precision import Precision
from composer.core.state import State

__all__ = ["LowPrecisionNormAlgorithm", "autocast_dtype", "cast_optional"]


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


def cast_optional(tensor: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``tensor`` cast to ``dtype``, or None for None (a norm without weight or bias).

    Example:
        >>> cast_optional(torch.ones(2), torch.bfloat16).dtype
        torch.bfloat16
        >>> cast_optional(None, torch.bfloat16) is None
        True
    """
    return None if tensor is None else tensor.to(dtype)


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

    def swap(self, model: nn.Module) -> None:
        """Replaces the norms of ``model`` with :attr:`module_class`, in place."""
        raise NotImplementedError

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
