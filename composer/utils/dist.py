"""torch.distributed, with every call also working unlaunched (one process, world size 1).

Launch with ``torchrun`` (or ``composer launch``): it sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, which these helpers read until the process group exists.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as torch_dist
from torch.utils.data import Dataset, DistributedSampler, RandomSampler, Sampler, SequentialSampler

__all__ = [
    "Heartbeat",
    "RankBeat",
    "all_gather",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "collective_device",
    "describe_lagging",
    "get_global_rank",
    "get_local_rank",
    "get_local_world_size",
    "get_node_rank",
    "get_sampler",
    "get_world_size",
    "initialize_dist",
    "is_initialized",
    "read_heartbeats",
]

T = TypeVar("T")


def is_initialized() -> bool:
    """Whether a torch.distributed process group exists."""
    return torch_dist.is_available() and torch_dist.is_initialized()


def collective_device() -> torch.device:
    """The device of the tensors the default process group's collectives take: the current CUDA device under nccl
    (which reduces CUDA tensors only), else the CPU (gloo; also without a process group).

    Example:
        >>> collective_device()
        device(type='cpu')
    """
    if is_initialized() and torch_dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


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


# ---- heartbeats: which rank stopped answering ----------------------------------------------------------------------


def _heartbeat_key(rank: int) -> str:
    # torchrun keeps its store across restarts of the workers: each attempt publishes under its own keys.
    return f"composer/heartbeat/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{rank}"


@dataclass
class RankBeat:
    """What one rank last published through its :class:`Heartbeat`.

    Attributes:
        rank (int): The rank.
        progress (int): How many steps its main thread has started (the Trainer: training forward passes).
        batch (int): The batch it is in (the Trainer: ``timer.batch``, the batches it has finished).
        running (bool): False once it stopped its heartbeat (its ``fit`` ended).
        beats (int): How many times it published (it stops growing when the process is frozen or dead).
        stack (str): The innermost frames of its training thread, when that thread was not making progress.
    """

    rank: int
    progress: int
    batch: int
    running: bool
    beats: int
    stack: str


def read_heartbeats() -> list[RankBeat | None]:
    """Every rank's last :class:`RankBeat`, in rank order (None for a rank that published none); ``[]`` when there is
    no process group or its store cannot be read (its host is gone). Never waits for a missing key."""
    if not is_initialized():
        return []
    try:
        store = torch_dist.distributed_c10d._get_default_store()
        beats: list[RankBeat | None] = []
        for rank in range(torch_dist.get_world_size()):
            key = _heartbeat_key(rank)
            beats.append(RankBeat(**json.loads(store.get(key))) if store.check([key]) else None)
        return beats
    except (RuntimeError, ValueError, TypeError, OSError):  # the store's host ended, or a foreign value
        return []


def describe_lagging(beats: Sequence[RankBeat | None], frozen: Sequence[int] = ()) -> list[str]:
    """One description per rank that the others are waiting for: behind them, frozen, or never started.

    A heartbeat is published at most once per interval, so a rank that died soon after publishing left one older
    than its last steps. The ranks furthest ahead wait in batch B, which they could not have reached without every
    rank's share of the collectives of the batches before it: a lagging rank whose last heartbeat is from an earlier
    batch is named at batch B, where it stopped answering, and its heartbeat is said to be older than that (its
    steps are not counted: they are not known).
    """
    started = [b for b in beats if b is not None]
    top = max((b.progress for b in started), default=0)
    waiting_at = min((b.batch for b in started if b.progress == top), default=0)  # where the furthest ahead are
    found = []
    for rank, beat in enumerate(beats):
        if beat is None:
            found.append(f"rank {rank} never published a heartbeat (it has not started training)")
        elif not beat.running or (beat.progress >= top and beat.rank not in frozen):
            continue
        else:
            at = f"batch {beat.batch}"
            why = [f"{top - beat.progress} step(s) behind"] if beat.progress < top else []
            if beat.batch < waiting_at:
                at = f"batch {waiting_at}, where the others wait for it"
                why = [f"its last heartbeat, from batch {beat.batch}, is older than that"]
            if beat.rank in frozen:
                why.append("its heartbeat stopped: frozen or dead")
            where = f", in:\n{beat.stack}" if beat.stack else ""
            found.append(f"rank {rank} stopped answering at {at} ({'; '.join(why)}){where}")
    return found


class Heartbeat:
    """Publishes this rank's progress to the process group's store from a daemon thread, and ends the process when
    the job has stalled for ``timeout`` seconds, naming the rank that stopped answering.

    The training loop calls :meth:`advance` once per step (an increment and a clock read: the store is written by
    the thread, once per ``interval``). When this rank has made no progress for ``timeout`` seconds, its thread reads
    every rank's heartbeat; if some rank is behind the others (it did not reach the step they wait in), has a frozen
    heartbeat (its process holds the GIL, is stopped or died) or never started, the collective this rank waits in
    cannot complete: the thread prints which rank stopped answering, where (its batch and innermost frames), and
    ends this process with exit status 1, without waiting for the collective's own timeout and the interpreter's
    slow shutdown, so that the launcher (``torchrun``) stops the job at once. The lagging rank itself ends the same
    way. This is what torch does for NCCL on a collective timeout; a stall where no rank is behind (a hang inside a
    step) is left to the collective's timeout.

    Args:
        timeout (float): Seconds without progress after which the job is considered stalled (the Trainer:
            ``dist_timeout``).
        batch (Callable[[], int]): The batch this rank is in, read by the thread (the Trainer: ``timer.batch``).
        interval (float, optional): Seconds between publications; default ``min(1, timeout / 10)``.
    """

    def __init__(self, timeout: float, batch: Callable[[], int] = int, interval: float | None = None) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout={timeout!r} must be a positive number of seconds.")
        self.timeout = float(timeout)
        self.interval = min(1.0, self.timeout / 10) if interval is None else float(interval)
        self.batch = batch
        self.progress = 0
        self.changed_at = time.monotonic()
        self.rank, self.world_size = get_global_rank(), get_world_size()
        self._beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trainer_thread: int | None = None  # the thread that trains (calls start): its frames are published

    def advance(self) -> None:
        """Marks one more step started on this rank (called from the training loop: keep it cheap)."""
        self.progress += 1
        self.changed_at = time.monotonic()

    def start(self) -> Heartbeat:
        """Publishes once (so that the others see this rank at once), then starts the thread; returns self."""
        self.changed_at = time.monotonic()
        self._trainer_thread = threading.get_ident()
        self._stop.clear()
        self._publish(running=True, stack="")
        self._thread = threading.Thread(target=self._watch, name="composer-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the thread and marks this rank as not running (a rank whose fit ended is never waited for)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        with contextlib.suppress(RuntimeError, OSError):  # the store's host may have ended already
            self._publish(running=False, stack="")

    def _publish(self, running: bool, stack: str) -> None:
        self._beats += 1
        store = torch_dist.distributed_c10d._get_default_store()
        record = RankBeat(self.rank, self.progress, self.batch(), running, self._beats, stack)
        store.set(_heartbeat_key(self.rank), json.dumps(record.__dict__))

    def _main_stack(self) -> str:
        frame = sys._current_frames().get(self._trainer_thread) if self._trainer_thread is not None else None
        if frame is None:
            return ""
        lines = traceback.format_list(traceback.extract_stack(frame)[-3:])
        return "".join(lines).rstrip()

    def _watch(self) -> None:
        seen: dict[int, tuple[int, float]] = {}  # rank -> (its beat count, when this thread first saw that count)
        while not self._stop.is_set():
            now = time.monotonic()
            stalled_for = now - self.changed_at
            stack = self._main_stack() if stalled_for >= self.interval else ""
            try:
                self._publish(running=True, stack=stack)
                if stalled_for >= self.timeout / 2:  # only then read the others (a store read per rank)
                    beats = read_heartbeats()
                    for beat in beats:
                        if beat is not None and seen.get(beat.rank, (-1, 0.0))[0] != beat.beats:
                            seen[beat.rank] = (beat.beats, now)
                    if stalled_for >= self.timeout:
                        frozen = {r for r, (_, since) in seen.items() if now - since >= 3 * self.interval}
                        lagging = describe_lagging(beats, sorted(frozen - {self.rank}))
                        if lagging:
                            self._end(f"because {'; '.join(lagging)}", stalled_for)
                            return
            except (RuntimeError, OSError):
                if stalled_for >= self.timeout / 2:
                    # The store's host (rank 0 or the launcher) ended while this rank was stuck: most likely it
                    # waited for this rank. Nobody is left to wait for: end too, saying where this rank is.
                    where = f", in:\n{stack}" if stack else ""
                    self._end(
                        f"while this rank (at batch {self.batch()}) was not answering{where}\nthe job's store stopped "
                        "answering: the rank or launcher that hosts it has ended, most likely after waiting for this "
                        "rank",
                        stalled_for,
                    )
                return  # the job is over: nothing left to watch
            deadline = self.changed_at + self.timeout - time.monotonic()
            wait = self.interval if deadline <= 0 else min(self.interval, deadline)
            self._stop.wait(max(wait, 0.01))

    def _end(self, reason: str, stalled_for: float) -> None:
        message = (
            f"rank {self.rank} of {self.world_size}: ending this process: the job has stalled for {stalled_for:.1f} s "
            f"(timeout {self.timeout:g} s) {reason}.\nExpected every rank to reach the next collective within the "
            "timeout. To fix: look at what the rank(s) named above were doing (their innermost frames are shown), or "
            "raise dist_timeout if that work legitimately takes longer."
        )
        print(message, file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)  # the main thread is blocked in a collective; the interpreter's shutdown would take seconds
