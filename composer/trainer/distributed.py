"""The pieces of training on several processes: the process group, per-rank seeds, data sharding,
DistributedDataParallel, gradient synchronisation, counts across ranks, lockstep evaluation, rank-zero logging, and
errors and heartbeats that name their rank.

The Trainer does not call these itself: :class:`~composer.trainer.parallelism.Parallelism` decides when each applies
(and skips them all in a single process). They are public for scripts that run their own loop: each is a no-op, and
nearly free, unlaunched (``torchrun`` sets ``WORLD_SIZE`` > 1 when it is not). See ``composer/trainer/DISTRIBUTED.md``.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from composer.core.data_spec import DataSpec, num_samples_in_batch
from composer.core.evaluator import Evaluator
from composer.core.logging.logger import LoggerDestination
from composer.core.time import Timer
from composer.loggers import (
    ConsoleLogger,
    CSVLogger,
    FileLogger,
    MLflowLogger,
    ProgressBarLogger,
    TensorboardLogger,
    WandBLogger,
)
from composer.utils import dist
from composer.utils.seeding import seed_all

__all__ = [
    "RANK_ZERO_DESTINATIONS",
    "DDPSyncStrategy",
    "UnpaddedDistributedSampler",
    "add_rank_note",
    "agree_on_seed",
    "batch_totals",
    "ddp_sync_context",
    "distribute_evaluator",
    "distribute_train_data",
    "heartbeat",
    "init_distributed",
    "is_launched",
    "lockstep_batches",
    "parameter_layout",
    "rank_zero_destinations",
    "rewrap_ddp",
    "seed_rank",
    "set_sampler_epoch",
    "wrap_ddp",
]

log = logging.getLogger(__name__)

RANK_ZERO_DESTINATIONS: tuple[type[LoggerDestination], ...] = (
    ConsoleLogger,
    CSVLogger,
    FileLogger,
    MLflowLogger,
    ProgressBarLogger,
    TensorboardLogger,
    WandBLogger,
)
"""Destinations that write to the console, files or an experiment tracker: kept on rank 0 only (and subclasses).
Others (``InMemoryLogger``, your own) run on every rank; check ``state.rank`` in them if they write somewhere."""


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


# ---- data ----------------------------------------------------------------------------------------------------------


class UnpaddedDistributedSampler(Sampler[int]):
    """Gives rank ``r`` the samples ``r, r + W, r + 2W, ...`` of the dataset, without padding.

    ``DistributedSampler`` repeats samples so that every rank gets as many; that is harmless in training but counts
    the repeated samples twice in evaluation. This sampler gives every sample to exactly one rank, so ranks may
    get one sample fewer (and one batch fewer); metrics are then exact once reduced across ranks.

    Args:
        dataset (Sized): The dataset (only its length is used).
        num_replicas (int, optional): The number of ranks; default: the world size.
        rank (int, optional): This rank; default: the global rank.
        shuffle (bool): Shuffle (the same permutation on every rank, from ``seed`` and the epoch).
        seed (int): The shuffling seed.

    Example:
        >>> [list(UnpaddedDistributedSampler(range(7), num_replicas=2, rank=r)) for r in (0, 1)]
        [[0, 2, 4, 6], [1, 3, 5]]
    """

    def __init__(
        self,
        dataset: Sized,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
    ) -> None:
        self.num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        self.rank = dist.get_global_rank() if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank={self.rank} must lie in [0, num_replicas={self.num_replicas}).")
        self.dataset_size = len(dataset)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch the shuffle order is drawn for."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_size, generator=generator).tolist()
        else:
            order = list(range(self.dataset_size))
        return iter(order[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(range(self.rank, self.dataset_size, self.num_replicas))


def distribute_train_data(spec: DataSpec, *, seed: int) -> DataSpec:
    """The training data with this rank's share: a DataLoader rebuilt around a ``DistributedSampler``.

    Unlaunched, or when the loader already has a ``DistributedSampler`` (or any sampler with ``set_epoch`` and a
    ``rank``), ``spec`` is returned as it is. A ``DataLoader(shuffle=True)`` gets a shuffling sampler seeded with
    the run's ``seed`` (the same order on every rank), a sequential one an unshuffled sampler; ``batch_size`` (per
    rank), ``collate_fn``, ``num_workers``, ``drop_last`` and the other settings are kept, and ``drop_last`` also
    applies to the sampler (without it, the last samples are repeated so that every rank gets as many).

    Raises:
        ValueError: If the loader cannot be rebuilt (a custom sampler or batch sampler, a DataLoader subclass); the
            message says how to shard it yourself.
    """
    if not is_launched():
        return spec
    loader = _distributed_loader(spec.dataloader, "train_dataloader", train=True, seed=seed)
    return spec if loader is spec.dataloader else _with_loader(spec, loader)


def distribute_evaluator(evaluator: Evaluator) -> Evaluator:
    """The evaluator with this rank's share of its data, through an :class:`UnpaddedDistributedSampler`.

    Unlaunched, or when its loader already has a distributed sampler, ``evaluator`` is returned as it is (with a
    warning when that sampler pads, which counts some samples twice). Otherwise a shallow copy is returned whose
    DataLoader is rebuilt as in :func:`distribute_train_data`.
    """
    if not is_launched():
        return evaluator
    spec = evaluator.dataloader
    label = f"the dataloader of evaluator {evaluator.label!r}"
    loader = _distributed_loader(spec.dataloader, label, train=False, seed=0)
    if loader is spec.dataloader:
        return evaluator
    copy = object.__new__(Evaluator)
    copy.__dict__.update(evaluator.__dict__)
    copy.dataloader = _with_loader(spec, loader)
    return copy


def set_sampler_epoch(dataloader: Any, epoch: int) -> None:
    """Calls ``set_epoch(epoch)`` on the loader's sampler(s) that have it (a ``DistributedSampler`` shuffles by
    epoch); nothing otherwise. The Trainer calls it at the start of every epoch, launched or not."""
    seen: list[Any] = []
    for sampler in (
        getattr(dataloader, "sampler", None),
        getattr(getattr(dataloader, "batch_sampler", None), "sampler", None),
    ):
        if sampler is not None and hasattr(sampler, "set_epoch") and all(sampler is not s for s in seen):
            sampler.set_epoch(epoch)
            seen.append(sampler)


def _with_loader(spec: DataSpec, loader: Iterable[Any]) -> DataSpec:
    copy = object.__new__(DataSpec)
    copy.__dict__.update(spec.__dict__)
    copy.dataloader = loader
    return copy


def _distributed_loader(loader: Any, what: str, *, train: bool, seed: int) -> Any:
    if not isinstance(loader, DataLoader):
        warnings.warn(
            f"{what} is a {type(loader).__name__}, not a torch DataLoader, so the Trainer cannot give each of the "
            f"{dist.get_world_size()} ranks its own share: make it yield only this rank's batches (see "
            "composer.utils.dist.get_global_rank and get_world_size), or every rank trains on the same data.",
            stacklevel=4,
        )
        return loader
    if isinstance(loader.dataset, IterableDataset):
        warnings.warn(
            f"{what} reads an IterableDataset, which the Trainer cannot split across ranks: make it yield only this "
            "rank's samples (see composer.utils.dist.get_global_rank and get_world_size), or every rank sees the "
            "same data.",
            stacklevel=4,
        )
        return loader
    sampler = _sampler_of(loader)
    if hasattr(sampler, "set_epoch") and hasattr(sampler, "rank"):  # DistributedSampler or the like: already sharded
        if not train and _pads(sampler):
            warnings.warn(
                f"{what} has a DistributedSampler that pads (drop_last=False and a dataset size not divisible by "
                f"{dist.get_world_size()}), so some samples are evaluated twice and the metrics are slightly off. "
                "Pass the loader without a sampler (the Trainer shards it exactly) or use "
                "composer.trainer.distributed.UnpaddedDistributedSampler.",
                stacklevel=4,
            )
        return loader
    fix = (
        "Shard it yourself: build the DataLoader with sampler=composer.utils.dist.get_sampler(dataset, shuffle=...) "
        f"(training) or {UnpaddedDistributedSampler.__name__}(dataset) (evaluation), so each rank reads its own share."
    )
    if type(loader) is not DataLoader:
        raise ValueError(
            f"{what} is a {type(loader).__name__} (a DataLoader subclass), which the Trainer cannot "
            f"rebuild with a distributed sampler. {fix}"
        )
    if loader.batch_size is None:
        raise ValueError(f"{what} has a custom batch_sampler, which the Trainer cannot split across ranks. {fix}")
    if isinstance(sampler, RandomSampler):
        if sampler.replacement or sampler._num_samples is not None:
            raise ValueError(
                f"{what} samples with replacement or a fixed num_samples, which the Trainer cannot split across "
                f"ranks. {fix}"
            )
        shuffle = True
    elif isinstance(sampler, SequentialSampler):
        shuffle = False
    else:
        raise ValueError(f"{what} has a {type(sampler).__name__}, which the Trainer cannot split across ranks. {fix}")
    new_sampler: Sampler[int]
    if train:
        new_sampler = dist.get_sampler(loader.dataset, shuffle=shuffle, drop_last=loader.drop_last, seed=seed)
    else:
        new_sampler = UnpaddedDistributedSampler(loader.dataset, shuffle=shuffle, seed=seed)  # type: ignore[arg-type]
    log.info("%s: each rank reads its share through a %s.", what, type(new_sampler).__name__)
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=new_sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
        in_order=loader.in_order,
    )


def _sampler_of(loader: DataLoader[Any]) -> Any:
    batch_sampler_sampler = getattr(loader.batch_sampler, "sampler", None)
    if loader.batch_size is None and batch_sampler_sampler is not None:
        return batch_sampler_sampler
    return loader.sampler


def _pads(sampler: Any) -> bool:
    if not isinstance(sampler, DistributedSampler) or sampler.drop_last:
        return False
    return len(sampler.dataset) % sampler.num_replicas != 0  # type: ignore[arg-type]


# ---- the model and its gradients -----------------------------------------------------------------------------------


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


def lockstep_batches(batches: Iterable[Any], pad: Callable[[Any], None] | None) -> Iterator[Any]:
    """The evaluation ``batches`` of this rank, keeping every rank's forward passes in step when ``pad`` is given.

    With FSDP, every forward pass is a collective (each unit gathers its parameters), so all ranks must run as many.
    Evaluation shards are uneven (:class:`UnpaddedDistributedSampler`: one rank may get a batch fewer), so with
    ``pad`` each step first agrees (one small all-reduce) on whether any rank still has a batch, and a rank whose
    data has run out calls ``pad(last_batch)`` (a forward pass whose outputs are dropped, counted in no metric)
    until all are done. Without ``pad`` (unlaunched, DDP: evaluation does not communicate) the batches pass as
    they are.

    Raises:
        ValueError: With ``pad``, some rank has no evaluation batch at all (fewer batches than ranks): it has
            nothing to run the forward passes with. Raised on every rank.

    Example:
        >>> list(lockstep_batches(iter(["a", "b"]), pad=None))
        ['a', 'b']
    """
    if pad is None:
        yield from batches
        return
    iterator, last, end = iter(batches), None, object()
    device = dist.collective_device()
    while True:
        batch = next(iterator, end)
        has_batch = batch is not end
        # [ranks with a batch now, ranks that never had one]
        counts = torch.tensor([int(has_batch), int(not has_batch and last is None)], device=device)
        torch.distributed.all_reduce(counts)
        with_batch, without_any = counts.tolist()
        if with_batch == 0:
            return
        if without_any:
            raise ValueError(
                f"{without_any} of {torch.distributed.get_world_size()} ranks got no evaluation batch, but with FSDP "
                "every rank must run each forward pass. Give the evaluation data at least one batch per rank "
                "(more samples or a smaller batch size), or evaluate on fewer ranks."
            )
        if has_batch:
            last = batch
            yield batch
        else:
            pad(last)


def batch_totals(
    spec: DataSpec, num_samples: int, num_tokens: int | None, flag: bool = False
) -> tuple[int, int, bool | None]:
    """The samples and tokens of one batch over all ranks (tokens: 0 when the data has none), for the timer, and
    whether any rank's ``flag`` is set (None when that is not known: no all-reduce was needed).

    When every rank's batches are as large (a DataLoader over a ``DistributedSampler`` with a ``batch_size``,
    samples counted the default way) and the data has no tokens, that is ``num_samples x world_size``, exactly and
    without communicating; otherwise the counts are summed with an all-reduce (token counts differ across ranks),
    which carries ``flag`` too (the Trainer's request to stop: :class:`~composer.trainer.preemption.StopAgreement`).
    Unlaunched: the counts as they are, and ``flag``.

    Example:
        >>> batch_totals(DataSpec([]), 8, None)
        (8, 0, False)
    """
    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:  # per batch: keep it cheap
        return num_samples, num_tokens or 0, flag
    world_size = torch.distributed.get_world_size()
    if num_tokens is None and _even_batches(spec, world_size):
        return num_samples * world_size, 0, None
    device = dist.collective_device()
    totals = torch.tensor([num_samples, num_tokens or 0, int(flag)], dtype=torch.int64, device=device)
    dist.all_reduce(totals)
    samples, tokens, flags = totals.tolist()
    return samples, tokens, flags > 0


def _even_batches(spec: DataSpec, world_size: int) -> bool:
    loader = spec.dataloader
    return (
        isinstance(loader, DataLoader)
        and loader.batch_size is not None
        and isinstance(loader.sampler, DistributedSampler)
        and loader.sampler.num_replicas == world_size
        and spec.get_num_samples_in_batch is num_samples_in_batch
    )


# ---- logging and errors --------------------------------------------------------------------------------------------


def rank_zero_destinations(destinations: Sequence[LoggerDestination]) -> list[LoggerDestination]:
    """The destinations this rank keeps: all of them on rank 0, those not in :data:`RANK_ZERO_DESTINATIONS` on the
    others (so the console shows one progress bar and each file is written once)."""
    if dist.get_global_rank() == 0:
        return list(destinations)
    return [d for d in destinations if not isinstance(d, RANK_ZERO_DESTINATIONS)]


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
    back, see :class:`~composer.trainer.microbatching.Microbatching`) advances it, through a forward pre-hook (about a
    microsecond). Its thread publishes the
    progress and the batch (``timer.batch``) to the process group's store once a second at most; when the ranks have waited
    ``dist_timeout`` (the process group's timeout) for a rank that fell behind, every rank prints which one stopped
    answering and where, and ends with exit status 1, so that ``torchrun`` stops the job at once. Unlaunched, or
    without a model to hook: nothing.

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
