"""ImageTensorDataset: samples through the transform, batch fetches equal to per-sample ones, errors."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Subset

from composer.datasets import CIFARDataset, ImageTensorDataset, ToNormalizedTensor


def _images(n: int = 10, shape: tuple[int, ...] = (3, 4, 4)) -> torch.Tensor:
    return torch.randint(0, 256, (n, *shape), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def test_samples_go_through_the_transform():
    images, labels = _images(), torch.arange(10)
    dataset = ImageTensorDataset(images, labels, transform=lambda x: x.flip(-1))
    x, y = dataset[3]
    assert torch.equal(x, images[3].flip(-1)) and int(y) == 3 and len(dataset) == 10
    dataset.transform = None
    assert torch.equal(dataset[3][0], images[3])


@pytest.mark.parametrize("transform", [None, ToNormalizedTensor(), ToNormalizedTensor((1, 2, 3), (4, 5, 6))])
def test_batch_fetch_equals_per_sample_fetch(transform):
    dataset = ImageTensorDataset(_images(), torch.arange(10) % 3, transform=transform)
    indices = [7, 0, 3, 3, 9]
    fast = dataset.__getitems__(indices)
    for (x, y), i in zip(fast, indices):
        expected_x, expected_y = dataset[i]
        assert torch.equal(x, expected_x) and x.dtype == expected_x.dtype and torch.equal(y, expected_y)
    # Through DataLoaders (batched, and under a Subset, which forwards __getitems__).
    loader_x, loader_y = next(iter(DataLoader(dataset, batch_size=10)))
    assert torch.equal(loader_x, torch.stack([dataset[i][0] for i in range(10)]))
    assert torch.equal(loader_y, dataset.labels)
    sub_x, _ = next(iter(DataLoader(Subset(dataset, indices), batch_size=5)))
    assert torch.equal(sub_x, torch.stack([x for x, _ in fast]))


def test_other_transforms_and_subclasses_run_per_sample():
    calls: list[int] = []

    def transform(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x

    ImageTensorDataset(_images(), torch.arange(10), transform=transform).__getitems__([1, 2, 3])
    assert len(calls) == 3
    torch.manual_seed(0)
    cifar = CIFARDataset(_images(4, (3, 32, 32)), torch.arange(4), augment=True, transform=ToNormalizedTensor())
    x, _ = cifar.__getitems__([0])[0]
    torch.manual_seed(0)
    assert torch.equal(x, cifar[0][0])  # the random crop and flip ran, then the transform


def test_errors():
    with pytest.raises(ValueError, match=r"images tensor \(N, C, H, W\) and N labels, got \(10, 3, 4, 4\) and 9"):
        ImageTensorDataset(_images(), torch.arange(9))
    with pytest.raises(ValueError, match="images tensor"):
        ImageTensorDataset([1, 2], torch.arange(2))  # type: ignore[arg-type]
