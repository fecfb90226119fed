"""Where a resumed epoch starts without reading the batches it already trained.

A map-style dataset whose samples depend on their index alone (reading sample ``i`` draws no random numbers and
changes no state) says so with an attribute or property ``deterministic_samples = True``; the recipe datasets' text
windows, images without augmentations and synthetic samples do. An epoch of such a loader resumed at batch ``k``
starts at batch ``k``: its sampler draws the epoch's order with the same random draws, in the same order, as an
uninterrupted run, the indices of the first ``k`` batches are dropped, and none of their samples is read, tokenized
or collated (:func:`skipping_iterator`). Every other loader replays the ``k`` batches
(:func:`~composer.trainer.checkpointing.epoch_batches`), which is exact whatever the dataset draws.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import DataLoader, IterableDataset, default_collate

from composer.distributed.data import rebuilt_loader

__all__ = ["SkippedBatches", "skipping_iterator", "skips_without_reading"]


class SkippedBatches:
    """A loader's batches of sample indices without the first ``count``, as a ``batch_sampler`` for a DataLoader.

    Like a batch sampler's own iterator, it draws nothing when iterated; the first index batch asked for, or
    :meth:`skip`, draws the indices of the ``count`` batches left out (and so the sampler's order) and drops them.

    Args:
        batches: The loader's batch sampler (an iterable of lists of indices).
        count: How many batches to leave out.

    Example:
        >>> from torch.utils.data import BatchSampler, SequentialSampler
        >>> list(SkippedBatches(BatchSampler(SequentialSampler(range(7)), 2, drop_last=False), count=2))
        [[4, 5], [6]]
    """

    def __init__(self, batches: Iterable[list[int]], count: int) -> None:
        self.batches = batches
        self.count = count
        self._inner: Iterator[list[int]] = iter(())
        self._to_skip = 0

    def __iter__(self) -> SkippedBatches:
        self._inner = iter(self.batches)
        self._to_skip = self.count
        return self

    def __len__(self) -> int:
        return max(len(self.batches) - self.count, 0)  # type: ignore[arg-type]

    def __next__(self) -> list[int]:
        self.skip()
        return next(self._inner)

    def skip(self) -> None:
        """Draws and drops the indices of the batches left out, unless that was done already."""
        collections.deque(itertools.islice(self._inner, self._to_skip), maxlen=0)
        self._to_skip = 0


def skips_without_reading(dataloader: Any) -> bool:
    """Whether :func:`skipping_iterator` positions ``dataloader`` exactly: a plain torch DataLoader (no persistent
    workers) over a map-style dataset with ``deterministic_samples``, whose collate function, in workers, draws no
    random numbers either (the default one, or one with ``deterministic_samples``). A collate function that draws
    from torch's random state is fine without workers, where the Trainer restores that state after skipping; in a
    worker it would draw from a state that the skipped batches did not advance.

    Example:
        >>> import torch
        >>> from composer.datasets import TokenTextDataset
        >>> windows = TokenTextDataset(torch.arange(64), seq_len=4)
        >>> skips_without_reading(DataLoader(windows, batch_size=2, shuffle=True))
        True
        >>> skips_without_reading(DataLoader(torch.utils.data.TensorDataset(torch.zeros(4)), batch_size=2))
        False
    """
    if type(dataloader) is not DataLoader or dataloader.batch_sampler is None or dataloader.persistent_workers:
        return False
    dataset = dataloader.dataset
    if isinstance(dataset, IterableDataset) or not getattr(dataset, "deterministic_samples", False):
        return False
    collate = dataloader.collate_fn
    return dataloader.num_workers == 0 or collate is default_collate or getattr(collate, "deterministic_samples", False)


def skipping_iterator(dataloader: Any, count: int) -> Iterator[Any] | None:
    """An iterator over ``dataloader``'s batches from batch ``count`` on that reads no sample of the batches before,
    or None where that would not be exact (:func:`skips_without_reading`; the caller then replays them).

    It makes the random draws of ``iter(dataloader)`` (its workers' base seed, then its sampler's order) from the
    generators as they are, so restore the states of the epoch's start first. The first ``count`` batches of indices
    are drawn and dropped at once; the batches that follow are read by a one-off loader with the same dataset,
    workers, collate function and generator, whose workers get the same seeds.

    Example:
        >>> import torch
        >>> from composer.datasets import TokenTextDataset
        >>> loader = DataLoader(TokenTextDataset(torch.arange(32), seq_len=4), batch_size=2)
        >>> [batch["input_ids"][:, 0].tolist() for batch in skipping_iterator(loader, count=2)]
        [[16, 20], [24, 28]]
    """
    if not skips_without_reading(dataloader):
        return None
    batches = SkippedBatches(dataloader.batch_sampler, count)
    iterator = iter(rebuilt_loader(dataloader, batch_sampler=batches))
    batches.skip()  # the order is drawn here (without workers the first batch would draw it, after the states moved)
    return iterator
