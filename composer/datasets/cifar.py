"""CIFAR-10 and CIFAR-100 read from the standard Python archive at a path you give; nothing is downloaded.

The archive is the one the dataset's authors publish (``cifar-10-python.tar.gz``, ``cifar-100-python.tar.gz``): a
tarball of pickled batches, each a dict with ``b'data'`` (uint8, ``(N, 3072)``, the red, green and blue planes of a
32x32 image in turn) and ``b'labels'`` (CIFAR-10) or ``b'fine_labels'`` (CIFAR-100). Point ``path`` at the tarball,
at the folder it unpacks to (``cifar-10-batches-py``, ``cifar-100-python``) or at a folder holding either.

The batches are unpickled with an unpickler that only rebuilds NumPy arrays and plain containers, so a tampered file
cannot run code.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from composer.core.data_spec import DataSpec
from composer.datasets.image_dataset import ImageTensorDataset
from composer.datasets.normalization import CIFAR10_MEAN, CIFAR10_STD, CIFAR100_MEAN, CIFAR100_STD, Normalize

__all__ = ["CIFARDataset", "cifar_dataloader", "load_cifar"]

# num_classes -> (folder inside the archive, archive name, training members, test members, label key)
_LAYOUTS: dict[int, tuple[str, str, tuple[str, ...], tuple[str, ...], bytes]] = {
    10: (
        "cifar-10-batches-py",
        "cifar-10-python.tar.gz",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        ("test_batch",),
        b"labels",
    ),
    100: ("cifar-100-python", "cifar-100-python.tar.gz", ("train",), ("test",), b"fine_labels"),
}

# What a CIFAR pickle may rebuild: NumPy arrays (of any NumPy version's path) and nothing else. (``_codecs.encode``
# turns text back into bytes: Python 3 pickles the bytes of an array with it at protocol 2.)
_ALLOWED_GLOBALS = {
    ("_codecs", "encode"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} (a CIFAR batch holds only arrays and lists)")


def _check_num_classes(num_classes: int) -> None:
    if num_classes not in _LAYOUTS:
        raise ValueError(f"CIFAR num_classes={num_classes!r} is not supported; use 10 (CIFAR-10) or 100 (CIFAR-100).")


def _read_members(path: Path, num_classes: int, train: bool) -> list[tuple[str, bytes]]:
    """The raw bytes of the split's batch files, from a tarball or a folder, as ``(name, bytes)`` pairs."""
    folder_name, archive_name, train_members, test_members, _ = _LAYOUTS[num_classes]
    members = train_members if train else test_members
    expected = (
        f"the {archive_name} archive, the {folder_name} folder it unpacks to, or a folder holding either "
        f"(with the batch files {list(members)})"
    )
    if not path.exists():
        raise FileNotFoundError(f"CIFAR-{num_classes} path {str(path)!r} does not exist; expected {expected}.")
    if path.is_dir():
        for candidate in (path, path / folder_name):
            if all((candidate / m).is_file() for m in members):
                return [(m, (candidate / m).read_bytes()) for m in members]
        if (path / archive_name).is_file():
            path = path / archive_name
        else:
            raise ValueError(f"CIFAR-{num_classes} path {str(path)!r} holds no CIFAR batches; expected {expected}.")
    try:
        with tarfile.open(path) as archive:
            found: dict[str, bytes] = {}
            for info in archive.getmembers():
                name = info.name.rsplit("/", 1)[-1]
                if name in members and info.isfile():
                    handle = archive.extractfile(info)
                    assert handle is not None
                    found[name] = handle.read()
    except (tarfile.TarError, OSError) as error:
        raise ValueError(
            f"CIFAR-{num_classes} path {str(path)!r} is not a readable tar archive ({error}); expected {expected}."
        ) from None
    missing = [m for m in members if m not in found]
    if missing:
        raise ValueError(f"CIFAR-{num_classes} archive {str(path)!r} lacks {missing}; expected {expected}.")
    return [(m, found[m]) for m in members]


def _decode(name: str, raw: bytes, label_key: bytes, source: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int64)
    except Exception as error:  # any decoding failure means the file is not a CIFAR batch
        raise ValueError(
            f"CIFAR batch {name!r} in {str(source)!r} is not in the standard format (a pickled dict with b'data' "
            f"and {label_key!r}): {error}"
        ) from None
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(
            f"CIFAR batch {name!r} in {str(source)!r} has data of shape {data.shape} and {len(labels)} labels; "
            "expected (N, 3072) uint8 data and N labels."
        )
    return data, labels


def load_cifar(path: str | os.PathLike[str], num_classes: int = 10, train: bool = True) -> tuple[torch.Tensor, ...]:
    """Reads one split of CIFAR-10 or CIFAR-100 from the standard archive (or the folder it unpacks to).

    Args:
        path: The ``.tar.gz`` archive, the folder it unpacks to, or a folder holding either.
        num_classes: 10 for CIFAR-10, 100 for CIFAR-100 (its fine labels).
        train: The training split (50,000 images) or the test split (10,000).

    Returns:
        tuple[torch.Tensor, torch.Tensor]: Images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` int64.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If it holds no CIFAR data in the standard format (the message names the file).

    Example:
        >>> load_cifar("/no/such/cifar-10-python.tar.gz")
        Traceback (most recent call last):
        ...
        FileNotFoundError: CIFAR-10 path '/no/such/cifar-10-python.tar.gz' does not exist; expected the ...
    """
    _check_num_classes(num_classes)
    source = Path(path).expanduser()
    label_key = _LAYOUTS[num_classes][4]
    parts = [_decode(name, raw, label_key, source) for name, raw in _read_members(source, num_classes, train)]
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    if labels.min(initial=0) < 0 or labels.max(initial=0) >= num_classes:
        raise ValueError(
            f"CIFAR-{num_classes} labels in {str(source)!r} range over [{labels.min()}, {labels.max()}]; expected "
            f"[0, {num_classes - 1}]. Check num_classes (10 or 100) against the archive."
        )
    images = torch.from_numpy(data).view(-1, 3, 32, 32)  # the planes are stored R, G, B, each row-major
    return images, torch.from_numpy(labels)


class CIFARDataset(ImageTensorDataset):
    """CIFAR images as uint8 tensors, with the standard training augmentation when ``augment`` is set.

    The augmentation pads each image by 4 pixels (zeros) and crops a random 32x32 window, then flips it horizontally
    with probability 1/2. It draws from torch's random state, which the DataLoader seeds per worker from its own
    generator (seeded from the run's seed), so a run's augmentations are reproducible. ``transform`` (a
    torchvision-style per-sample transform, see :class:`~composer.datasets.ImageTensorDataset`) runs after the crop
    and flip; it is None by default, so samples stay uint8 and :func:`cifar_dataloader` normalizes whole batches on
    the device. Per-sample augmentations (AugMix, RandAugment, ``ColOut(batch=False)``) are added to it at the start
    of training and receive the cropped uint8 image.

    Args:
        images: ``(N, 3, H, W)`` uint8 images.
        labels: ``(N,)`` int64 labels.
        augment: Apply the random crop and flip.
        transform: Applied to each (cropped and flipped) image; None keeps it uint8.

    Example:
        >>> images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
        >>> dataset = CIFARDataset(images, torch.arange(4), augment=True)
        >>> x, y = dataset[1]
        >>> x.shape, x.dtype, int(y)
        (torch.Size([3, 32, 32]), torch.uint8, 1)
    """

    padding = 4

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        augment: bool = False,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        if images.ndim != 4 or len(images) != len(labels):
            raise ValueError(
                f"CIFARDataset needs images (N, C, H, W) and N labels, got {tuple(images.shape)} and {len(labels)}."
            )
        super().__init__(images, labels, transform)
        self.augment = augment

    def _image(self, index: int) -> torch.Tensor:
        image = self.images[index]
        if self.augment:
            _, height, width = image.shape
            padded = F.pad(image, (self.padding,) * 4)  # (C, H + 8, W + 8)
            top, left = (int(v) for v in torch.randint(0, 2 * self.padding + 1, (2,)))
            image = padded[:, top : top + height, left : left + width]
            if torch.rand(()) < 0.5:
                image = image.flip(-1)
        return image


def cifar_dataloader(
    path: str | os.PathLike[str],
    batch_size: int,
    train: bool = True,
    num_classes: int = 10,
    seed: int = 0,
    num_workers: int = 0,
) -> DataSpec:
    """Returns a :class:`~composer.core.data_spec.DataSpec` over one split of CIFAR-10/100 from a local archive.

    Batches are ``(images (B, 3, 32, 32) uint8, labels (B,))`` from the loader; the DataSpec's device transform
    normalizes the images with the dataset's per-channel mean and std once they are on the device. The training
    split is augmented (random crop with 4-pixel padding, horizontal flip), shuffled by a generator seeded with
    ``seed`` and drops its last partial batch; the test split is neither. The loader's dataset is a
    :class:`CIFARDataset`, whose ``transform`` (None) takes per-sample augmentations such as AugMix.

    Args:
        path: The archive, the folder it unpacks to, or a folder holding either (see :func:`load_cifar`).
        batch_size: Samples per batch.
        train: The training split (augmented, shuffled) or the test split.
        num_classes: 10 or 100.
        seed: Seed of the shuffling and of the augmentation's workers.
        num_workers: DataLoader worker processes.

    Returns:
        DataSpec: The loader with its normalizing device transform.

    Example:
        >>> cifar_dataloader("/no/such/folder", batch_size=128)
        Traceback (most recent call last):
        ...
        FileNotFoundError: CIFAR-10 path '/no/such/folder' does not exist; ...
    """
    images, labels = load_cifar(path, num_classes=num_classes, train=train)
    mean, std = (CIFAR10_MEAN, CIFAR10_STD) if num_classes == 10 else (CIFAR100_MEAN, CIFAR100_STD)
    loader = DataLoader(
        CIFARDataset(images, labels, augment=train),
        batch_size=batch_size,
        shuffle=train,
        drop_last=train and len(labels) >= batch_size,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed) if train else None,
    )
    return DataSpec(loader, device_transforms=Normalize(mean, std))
