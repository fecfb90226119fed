"""torch.distributed, with every call also working unlaunched (one process, world size 1).

Launch with ``torchrun`` (or ``composer launch``): it sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, which these helpers read until the process group exists.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as torch_dist
from torch.utils.data import Dataset, DistributedSampler, RandomSampler, Sampler, SequentialSampler

__all__ = [
    "all_gather",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "get_global_rank",
    "get_local_rank",
    "get_local_world_size",
    "get_node_rank",
    "get_sampler",
    "get_world_size",
    "initialize_dist",
    "is_initialized",
]

T = TypeVar("T")


def is_initialized() -> bool:
    """Whether a torch.distributed process group exists."""
    return torch_dist.is_available() and torch_dist.is_initialized()


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError as e:
        raise ValueError(f"Environment variable {name}={value!r} must be an integer (set by torchrun).") from e


def get_world_size() -> int:
    """The number of processes in the job (1 unlaunched).

    Example:
        >>> get_world_size()
        1
    """
    return torch_dist.get_world_size() if is_initialized() else _env_int("WORLD_SIZE", 1)


def get_global_rank() -> int:
    """This process's rank among all processes (0 unlaunched)."""
    return torch_dist.get_rank() if is_initialized() else _env_int("RANK", 0)


def get_local_rank() -> int:
    """This process's rank on its node (0 unlaunched)."""
    return _env_int("LOCAL_RANK", 0)


def get_local_world_size() -> int:
    """The number of processes on this node (1 unlaunched)."""
    return _env_int("LOCAL_WORLD_SIZE", 1)


def get_node_rank() -> int:
    """This node's index (0 unlaunched): ``GROUP_RANK`` or ``NODE_RANK`` from the launcher, else rank // local size."""
    if "GROUP_RANK" in os.environ or "NODE_RANK" in os.environ:
        return _env_int("GROUP_RANK", _env_int("NODE_RANK", 0))
    return get_global_rank() // max(1, get_local_world_size())


def initialize_dist(backend: str | None = None, timeout: float = 300.0) -> bool:
    """Creates the process group when launched with several processes; returns whether one exists.

    Args:
        backend (str, optional): ``'gloo'`` or ``'nccl'``; default ``'nccl'`` when CUDA is available, else ``'gloo'``.
        timeout (float): Seconds a collective may wait before the job fails (instead of hanging).
    """
    if is_initialized():
        return True
    if _env_int("WORLD_SIZE", 1) == 1:
        return False
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(
            f"WORLD_SIZE={os.environ['WORLD_SIZE']} but {missing} are not set; launch with torchrun (or "
            "`composer launch -n N script.py`), which sets them."
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    torch_dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout))
    return True


def barrier() -> None:
    """Waits until every process gets here (no-op unlaunched)."""
    if is_initialized():
        torch_dist.barrier()


def all_reduce(tensor: torch.Tensor, reduce_operation: str = "sum") -> torch.Tensor:
    """Reduces ``tensor`` across processes in place (``'sum'``, ``'min'``, ``'max'``, ``'product'``) and returns it.

    Example:
        >>> all_reduce(torch.tensor([1.0, 2.0]))
        tensor([1., 2.])
    """
    ops = {
        "sum": torch_dist.ReduceOp.SUM,
        "min": torch_dist.ReduceOp.MIN,
        "max": torch_dist.ReduceOp.MAX,
        "product": torch_dist.ReduceOp.PRODUCT,
    }
    if reduce_operation not in ops:
        raise ValueError(f"reduce_operation={reduce_operation!r}; expected one of {sorted(ops)}.")
    if is_initialized():
        torch_dist.all_reduce(tensor, op=ops[reduce_operation])
    return tensor


def broadcast(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    """Copies ``tensor`` from rank ``src`` to every process, in place, and returns it."""
    if is_initialized():
        torch_dist.broadcast(tensor, src=src)
    return tensor


def broadcast_object_list(objects: list[Any], src: int = 0) -> list[Any]:
    """Copies a list of picklable objects from rank ``src`` to every process, in place, and returns it."""
    if is_initialized():
        torch_dist.broadcast_object_list(objects, src=src)
    return objects


def all_gather(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every process's ``tensor`` (same shape on each), in rank order.

    Example:
        >>> all_gather(torch.tensor([3]))
        [tensor([3])]
    """
    if not is_initialized():
        return [tensor]
    gathered = [torch.empty_like(tensor) for _ in range(torch_dist.get_world_size())]
    torch_dist.all_gather(gathered, tensor)
    return gathered


def all_gather_object(obj: T) -> list[T]:
    """Every process's picklable ``obj``, in rank order."""
    if not is_initialized():
        return [obj]
    gathered: list[Any] = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(gathered, obj)
    return gathered


def get_sampler(dataset: Dataset[Any], *, shuffle: bool, drop_last: bool = False, seed: int = 0) -> Sampler[int]:
    """The sampler that gives this process its share of ``dataset``.

    Unlaunched: a plain random or sequential sampler. Launched: a ``DistributedSampler`` (call ``set_epoch`` every
    epoch; the Trainer does).

    Args:
        dataset (Dataset): A map-style dataset (with ``__len__``).
        shuffle (bool): Whether to shuffle each epoch.
        drop_last (bool): Drop the tail so every process gets the same number of samples.
        seed (int): The shuffling seed shared by all processes.
    """
    if not isinstance(dataset, Sequence) and not hasattr(dataset, "__len__"):
        raise TypeError(f"get_sampler needs a map-style dataset with a length, got {type(dataset).__name__}.")
    if get_world_size() > 1:
        return DistributedSampler(
            dataset,
            num_replicas=get_world_size(),
            rank=get_global_rank(),
            shuffle=shuffle,
            drop_last=drop_last,
            seed=seed,
        )
    if shuffle:
        return RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    return SequentialSampler(dataset)
