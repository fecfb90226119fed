"""Device-side normalization: turn uint8 images into normalized float tensors after they reach the device.

Image loaders in this package return uint8 images (a quarter of the bytes of float32 to collate, copy and move to the
GPU) and leave the float conversion and the per-channel normalization to :class:`Normalize`, which a
:class:`~composer.core.data_spec.DataSpec` runs as its ``device_transforms`` on the device, for training and
evaluation batches alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["CIFAR10_MEAN", "CIFAR10_STD", "CIFAR100_MEAN", "CIFAR100_STD", "IMAGENET_MEAN", "IMAGENET_STD", "Normalize"]

# Per-channel statistics on the 0-255 scale of uint8 images (the usual published values times 255).
CIFAR10_MEAN = (125.307, 122.961, 113.8575)
CIFAR10_STD = (62.9932, 62.0887, 66.7048)
CIFAR100_MEAN = (129.3105, 124.1085, 112.404)
CIFAR100_STD = (68.2125, 65.4075, 70.4055)
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


class Normalize:
    """Normalizes the images of an ``(images, targets)`` batch per channel: ``(images.float() - mean) / std``.

    Use it as a :class:`~composer.core.data_spec.DataSpec` ``device_transforms``: it runs after the batch is on the
    device, so the loader can ship compact uint8 images. ``mean`` and ``std`` are on the scale of the stored images
    (0-255 for uint8 images, such as :data:`CIFAR10_MEAN`). Images are ``(N, C, H, W)`` with ``C == len(mean)``;
    targets pass through unchanged. A bare tensor batch is normalized as images.

    Args:
        mean: Per-channel mean, one value per channel.
        std: Per-channel standard deviation, one positive value per channel.

    Example:
        >>> normalize = Normalize(mean=(127.5, 127.5, 127.5), std=(127.5, 127.5, 127.5))
        >>> images = torch.tensor([0, 255], dtype=torch.uint8).view(2, 1, 1, 1).expand(2, 3, 2, 2)
        >>> x, y = normalize((images, torch.tensor([3, 4])))
        >>> x[:, 0, 0, 0].tolist(), x.dtype, y.tolist()
        ([-1.0, 1.0], torch.float32, [3, 4])
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        if len(mean) != len(std) or len(mean) == 0:
            raise ValueError(
                f"Normalize needs one mean and one std per channel, got mean={tuple(mean)!r} and std={tuple(std)!r}."
            )
        if any(s <= 0 for s in std):
            raise ValueError(f"Normalize std values must be positive, got std={tuple(std)!r}.")
        # Shaped (1, C, 1, 1) to broadcast over (N, C, H, W).
        self.mean = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """Returns ``(images.float() - mean) / std`` for images ``(N, C, H, W)``."""
        if images.ndim != 4 or images.shape[1] != self.mean.shape[1]:
            raise ValueError(
                f"Normalize expects images of shape (N, {self.mean.shape[1]}, H, W), got {tuple(images.shape)}."
            )
        mean = self.mean.to(images.device)
        std = self.std.to(images.device)
        return (images.float() - mean) / std

    def __call__(self, batch: Any) -> Any:
        if isinstance(batch, torch.Tensor):
            return self.normalize(batch)
        images, targets = batch
        return self.normalize(images), targets

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()})"
