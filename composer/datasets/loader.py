"""The DataLoader of one split of a dataset: training shuffled by a seeded generator, evaluation in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["split_dataloader"]


def split_dataloader(
    dataset: Dataset[Any],
    batch_size: int,
    train: bool,
    seed: int = 0,
    num_workers: int = 0,
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> DataLoader[Any]:
    """The loader of a training split (shuffled, last partial batch dropped) or an evaluation split (every sample).

    A training loader reshuffles every epoch from a :class:`torch.Generator` seeded with ``seed``; the Trainer saves
    that generator's state in its checkpoints, which is what lets a run resume mid-epoch exactly (with DataLoader
    workers too: their seeds are drawn from the same generator).

    Args:
        dataset: A map-style dataset.
        batch_size: Samples per batch, positive.
        train: Shuffle and drop the last partial batch (when the dataset holds at least one batch).
        seed: Seed of the shuffling order.
        num_workers: DataLoader worker processes, 0 or more.
        collate_fn: The collate function, or None for the default.

    Returns:
        DataLoader[Any]: The split's loader, over ``dataset`` as it is.

    Raises:
        ValueError: If ``batch_size`` or ``num_workers`` is out of range.

    Example:
        >>> len(split_dataloader(list(range(10)), batch_size=4, train=True, seed=0))  # the partial batch dropped
        2
        >>> len(split_dataloader(list(range(10)), batch_size=4, train=False))
        3
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers must be a non-negative int, got {num_workers!r}.")
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=train,
        drop_last=train and len(dataset) >= batch_size,  # type: ignore[arg-type]
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed) if train else None,
        collate_fn=collate_fn,
    )
