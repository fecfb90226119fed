"""Normalization: turn uint8 images into normalized float tensors, per batch on the device or per sample.

The CIFAR and image-folder loaders return uint8 images (a quarter of the bytes of float32 to collate, copy and move
to the GPU) and leave the float conversion and the per-channel normalization to :class:`Normalize`, which a
:class:`~composer.core.data_spec.DataSpec` runs as its ``device_transforms`` on the device, for training and
evaluation batches alike. Datasets that hand the model float tensors themselves (the digits, the synthetic images)
convert each sample with :class:`ToNormalizedTensor`, the last step of their ``transform``, so per-sample
augmentations that work on uint8 images can still go before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

__all__ = ["CIFAR10_MEAN", "CIFAR10_STD", "CIFAR100_MEAN", "CIFAR100_STD", "IMAGENET_MEAN", "IMAGENET_STD", "Normalize"]
__all__ += ["ToNormalizedTensor"]

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


def _as_floats(name: str, value: float | Sequence[float]) -> tuple[float, ...]:
    values = (value,) if isinstance(value, (int, float)) else tuple(value)
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ValueError(f"ToNormalizedTensor {name}={value!r} must be a number or one number per channel.")
    return tuple(float(v) for v in values)


class ToNormalizedTensor:
    """Per sample: a uint8 image (tensor or PIL image) to a float32 tensor ``(image - mean) / std``.

    The last step of a dataset's ``transform`` for datasets that hand the model float tensors. It marks itself as
    the conversion to a tensor (``converts_to_tensor``), so
    :func:`~composer.algorithms.utils.add_vision_dataset_transform` puts image augmentations (AugMix, RandAugment),
    which work on uint8 images, before it. ``mean`` and ``std`` are on the 0-255 scale of the images: the default
    ``mean=0, std=255`` maps to ``[0, 1]`` (as torchvision's ``ToTensor`` does); per-channel values (such as
    :data:`CIFAR10_MEAN`) need images ``(C, H, W)`` with ``C == len(mean)``. A uint8 tensor of any shape is converted
    elementwise with scalar ``mean`` and ``std``; a PIL image becomes ``(C, H, W)`` (``(1, H, W)`` for mode 'L').
    Picklable, so it runs in DataLoader workers.

    Args:
        mean: Subtracted from every pixel: one number, or one per channel. Default: 0.
        std: Then divided into it: one positive number, or one per channel. Default: 255.

    Raises:
        ValueError: On a tensor that is not uint8, or a shape that does not match per-channel statistics.

    Example:
        >>> to_tensor = ToNormalizedTensor()
        >>> to_tensor(torch.tensor([[[0, 51, 255]]], dtype=torch.uint8))
        tensor([[[0.0000, 0.2000, 1.0000]]])
        >>> per_channel = ToNormalizedTensor(mean=(127.5, 127.5, 127.5), std=(127.5, 127.5, 127.5))
        >>> per_channel(torch.zeros(3, 2, 2, dtype=torch.uint8))[:, 0, 0]
        tensor([-1., -1., -1.])
    """

    converts_to_tensor: ClassVar[bool] = True
    """Image augmentations go before this step (see :func:`~composer.algorithms.utils.add_vision_dataset_transform`)."""

    def __init__(self, mean: float | Sequence[float] = 0.0, std: float | Sequence[float] = 255.0) -> None:
        means, stds = _as_floats("mean", mean), _as_floats("std", std)
        if len(means) != len(stds) and 1 not in (len(means), len(stds)):
            raise ValueError(
                f"ToNormalizedTensor needs as many means as stds (or a single one of either), got mean={mean!r} and "
                f"std={std!r}."
            )
        if any(s <= 0 for s in stds):
            raise ValueError(f"ToNormalizedTensor std values must be positive, got std={std!r}.")
        self.mean = means[0] if len(means) == 1 else means
        self.std = stds[0] if len(stds) == 1 else stds
        self._channels = max(len(means), len(stds))
        # Scalars stay Python floats (any shape of image); per-channel values become (C, 1, 1) tensors.
        self._mean: float | torch.Tensor = means[0]
        self._std: float | torch.Tensor = stds[0]
        if self._channels > 1:
            self._mean = torch.tensor(means, dtype=torch.float32).expand(self._channels).reshape(-1, 1, 1)
            self._std = torch.tensor(stds, dtype=torch.float32).expand(self._channels).reshape(-1, 1, 1)

    def __call__(self, image: Any) -> torch.Tensor:
        """Returns ``(image - mean) / std`` as a float32 tensor."""
        if not isinstance(image, torch.Tensor):
            image = _pil_to_tensor(image)
        elif image.dtype != torch.uint8:
            raise ValueError(
                f"ToNormalizedTensor expects uint8 images (0-255), got a {image.dtype} tensor of shape "
                f"{tuple(image.shape)}. To fix, keep the conversion to float the last step of the transform (image "
                "augmentations go before it), or leave this step out for images that are already floats."
            )
        if self._channels > 1 and (image.ndim != 3 or image.shape[0] != self._channels):
            raise ValueError(
                f"ToNormalizedTensor has statistics for {self._channels} channels and expects images "
                f"({self._channels}, H, W), got shape {tuple(image.shape)}."
            )
        return self._convert(image)

    def convert_batch(self, images: torch.Tensor) -> torch.Tensor:
        """Converts a batch ``(B, *image shape)`` of uint8 images at once; the values equal per-sample calls'.

        Example:
            >>> to_tensor = ToNormalizedTensor(mean=(0.0, 255.0), std=255.0)
            >>> to_tensor.convert_batch(torch.full((4, 2, 1, 1), 255, dtype=torch.uint8))[0].flatten()
            tensor([1., 0.])
        """
        if images.dtype != torch.uint8:
            raise ValueError(f"ToNormalizedTensor expects uint8 images (0-255), got a {images.dtype} tensor.")
        if self._channels > 1 and (images.ndim != 4 or images.shape[1] != self._channels):
            raise ValueError(
                f"ToNormalizedTensor has statistics for {self._channels} channels and expects a batch "
                f"(B, {self._channels}, H, W), got shape {tuple(images.shape)}."
            )
        return self._convert(images)

    def _convert(self, images: torch.Tensor) -> torch.Tensor:
        # Elementwise, so a batch gives exactly the values of its samples converted one by one.
        out = images.to(torch.float32)
        if isinstance(self._mean, torch.Tensor) or self._mean != 0.0:
            out.sub_(self._mean)
        return out.div_(self._std)

    def __repr__(self) -> str:
        return f"ToNormalizedTensor(mean={self.mean!r}, std={self.std!r})"


def _pil_to_tensor(image: Any) -> torch.Tensor:
    """A PIL image (or anything NumPy reads as ``(H, W)`` or ``(H, W, C)`` uint8 pixels) as a ``(C, H, W)`` tensor."""
    pixels = np.array(image)  # a copy: PIL's buffer is read-only
    if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3):
        raise ValueError(
            f"ToNormalizedTensor expects a uint8 image tensor or a PIL image of 8-bit pixels, got "
            f"{type(image).__name__} with pixels {pixels.dtype} of shape {pixels.shape}. To fix, convert it first "
            "(img.convert('RGB'))."
        )
    tensor = torch.from_numpy(pixels)
    return tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1).contiguous()
