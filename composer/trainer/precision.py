"""Numeric precision: the autocast context for forward and loss, and the gradient scaler for fp16."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from composer.core.precision import Precision

__all__ = ["autocasting", "make_grad_scaler", "precision_context"]

T = TypeVar("T")


def precision_context(
    precision: Precision, device: torch.device
) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A factory of the context that forward and loss run under.

    ``fp32`` runs as is; ``bf16`` autocasts to bfloat16 (CPU and CUDA); ``amp`` autocasts to float16. Losses
    computed under autocast come out in float32 for the reductions autocast keeps in float32 (such as
    cross-entropy).

    Example:
        >>> ctx = precision_context(Precision.BF16, torch.device("cpu"))
        >>> with ctx():
        ...     y = torch.nn.Linear(2, 2)(torch.ones(1, 2))
        >>> y.dtype
        torch.bfloat16
    """
    if precision == Precision.FP32:
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == Precision.BF16 else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def autocasting(
    fn: Callable[..., T], context: Callable[[], contextlib.AbstractContextManager[Any]] | None
) -> Callable[..., T]:
    """``fn``, entering ``context()`` around each call; ``fn`` itself when ``context`` is None (fp32 enters nothing).

    Example:
        >>> linear = torch.nn.Linear(2, 2)
        >>> autocasting(linear, None) is linear
        True
        >>> autocasting(linear, precision_context(Precision.BF16, torch.device("cpu")))(torch.ones(1, 2)).dtype
        torch.bfloat16
    """
    if context is None:
        return fn

    def autocast_call(*args: Any, **kwargs: Any) -> T:
        with context():
            return fn(*args, **kwargs)

    return autocast_call


def make_grad_scaler(precision: Precision, device: torch.device) -> torch.amp.GradScaler | None:
    """The gradient scaler for ``amp`` (fp16) training, or None for precisions that need none."""
    if precision != Precision.AMP:
        return None
    return torch.amp.GradScaler(device.type)
