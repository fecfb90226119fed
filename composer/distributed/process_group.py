"""This process among the ranks: the process group, per-rank seeds, which log destinations a rank keeps, and errors
and heartbeats that name their rank.

The Trainer does not call these itself: :class:`~composer.distributed.parallelism.Parallelism` decides when each
applies (and skips them all in a single process). They are public for scripts that run their own loop, as are the
pieces in :mod:`composer.distributed.data` and :mod:`composer.distributed.ddp`: each is a no-op, and nearly free,
unlaunched (``torchrun`` sets ``WORLD_SIZE`` > 1 when it is not). See ``composer/distributed/DISTRIBUTED.md``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import torch

from composer.core.logging.logger import LoggerDestination
from composer.core.time import Timer
from composer.utils import dist
from composer.utils.seeding import seed_all

__all__ = [
    "add_rank_note",
    "agree_on_seed",
    "heartbeat",
    "init_distributed",
    "is_launched",
    "rank_zero_destinations",
    "seed_rank",
]


def is_launched() -> bool:
    """Whether this process trains together with others (world size > 1).

    Example:
        >>> is_launched()
        False
    """
    return dist.get_world_size() > 1


# ---- the process group -------------------------------------------------------------------------------------------


def init_distributed(device: torch.device, timeout: float) -> torch.device:
    """Creates the process group when launched (if the script has not), and returns the device this rank uses.

    Unlaunched it returns ``device`` and does nothing else. Launched: on CUDA, each rank takes the device of its
    ``LOCAL_RANK`` (unless ``device`` names one) and the backend is nccl; on CPU the backend is gloo and torch runs one
    thread per rank unless ``OMP_NUM_THREADS`` is set (``torchrun`` sets it to 1 by itself). ``timeout`` bounds
    every collective: a rank that stops answering makes the others fail after that long instead of hanging.

    Args:
        device (torch.device): The device the Trainer resolved.
        timeout (float): Seconds, passed to ``init_process_group``.

    Example:
        >>> init_distributed(torch.device("cpu"), timeout=30.0)
        device(type='cpu')
    """
    if not timeout > 0:
        raise ValueError(f"dist_timeout={timeout!r} must be a positive number of seconds.")
    if not is_launched():
        return device
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", dist.get_local_rank())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    elif "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # ranks share the machine's cores: one thread each
    dist.initialize_dist("nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return device


def agree_on_seed(seed: int) -> int:
    """Rank 0's ``seed``, on every rank (so that a seed drawn at random is the same everywhere)."""
    return int(dist.broadcast_object_list([seed])[0]) if is_launched() else seed


def seed_rank(rank_zero_seed: int) -> None:
    """Launched: seeds Python, NumPy and torch with ``rank_zero_seed + rank`` (``state.seed``), so each rank draws
    its own dropout masks and augmentations. Call it once the model is built and wrapped. Unlaunched: nothing."""
    if is_launched():
        seed_all((rank_zero_seed + dist.get_global_rank()) % 2**32)


# ---- logging and errors --------------------------------------------------------------------------------------------


def rank_zero_destinations(
    destinations: Sequence[LoggerDestination], rank_zero_only: tuple[type[LoggerDestination], ...]
) -> list[LoggerDestination]:
    """The destinations this rank keeps: all of them on rank 0; on the others, those that are not instances of
    ``rank_zero_only`` (the Trainer passes :data:`composer.loggers.RANK_ZERO_DESTINATIONS`: the console, files and
    trackers, so that the console shows one progress bar and each file is written once).

    Example:
        >>> rank_zero_destinations([], rank_zero_only=())
        []
    """
    if dist.get_global_rank() == 0:
        return list(destinations)
    return [d for d in destinations if not isinstance(d, rank_zero_only)]


_COLLECTIVE_FAILURE_HINTS = ("connection closed by peer", "timed out", "timeout", "connection reset", "broken pipe")


def add_rank_note(error: BaseException) -> None:
    """Launched: notes on ``error`` which rank raised it (``'rank 1 of 2: ...'``) and, for a failed collective, that
    another rank's error is most likely the cause. Unlaunched: nothing."""
    if not is_launched():
        return
    rank, world_size = dist.get_global_rank(), dist.get_world_size()
    prefix = f"rank {rank} of {world_size}"
    if any(note.startswith(prefix) for note in getattr(error, "__notes__", [])):
        return
    message = str(error).lower()
    if isinstance(error, torch.distributed.DistError) or any(h in message for h in _COLLECTIVE_FAILURE_HINTS):
        lagging = dist.describe_lagging(dist.read_heartbeats())
        cause = f" Heartbeats: {'; '.join(lagging)}." if lagging else ""
        note = (
            f"{prefix}: a collective operation failed, most likely because another rank failed or stopped "
            f"answering; its own error (noted with its rank) is the cause.{cause}"
        )
    else:
        note = f"{prefix} raised this error; the other ranks stop at their next collective (at most dist_timeout)."
    error.add_note(note)


@contextlib.contextmanager
def heartbeat(model: torch.nn.Module | None, timer: Timer) -> Iterator[dist.Heartbeat | None]:
    """Launched: runs a :class:`composer.utils.dist.Heartbeat` for the duration of the block (the Trainer: ``fit``),
    and gives it to the block (None when there is none).

    Each training forward pass through ``model`` (the DDP wrapper or the FSDP-sharded model: the same number of
    passes on every rank; with ``grad_accum='auto'`` the passes of an attempt that every rank runs again are taken
    back, see :class:`~composer.distributed.microbatching.Microbatching`) advances it, through a forward pre-hook
    (about a microsecond). Its thread publishes the progress and the batch (``timer.batch``) to the process group's
    store once a second at most; when the ranks have waited ``dist_timeout`` (the process group's timeout) for a rank
    that fell behind, every rank prints which one stopped answering and where, and ends with exit status 1, so that
    ``torchrun`` stops the job at once. Unlaunched, or without a model to hook: nothing.

    Example:
        >>> with heartbeat(None, Timer()):
        ...     pass
    """
    if model is None or not is_launched() or not dist.is_initialized():
        yield None
        return
    # The group's store was created with the group's timeout (dist_timeout, or the script's own): the stubs lack it.
    store = torch.distributed.distributed_c10d._get_default_store()
    timeout = store.timeout.total_seconds()  # type: ignore[attr-defined]
    beat = dist.Heartbeat(timeout, lambda: int(timer.batch))
    handle = model.register_forward_pre_hook(lambda module, args: beat.advance())
    beat.start()
    try:
        yield beat
    finally:
        handle.remove()
        beat.stop()
