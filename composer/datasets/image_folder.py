"""ImageNet-style image folders (``<path>/<class name>/<image file>``) read through torchvision.

torchvision and Pillow are optional (``pip install 'opencomposer[vision]'``); this module imports them only when a
loader is built.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from composer.core.data_spec import DataSpec
from composer.datasets.normalization import IMAGENET_MEAN, IMAGENET_STD, Normalize

__all__ = ["image_folder_dataloader", "is_torchvision_available"]


def is_torchvision_available() -> bool:
    """Whether torchvision is installed (without importing it).

    Example:
        >>> isinstance(is_torchvision_available(), bool)
        True
    """
    return importlib.util.find_spec("torchvision") is not None


def _check_folder(path: Path) -> None:
    layout = "one sub-folder per class, each holding that class's images (<path>/<class>/<image>.jpg)"
    if not path.exists():
        raise FileNotFoundError(f"Image folder {str(path)!r} does not exist; expected a folder with {layout}.")
    if not path.is_dir():
        raise ValueError(f"Image folder path {str(path)!r} is a file; expected a folder with {layout}.")
    if not any(child.is_dir() for child in path.iterdir()):
        raise ValueError(f"Image folder {str(path)!r} has no class sub-folders; expected {layout}.")


def image_folder_dataloader(
    path: str | os.PathLike[str],
    batch_size: int,
    train: bool = True,
    crop_size: int = 224,
    resize_size: int = 256,
    seed: int = 0,
    num_workers: int = 8,
) -> DataSpec:
    """Returns a :class:`~composer.core.data_spec.DataSpec` over an ImageNet-style folder of class sub-folders.

    Training images get the standard ImageNet augmentation (a random resized crop to ``crop_size``, scale 0.08-1,
    then a horizontal flip); evaluation images are resized so their short side is ``resize_size``, then
    center-cropped to ``crop_size``. Images travel as uint8 ``(B, 3, crop_size, crop_size)`` and are normalized
    with the ImageNet mean and std by the DataSpec's device transform. Labels are the class indices
    torchvision's ``ImageFolder`` assigns (sub-folders in sorted order). The training loader shuffles with a
    generator seeded with ``seed`` and drops its last partial batch. The dataset's ``transform`` is a torchvision
    ``Compose`` ending in ``PILToTensor``: per-sample augmentations such as AugMix and RandAugment are inserted
    before that step and work on the PIL images.

    Args:
        path: The folder (``.../train`` or ``.../val`` of an ImageNet copy, say).
        batch_size: Samples per batch.
        train: Augment and shuffle (training) or resize and center-crop (evaluation).
        crop_size: Side of the square images the model sees.
        resize_size: Short side before the evaluation center crop.
        seed: Seed of the shuffling and of the augmentation's workers.
        num_workers: DataLoader worker processes (decoding JPEGs is the bottleneck; use several).

    Returns:
        DataSpec: The loader with its normalizing device transform.

    Raises:
        ImportError: If torchvision is not installed (install ``opencomposer[vision]``).
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If ``path`` is not a folder of class sub-folders with images.

    Example:
        >>> image_folder_dataloader("/no/such/imagenet/train", batch_size=256)
        Traceback (most recent call last):
        ...
        FileNotFoundError: Image folder '/no/such/imagenet/train' does not exist; expected a folder with one ...
    """
    folder = Path(path).expanduser()
    _check_folder(folder)
    if not is_torchvision_available():
        raise ImportError(
            "image_folder_dataloader needs torchvision. To fix, install the vision extra: "
            "pip install 'opencomposer[vision]'."
        )
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    steps: list[Any]
    if train:
        steps = [transforms.RandomResizedCrop(crop_size, scale=(0.08, 1.0)), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(resize_size), transforms.CenterCrop(crop_size)]
    try:
        # ImageFolder's loader opens every image as RGB; PILToTensor makes it (3, H, W) uint8, and normalization
        # happens later, on the device. Per-sample augmentations (AugMix, RandAugment) go before PILToTensor.
        dataset = ImageFolder(str(folder), transform=transforms.Compose([*steps, transforms.PILToTensor()]))
    except (FileNotFoundError, RuntimeError) as error:  # torchvision's "found no valid file for the classes"
        raise ValueError(f"Image folder {str(folder)!r} holds no readable images: {error}") from None
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=train,
        drop_last=train and len(dataset) >= batch_size,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed) if train else None,
        persistent_workers=num_workers > 0,
    )
    return DataSpec(loader, device_transforms=Normalize(IMAGENET_MEAN, IMAGENET_STD))
