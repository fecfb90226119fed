"""Writes small CIFAR archives in the standard format (pickled batches in a .tar.gz), for tests that read CIFAR."""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

__all__ = ["write_cifar_archive"]


def write_cifar_archive(
    folder: Path, num_classes: int = 10, per_batch: int = 4, seed: int = 0, random_pixels: bool = False
) -> Path:
    """Writes ``cifar-10-python.tar.gz`` (or ``cifar-100-python.tar.gz``) into ``folder`` and returns its path.

    CIFAR-10 gets five training batches and a test batch of ``per_batch`` images each; CIFAR-100 a ``train`` and a
    ``test`` file. Image ``i`` of a batch has every pixel of plane ``c`` equal to ``(10 * i + c) % 256`` plus the
    batch's index, so tests can check the channel layout (with ``random_pixels``, every pixel is uniform in 0-255
    instead, for tests that augment the images); labels are ``i % num_classes``.
    """
    rng = np.random.default_rng(seed)
    if num_classes == 10:
        root, label_key = "cifar-10-batches-py", "labels"
        members = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        meta = ("batches.meta", {b"label_names": [f"class{i}".encode() for i in range(10)]})
    else:
        root, label_key = "cifar-100-python", "fine_labels"
        members = ["train", "test"]
        meta = ("meta", {b"fine_label_names": [f"class{i}".encode() for i in range(100)]})
    path = folder / f"{root.split('-batches')[0].replace('-python', '')}-python.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for index, name in enumerate(members):
            planes = (10 * np.arange(per_batch)[:, None] + np.arange(3)[None, :] + index) % 256  # (N, 3)
            data = np.repeat(planes, 1024, axis=1).astype(np.uint8)  # (N, 3072): R plane, G plane, B plane
            if random_pixels:
                data = rng.integers(0, 256, data.shape, dtype=np.uint8)
            batch = {
                b"data": data,
                label_key.encode(): [int(i % num_classes) for i in range(per_batch)],
                b"filenames": [f"img{i}.png".encode() for i in range(per_batch)],
                b"noise": rng.integers(0, 2, 3),  # extra keys, as in real batches, are ignored
            }
            if num_classes == 100:
                batch[b"coarse_labels"] = [0] * per_batch
            _add(archive, f"{root}/{name}", pickle.dumps(batch, protocol=2))
        _add(archive, f"{root}/{meta[0]}", pickle.dumps(meta[1], protocol=2))
    return path


def _add(archive: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    archive.addfile(info, io.BytesIO(payload))
