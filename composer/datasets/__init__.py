"""Datasets: seeded synthetic data and small real datasets that need no download."""

from composer.datasets.digits import digits_dataloaders
from composer.datasets.synthetic import SyntheticClassificationDataset, SyntheticTokenDataset

__all__ = ["SyntheticClassificationDataset", "SyntheticTokenDataset", "digits_dataloaders"]
