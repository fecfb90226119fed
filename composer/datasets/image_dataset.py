"""Images held in memory as one uint8 tensor, with labels and a torchvision-style per-sample ``transform``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import Dataset

from composer.datasets.normalization import ToNormalizedTensor

__all__ = ["ImageTensorDataset"]


class ImageTensorDataset(Dataset[tuple[Any, torch.Tensor]]):
    """Images in one uint8 tensor, their labels, and a ``transform`` applied to each image as it is fetched.

    ``dataset[i]`` is ``(transform(images[i]), labels[i])``, or ``(images[i], labels[i])`` when ``transform`` is
    None, exactly as torchvision datasets apply theirs. The images stay uint8 ``(C, H, W)`` until the transform
    converts them, which is what per-sample augmentations need: AugMix and RandAugment (which work on uint8 images)
    are added to ``transform`` before its conversion to float (a
    :class:`~composer.datasets.normalization.ToNormalizedTensor` step, or torchvision's ``ToTensor``), and
    ``ColOut(batch=False)`` wraps it; all of them then run in the DataLoader's workers.

    The built-in digits and synthetic datasets are of this type (the CIFAR dataset is a subclass), with a
    ``ToNormalizedTensor`` as their transform.

    Args:
        images: The images, ``(N, C, H, W)`` uint8 for the image augmentations (``(N, ...)`` tensors of any dtype
            work when the transform does not care).
        labels: ``(N,)`` labels.
        transform: Applied to each image when it is fetched; None returns the stored image.

    Attributes:
        images (torch.Tensor): The stored images.
        labels (torch.Tensor): The labels.
        transform (Callable | None): The per-sample transform; assign to it to change the pipeline.

    Example:
        >>> from composer.datasets import ToNormalizedTensor
        >>> images = torch.full((4, 1, 2, 2), 255, dtype=torch.uint8)
        >>> dataset = ImageTensorDataset(images, torch.arange(4), transform=ToNormalizedTensor())
        >>> x, y = dataset[1]
        >>> x.dtype, x.max().item(), int(y)
        (torch.float32, 1.0, 1)
        >>> dataset.transform = None  # the stored uint8 image
        >>> dataset[1][0].dtype
        torch.uint8
    """

    def __init__(
        self, images: torch.Tensor, labels: torch.Tensor, transform: Callable[[Any], Any] | None = None
    ) -> None:
        if not isinstance(images, torch.Tensor) or images.ndim < 2 or len(images) != len(labels):
            shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
            raise ValueError(
                f"{type(self).__name__} needs an images tensor (N, C, H, W) and N labels, got {shape} and "
                f"{len(labels)} labels."
            )
        self.images = images
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def _image(self, index: int) -> Any:
        """The stored image at ``index``, before the transform (subclasses augment it here)."""
        return self.images[index]

    def __getitem__(self, index: int) -> tuple[Any, torch.Tensor]:
        image = self._image(index)
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]

    @property
    def deterministic_samples(self) -> bool:
        """Whether a sample depends on its index alone: the stored images, with no transform or a plain
        ``ToNormalizedTensor`` (no augmentation), so that a resumed epoch skips the batches already trained without
        reading them (:mod:`composer.trainer.skipped_batches`)."""
        transform = self.transform
        plain = transform is None or type(transform) is ToNormalizedTensor
        return plain and type(self)._image is ImageTensorDataset._image

    def __getitems__(self, indices: list[int]) -> list[tuple[Any, torch.Tensor]]:
        """The samples at ``indices`` (the DataLoader fetches a batch with this).

        With the stored images and a plain :class:`~composer.datasets.normalization.ToNormalizedTensor` (or no
        transform), the whole batch is converted at once, which gives the same values as ``dataset[i]`` for each
        index at a fraction of the cost; any other transform (an augmentation added to the pipeline, say) runs per
        sample.
        """
        if not self.deterministic_samples:
            return [self[i] for i in indices]
        transform = self.transform
        index = torch.as_tensor(indices, dtype=torch.long)
        images = self.images.index_select(0, index)  # several times faster than images[index] for uint8
        if isinstance(transform, ToNormalizedTensor):
            images = transform.convert_batch(images)
        return list(zip(images.unbind(0), self.labels.index_select(0, index).unbind(0)))

    def __repr__(self) -> str:
        images = f"{tuple(self.images.shape)} {self.images.dtype}"
        return f"{type(self).__name__}(images={images}, transform={self.transform!r})"
