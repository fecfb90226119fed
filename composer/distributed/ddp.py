"""DistributedDataParallel: wrapping the model, wrapping it anew when its parameters' layout changed, and when the
gradients of accumulated microbatches synchronise (also for a model sharded with FSDP's ``fully_shard``).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from composer.distributed.process_group import is_launched

__all__ = ["DDPSyncStrategy", "ddp_sync_context", "parameter_layout", "rewrap_ddp", "wrap_ddp"]


class DDPSyncStrategy(enum.StrEnum):
    """When DistributedDataParallel all-reduces gradients during gradient accumulation.

    Attributes:
        SINGLE_AUTO_SYNC: Only the last microbatch of a batch syncs (the others run under ``no_sync``): one
            all-reduce per optimizer step. The default.
        MULTI_AUTO_SYNC: Every microbatch syncs: ``grad_accum`` all-reduces per step (for models whose forward must
            not run under ``no_sync``).
    """

    SINGLE_AUTO_SYNC = "single_auto_sync"
    MULTI_AUTO_SYNC = "multi_auto_sync"

    @classmethod
    def parse(cls, value: str | DDPSyncStrategy) -> DDPSyncStrategy:
        """The strategy named ``value``; a ValueError listing the choices otherwise.

        Example:
            >>> DDPSyncStrategy.parse("multi_auto_sync")
            <DDPSyncStrategy.MULTI_AUTO_SYNC: 'multi_auto_sync'>
        """
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"ddp_sync_strategy={value!r} is not one of {[s.value for s in cls]}.") from None


def wrap_ddp(
    model: torch.nn.Module, device: torch.device, *, find_unused_parameters: bool
) -> DistributedDataParallel | None:
    """The model wrapped in ``DistributedDataParallel`` (None unlaunched, or when no parameter needs a gradient).

    Wrapping broadcasts rank 0's parameters and buffers, so every rank starts from the same weights.

    Args:
        model (torch.nn.Module): The model, already on ``device``.
        device (torch.device): This rank's device.
        find_unused_parameters (bool): Expect parameters that get no gradient in some steps (frozen or dropped
            layers); costs a graph traversal per step.
    """
    if not is_launched() or not any(p.requires_grad for p in model.parameters()):
        return None
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=find_unused_parameters)


def parameter_layout(model: torch.nn.Module) -> list[tuple[Any, ...]]:
    """What ``DistributedDataParallel`` lays its gradient buckets out by: each parameter's identity, shape, strides
    (its memory format), dtype, device and whether it needs a gradient. A wrapper built before one of these changed
    copies that gradient into its bucket every step (PyTorch warns "Grad strides do not match bucket view strides"),
    or never averages a parameter that replaced one; :func:`rewrap_ddp` builds one for the parameters as they are.

    Example:
        >>> conv = torch.nn.Conv2d(3, 4, 3)
        >>> before = parameter_layout(conv)
        >>> before == parameter_layout(conv.to(memory_format=torch.channels_last))
        False
    """
    return [(id(p), p.shape, p.stride(), p.dtype, p.device, p.requires_grad) for p in model.parameters()]


def rewrap_ddp(ddp: DistributedDataParallel, device: torch.device) -> DistributedDataParallel | None:
    """A new ``DistributedDataParallel`` over ``ddp.module`` for its parameters as they are now (after an algorithm
    changed their layout: :func:`parameter_layout`), with ``ddp``'s ``find_unused_parameters`` and the communication
    hooks registered on it (``register_comm_hook``); ``ddp`` stops reducing gradients (its autograd hooks are
    removed), so it must not be used again. Every rank must call it (wrapping checks the shapes across ranks and
    broadcasts rank 0's weights). None when no parameter needs a gradient any more.

    Args:
        ddp (DistributedDataParallel): The wrapper built before the change.
        device (torch.device): This rank's device.
    """
    reducer = getattr(ddp, "reducer", None)
    if reducer is not None:  # else its hooks would still all-reduce into its stale buckets (torch keeps no public API)
        reducer._remove_autograd_hooks()
    new = wrap_ddp(ddp.module, device, find_unused_parameters=ddp.find_unused_parameters)
    if new is not None:
        for hook, hook_state in getattr(ddp, "_comm_hooks", []):
            new.register_comm_hook(hook_state, hook)
    return new


def ddp_sync_context(
    model: torch.nn.Module | None, strategy: DDPSyncStrategy, is_final_microbatch: bool
) -> contextlib.AbstractContextManager[Any]:
    """The context to run one microbatch's forward and backward in: ``no_sync`` when its gradients are only
    accumulated, else nothing.

    ``model`` is the ``DistributedDataParallel`` wrapper (its ``no_sync()``), a model sharded with FSDP's
    ``fully_shard`` (``set_requires_gradient_sync(False)`` inside the context, True again after it: the gradients
    accumulate unsharded and are reduce-scattered by the syncing microbatch's backward), or None (nothing to sync).

    Example:
        >>> with ddp_sync_context(None, DDPSyncStrategy.SINGLE_AUTO_SYNC, is_final_microbatch=False):
        ...     pass
    """
    if model is None or is_final_microbatch or strategy is DDPSyncStrategy.MULTI_AUTO_SYNC:
        return contextlib.nullcontext()
    if isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return _fsdp_no_sync(model)


@contextlib.contextmanager
def _fsdp_no_sync(model: Any) -> Iterator[None]:
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
