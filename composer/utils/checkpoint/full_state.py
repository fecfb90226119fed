"""The whole state of a model sharded with FSDP, gathered onto rank 0, and a whole state cut back into shards.

A model sharded with FSDP's ``fully_shard`` holds its parameters as ``DTensor`` shards under their usual names, and
its optimizer's state tensors are shards alike. This is the one place that turns them into the state of an unsharded
run (the model's ``state_dict()``, and ``optimizer.state_dict()`` with parameters numbered, not named) and back:
full (``state_dict_type='full'``) checkpoints and :mod:`composer.distributed.fsdp`'s ``full_*_state_dict`` helpers both
use it. Gathering is a collective: every rank gathers each sharded tensor in turn, and only rank 0 keeps the whole
tensors, on its CPU. Cutting back needs no communication when every rank holds the whole tensor (read from the same
file); when only rank 0 does, :func:`broadcast_full_state` sends each tensor in turn and every rank keeps its shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from composer.core.state import bare_model_state, unwrap_model
from composer.utils import dist

__all__ = [
    "broadcast_full_state",
    "full_model_state",
    "full_optimizer_state",
    "gather_full_state",
    "is_sharded",
    "shard_like",
    "shard_optimizer_state",
]


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether some parameter of ``model`` is a ``DTensor`` (a model sharded with FSDP's ``fully_shard``)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return False
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in unwrap_model(model).parameters())


def gather_full_state(value: Any, keep: bool) -> Any:
    """``value`` (nested dicts, lists and tuples) with every ``DTensor`` gathered whole, in a fixed order.

    With ``keep`` the whole tensors land on the CPU, and plain tensors are copied there too, so that the result is
    a snapshot that later training does not change (buffers and optimizer step counters are live tensors); without
    it (ranks other than 0) each gathered tensor is dropped at once and tensors become None.
    """
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        whole = value.full_tensor()
        return whole.cpu() if keep else None
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True) if keep else None
    if isinstance(value, Mapping):
        return {key: gather_full_state(item, keep) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(gather_full_state(item, keep) for item in value)
    return value


def full_model_state(model: torch.nn.Module) -> dict[str, Any]:
    """The whole weights of a sharded model (bare keys, as an unsharded run saves them) on rank 0; ``{}`` elsewhere.

    A collective: every rank calls it.
    """
    keep = dist.get_global_rank() == 0
    whole = gather_full_state(bare_model_state(model), keep)
    return whole if keep else {}


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The whole state of an optimizer over sharded parameters on rank 0, laid out as ``optimizer.state_dict()``
    (parameters numbered in the order of its groups); ``{}`` elsewhere. A collective: every rank calls it."""
    keep = dist.get_global_rank() == 0
    whole = gather_full_state(optimizer.state_dict(), keep)
    return whole if keep else {}


def shard_like(value: Any, like: Any) -> Any:
    """A whole tensor cut into this rank's shard the way the ``DTensor`` ``like`` is (every rank holds the same
    whole tensor, so no communication is needed); anything else (or a tensor of another shape) as it is."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not isinstance(like, DTensor) or not isinstance(value, torch.Tensor) or isinstance(value, DTensor):
        return value
    if value.shape != like.shape:
        return value
    return distribute_tensor(value.to(like.device), like.device_mesh, like.placements, src_data_rank=None)


def shard_optimizer_state(optimizer: torch.optim.Optimizer, saved: Mapping[str, Any]) -> dict[str, Any]:
    """A whole optimizer state (``optimizer.state_dict()``'s layout) cut to the shards of this rank's sharded
    parameters: each state tensor shaped like its parameter becomes a ``DTensor`` shard like it."""
    params = _numbered_params(optimizer)
    per_param = {
        index: {key: shard_like(value, params.get(index)) for key, value in values.items()}
        for index, values in saved.get("state", {}).items()
    }
    return {**saved, "state": per_param}


def broadcast_full_state(value: Any, place: Callable[[tuple[Any, ...], torch.Tensor], Any]) -> Any:
    """Rank 0's ``value`` (nested dicts and lists of tensors and plain values) on every rank, with each tensor
    handed to ``place(path, tensor)`` as soon as it arrives, and replaced by what that returns (this rank's shard).

    A collective: every rank calls it; ranks other than 0 pass anything (``{}``). The layout goes first (one
    small object broadcast), then the tensors one at a time, so no rank holds more than one whole tensor extra.
    """
    layout = dist.broadcast_object_list([_layout(value) if dist.get_global_rank() == 0 else None])[0]
    return _fill(layout, value, (), place)


class _TensorSpec:
    """Where a tensor goes in a broadcast layout: its shape and dtype (the data follows on its own)."""

    def __init__(self, shape: Sequence[int], dtype: torch.dtype) -> None:
        self.shape, self.dtype = tuple(shape), dtype


def _layout(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _TensorSpec(value.shape, value.dtype)
    if isinstance(value, Mapping):
        return {key: _layout(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_layout(item) for item in value)
    return value


def _fill(layout: Any, value: Any, path: tuple[Any, ...], place: Callable[[tuple[Any, ...], torch.Tensor], Any]) -> Any:
    if isinstance(layout, _TensorSpec):
        device = _communication_device()
        if dist.get_global_rank() == 0:
            tensor = value.detach().to(device)
        else:
            tensor = torch.empty(layout.shape, dtype=layout.dtype, device=device)
        torch.distributed.broadcast(tensor, src=0)
        return place(path, tensor)
    if isinstance(layout, Mapping):
        return {
            key: _fill(item, value.get(key) if isinstance(value, Mapping) else None, (*path, key), place)
            for key, item in layout.items()
        }
    if isinstance(layout, (list, tuple)):
        items = value if isinstance(value, (list, tuple)) else [None] * len(layout)
        return type(layout)(_fill(item, v, (*path, i), place) for i, (item, v) in enumerate(zip(layout, items)))
    return layout


def _communication_device() -> torch.device:
    """Where tensors must be for a collective: the current GPU under NCCL, else the CPU."""
    if "nccl" in str(torch.distributed.get_backend()):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _numbered_params(optimizer: torch.optim.Optimizer) -> dict[int, torch.Tensor]:
    """The optimizer's parameters by the number ``state_dict()`` gives them (in the order of its groups)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return dict(enumerate(params))
