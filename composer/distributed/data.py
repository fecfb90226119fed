"""Each rank's share of the data: distributed samplers, rebuilt loaders, lockstep evaluation and the counts of a
batch over all ranks. Public for scripts that run their own loop; unlaunched each returns what it was given.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

import torch
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
from composer.distributed.process_group import is_launched
from composer.utils import dist

__all__ = [
    "UnpaddedDistributedSampler",
    "batch_totals",
    "distribute_evaluator",
    "distribute_train_data",
    "lockstep_batches",
    "rebuilt_loader",
    "set_sampler_epoch",
]

log = logging.getLogger(__name__)


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
    if callable(getattr(loader, "start_epoch", None)):  # a stream that gives each rank its own part (streaming)
        return loader
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
                "composer.distributed.data.UnpaddedDistributedSampler.",
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
    return rebuilt_loader(loader, sampler=new_sampler, batch_size=loader.batch_size, drop_last=loader.drop_last)


def rebuilt_loader(loader: DataLoader[Any], **sampling: Any) -> DataLoader[Any]:
    """``loader`` rebuilt with the sampling arguments given (``sampler``, ``batch_size``, ``drop_last``, or a
    ``batch_sampler``; DataLoader's defaults for those not given); its dataset, workers, collate function, generator
    and every other setting are kept.

    Example:
        >>> loader = DataLoader(range(7), batch_size=4)
        >>> list(rebuilt_loader(loader, batch_size=3, drop_last=True))
        [tensor([0, 1, 2]), tensor([3, 4, 5])]
    """
    return DataLoader(
        loader.dataset,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
        in_order=loader.in_order,
        **sampling,
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
    which carries ``flag`` too (the Trainer's request to stop:
    :class:`~composer.distributed.stop_agreement.StopAgreement`). Unlaunched: the counts as they are, and ``flag``.

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
