"""The handwritten-digits data that ships with scikit-learn: a real dataset that trains in seconds, offline.

The images are 8x8; ``image_size`` upscales them (bilinear) for models and methods that expect larger images, such
as the 32x32 digits task of the recipes. Upscaling adds no information: a method that trains at a lower resolution
(ProgressiveResizing, ColOut) loses less on these images than on natively high-resolution data. The datasets store
8-bit grayscale images and convert each sample to float in their ``transform``, so per-sample augmentations (AugMix,
RandAugment, ``ColOut(batch=False)``) can be added to it.
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from composer.datasets.image_dataset import ImageTensorDataset
from composer.datasets.normalization import ToNormalizedTensor

__all__ = ["NUM_DIGITS", "digits_dataloaders", "digits_datasets"]

NUM_DIGITS = 1797
"""The number of images in scikit-learn's digits data."""

# Share of each class held out for evaluation.
_EVAL_FRACTION = 0.2
# The digits images hold integer intensities 0..16.
_MAX_INTENSITY = 16.0


def _digits_file() -> Path | None:
    """scikit-learn's ``digits.csv.gz``, found without importing scikit-learn (which imports pandas: seconds of a
    first run's start-up); None if scikit-learn is already imported (or stood in for) or keeps the file elsewhere."""
    if "sklearn" in sys.modules:
        return None
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    return path if path.is_file() else None


def _read_digits_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, 8, 8), targets (N,))`` from ``digits.csv.gz``, parsed as ``sklearn.datasets.load_digits`` does."""
    with gzip.open(path, "rt") as file:
        data = np.loadtxt(file, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The 1,797 digits as ``(images (N, 1, 8, 8) float32 in [0, 1], labels (N,) int64)``."""
    path = _digits_file()
    if path is not None:
        images, targets = _read_digits_file(path)
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError as error:
            raise ImportError(
                "digits_dataloaders needs scikit-learn, which ships the digits data (nothing is downloaded). To fix, "
                "install the data extra: pip install 'opencomposer[data]'."
            ) from error
        digits: Any = load_digits()
        images, targets = digits.images, digits.target
    pixels = torch.as_tensor(images, dtype=torch.float32).unsqueeze(1) / _MAX_INTENSITY
    return pixels, torch.as_tensor(targets, dtype=torch.int64)


def _stratified_split(
    labels: torch.Tensor, eval_fraction: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted train and eval indices; each class gives ``round(eval_fraction * its count)`` samples to eval."""
    train_parts, eval_parts = [], []
    for label in torch.unique(labels):
        members = torch.nonzero(labels == label).flatten()
        members = members[torch.randperm(len(members), generator=generator)]
        num_eval = round(eval_fraction * len(members))
        eval_parts.append(members[:num_eval])
        train_parts.append(members[num_eval:])
    return torch.cat(train_parts).sort().values, torch.cat(eval_parts).sort().values


def _check_count(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"digits {name} must be an int of at least {minimum}, got {value!r}.")


def digits_datasets(image_size: int = 8, split_seed: int = 0) -> tuple[ImageTensorDataset, ImageTensorDataset]:
    """Returns the training and evaluation sets of the digits, optionally upscaled to ``image_size`` x ``image_size``.

    Each class is split 80/20 between training and evaluation by a permutation seeded with ``split_seed``. The
    datasets hold the images as 8-bit grayscale, ``images`` of shape ``(N, 1, image_size, image_size)`` uint8
    (bilinear upscaling of the 8x8 originals, computed once here, so a training step costs no resizing, then rounded
    to 0-255), and their ``transform``, a :class:`~composer.datasets.normalization.ToNormalizedTensor`, turns each
    sample into float32 in ``[0, 1]`` (``pixel / 255``); labels are int64 digits 0-9. Per-sample augmentations go
    into ``transform`` before that conversion (AugMix and RandAugment do so themselves).

    Args:
        image_size: Side length of the images, at least 8 (8 keeps the originals).
        split_seed: Seed of the train/eval split.

    Returns:
        tuple[ImageTensorDataset, ImageTensorDataset]: The training set (1,438 images) and the evaluation set (359
        images).

    Raises:
        ImportError: If scikit-learn is not installed (install ``opencomposer[data]``).

    Example:
        >>> import pytest
        >>> _ = pytest.importorskip("sklearn")
        >>> train_set, eval_set = digits_datasets(image_size=32)
        >>> image, label = train_set[0]
        >>> image.shape, image.dtype, label.dtype, len(train_set) + len(eval_set)
        (torch.Size([1, 32, 32]), torch.float32, torch.int64, 1797)
        >>> train_set.images.dtype, train_set.transform
        (torch.uint8, ToNormalizedTensor(mean=0.0, std=255.0))
    """
    _check_count("image_size", image_size, 8)
    images, labels = _load_digits()
    if image_size != images.shape[-1]:
        # (N, 1, 8, 8) -> (N, 1, S, S); bilinear stays within [0, 1] (a convex combination of the pixels).
        images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", align_corners=False)
    pixels = images.mul(255.0).round_().to(torch.uint8)
    train_indices, eval_indices = _stratified_split(labels, _EVAL_FRACTION, torch.Generator().manual_seed(split_seed))
    return (
        ImageTensorDataset(pixels[train_indices], labels[train_indices], transform=ToNormalizedTensor()),
        ImageTensorDataset(pixels[eval_indices], labels[eval_indices], transform=ToNormalizedTensor()),
    )


def digits_dataloaders(
    batch_size: int = 64, eval_batch_size: int = 256, seed: int = 0, num_workers: int = 0, image_size: int = 8
) -> tuple[DataLoader[tuple[torch.Tensor, ...]], DataLoader[tuple[torch.Tensor, ...]]]:
    """Returns train and eval dataloaders over scikit-learn's handwritten digits (8x8 images, 10 classes).

    Use it for examples and tests that should train on real data in seconds without a download: the 1,797 images
    ship inside scikit-learn. Images are ``(1, S, S)`` float32 scaled to ``[0, 1]`` (``S = image_size``, 8 unless
    upscaled; stored as 8-bit pixels and converted per sample by the datasets' ``transform``, see
    :func:`digits_datasets`); labels are int64 digits 0-9.
    Each class is split 80/20 between training and evaluation by a permutation seeded with ``seed``; the training
    loader reshuffles every epoch with a :class:`torch.Generator` seeded with ``seed``, so a run is reproducible.
    Batches are ``(images (B, 1, S, S), labels (B,))``.

    Args:
        batch_size: Training batch size.
        eval_batch_size: Evaluation batch size.
        seed: Seed of the split and of the training order.
        num_workers: DataLoader worker processes.
        image_size: Side length of the images (see :func:`digits_datasets`); 8 keeps the originals.

    Returns:
        tuple[DataLoader, DataLoader]: The training loader (shuffled) and the evaluation loader (in order).

    Raises:
        ImportError: If scikit-learn is not installed (install ``opencomposer[data]``).

    Example:
        >>> import pytest
        >>> _ = pytest.importorskip("sklearn")
        >>> train_dl, eval_dl = digits_dataloaders(batch_size=32, seed=0)
        >>> images, labels = next(iter(train_dl))
        >>> images.shape, labels.shape, len(train_dl.dataset) + len(eval_dl.dataset)
        (torch.Size([32, 1, 8, 8]), torch.Size([32]), 1797)
        >>> next(iter(digits_dataloaders(batch_size=4, image_size=32)[0]))[0].shape
        torch.Size([4, 1, 32, 32])
    """
    _check_count("batch_size", batch_size, 1)
    _check_count("eval_batch_size", eval_batch_size, 1)
    _check_count("num_workers", num_workers, 0)
    train_set, eval_set = digits_datasets(image_size=image_size, split_seed=seed)
    train_dl = DataLoader(
        train_set,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed),
    )
    eval_dl = DataLoader(eval_set, batch_size=eval_batch_size, shuffle=False, num_workers=num_workers)
    return train_dl, eval_dl
