"""A resumed epoch of deterministic samples starts at its batch without reading the batches before it.

The reference is the same loader iterated from the start with the same generator states: the skipping iterator must
yield exactly its tail, while the dataset counts the samples it was asked for.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from composer import Trainer
from composer.datasets import TokenTextDataset
from composer.trainer.skipped_batches import skipping_iterator, skips_without_reading
from tests.common import SimpleModel, make_dataloader


class Counted(Dataset):
    """A dataset's samples, its reads counted in shared memory (workers included)."""

    deterministic_samples = True

    def __init__(self, samples: Any) -> None:
        self.samples = samples
        self.reads = multiprocessing.Value("i", 0)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Any:
        with self.reads.get_lock():
            self.reads.value += 1
        return self.samples[index]


def windows(num_samples: int) -> Counted:
    return Counted(TokenTextDataset(torch.arange(num_samples * 4) % 50, seq_len=4))


def _equal(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_tail_of_the_epoch_without_reading_the_batches_skipped(num_workers):
    dataset = windows(40)
    loader = DataLoader(
        dataset, batch_size=4, shuffle=True, drop_last=True, num_workers=num_workers, generator=torch.Generator()
    )
    loader.generator.manual_seed(5)
    full = list(loader)
    dataset.reads.value = 0
    loader.generator.manual_seed(5)  # the epoch's start, as the Trainer restores it
    iterator = skipping_iterator(loader, 3)
    tail = list(iterator)
    assert _equal(tail, full[3:])
    assert dataset.reads.value == 4 * len(tail) == 28


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_of_a_distributed_sampler_skips_its_own_batches(rank):
    dataset = windows(42)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=True, seed=7)
    sampler.set_epoch(3)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, drop_last=True)
    full = list(loader)
    dataset.reads.value = 0
    iterator = skipping_iterator(loader, 2)
    tail = list(iterator)
    assert _equal(tail, full[2:]) and len(tail) == 3
    assert dataset.reads.value == 12


def test_loaders_whose_samples_may_draw_random_numbers_replay():
    plain = torch.utils.data.TensorDataset(torch.zeros(8))  # says nothing about its samples
    assert not skips_without_reading(DataLoader(plain, batch_size=2))
    assert skipping_iterator(DataLoader(plain, batch_size=2), 1) is None
    dataset = windows(8)
    random_collate = DataLoader(dataset, batch_size=2, num_workers=1, collate_fn=lambda s: s)
    assert not skips_without_reading(random_collate)  # in a worker it would draw from a state the skip left behind
    assert skips_without_reading(DataLoader(dataset, batch_size=2, collate_fn=lambda s: s))  # restored in-process
    assert not skips_without_reading(DataLoader(dataset, batch_size=2, num_workers=1, persistent_workers=True))


def _trainer(dataset: Counted, **kwargs: Any) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    loader = DataLoader(dataset, batch_size=4, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(3))
    return Trainer(model=model, train_dataloader=loader, max_duration="2ep", seed=1, progress_bar=False, **kwargs)


def test_a_run_resumed_mid_epoch_reads_only_what_it_trains_and_ends_equal(tmp_path):
    def dataset() -> Counted:
        return Counted(make_dataloader(num_samples=40).dataset)

    uninterrupted = _trainer(dataset())
    uninterrupted.fit()
    first = _trainer(dataset(), save_folder=str(tmp_path), save_interval="13ba", save_filename="ba{batch}.pt")
    first.fit(duration="13ba")  # the second epoch's third batch (10 an epoch)
    resumed_data = dataset()
    resumed = _trainer(resumed_data, load_path=str(tmp_path / "ba13.pt"))
    resumed.fit()
    assert resumed_data.reads.value == 4 * 7  # the second epoch's last 7 batches, none of the 3 before
    for a, b in zip(resumed.state.model.parameters(), uninterrupted.state.model.parameters(), strict=True):
        assert torch.equal(a, b)
