"""The one tiny model and dataset the tests share."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from composer.models import ComposerClassifier

__all__ = ["SimpleModel", "make_dataloader"]

NUM_FEATURES = 8
NUM_CLASSES = 3


class SimpleModel(ComposerClassifier):
    """A two-layer MLP classifier over 8 features and 3 classes."""

    def __init__(self, num_features: int = NUM_FEATURES, num_classes: int = NUM_CLASSES) -> None:
        module = torch.nn.Sequential(
            torch.nn.Linear(num_features, 16),
            torch.nn.ReLU(),
            torch.nn.Linear(16, num_classes),
        )
        super().__init__(module, num_classes=num_classes)


def make_dataloader(
    num_samples: int = 16,
    batch_size: int = 4,
    seed: int = 0,
    num_features: int = NUM_FEATURES,
    num_classes: int = NUM_CLASSES,
    shuffle: bool = False,
) -> DataLoader:
    """Seeded Gaussian inputs with labels from a fixed linear map (learnable)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, num_features, generator=g)
    w = torch.randn(num_features, num_classes, generator=torch.Generator().manual_seed(1234))
    y = (x @ w).argmax(dim=1)
    return DataLoader(
        TensorDataset(x, y),
        batch_size=batch_size,
        shuffle=shuffle,
        generator=torch.Generator().manual_seed(seed) if shuffle else None,
    )
