"""Writing LitData shards (the ``streaming`` dataset's input) from an image folder, text files or an ``hf_dataset`` source.

:func:`source_dataset` reads the source with the library's own readers, so the samples are those the matching recipe
dataset gives: ``(image, label)`` pairs of uint8 images resized and center-cropped as the ``image_folder``
evaluation loader does, ``{'input_ids', 'labels'}`` windows of ``seq_len`` tokens packed as ``text_files`` and
``hf_dataset`` pack them. :func:`write_shards` writes them in order with LitData's ``BinaryWriter`` (and each shard's
sha256 in ``checksums.json``, which ``verify_checksums`` checks), to a local folder
or, through a temporary folder, to ``s3://`` with the checkpoints' ``storage_options``. ``composer data convert SRC
DST`` runs both.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "notes.txt").write_text("All work and no play. " * 40)
    >>> write_shards(source_dataset(str(folder / "notes.txt"), seq_len=16), str(folder / "shards"))
    55
    >>> sorted(path.name for path in (folder / "shards").iterdir())
    ['checksums.json', 'chunk-0-0.bin', 'index.json']
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset

from composer.datasets.hf_dataset import HFDataset
from composer.datasets.image_folder import image_folder_dataloader
from composer.datasets.streaming import CHECKSUMS, INDEX, file_sha256
from composer.datasets.text import text_file_dataloader
from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.s3 import S3ObjectStore
from composer.utils.object_store.url import parse_location

__all__ = ["source_dataset", "write_shards"]


def source_dataset(
    src: str,
    seq_len: int = 128,
    tokenizer: str | None = None,
    text_column: str | None = None,
    image_column: str | None = None,
    label_column: str | None = None,
    crop_size: int = 224,
    resize_size: int = 256,
    cache_dir: str | None = None,
) -> Dataset[Any]:
    """The samples of ``src``: an ``hf_dataset`` source when a column is named, else a folder of class sub-folders
    (images), else a text file or a folder of text files.

    Args:
        src: The data file, glob or folder.
        seq_len: Tokens per text sample.
        tokenizer: A ``tokenizer.json`` or tokenizer folder for text; null for bytes.
        text_column: The text column of an ``hf_dataset`` source.
        image_column: The image column of an ``hf_dataset`` source.
        label_column: The label column of an ``hf_dataset`` source.
        crop_size: Side of the square images written.
        resize_size: Short side of the images before the center crop.
        cache_dir: Where ``datasets`` caches an ``hf_dataset`` source; null for its default.

    Raises:
        ValueError: If ``src`` does not exist or cannot be read as the kind it looks like.
    """
    path = Path(src).expanduser()
    if text_column is not None or image_column is not None or label_column is not None:
        source = HFDataset(
            src,
            text_column=text_column,
            image_column=image_column,
            label_column=label_column,
            tokenizer=tokenizer,
            seq_len=seq_len,
            cache_dir=cache_dir,
        )
        return source.torch_dataset(train=True)
    if not path.exists():
        raise ValueError(f"SRC {src} does not exist; give an image folder, text files, or a data file and its columns.")
    if path.is_dir() and any(child.is_dir() for child in path.iterdir()):
        spec = image_folder_dataloader(
            path, 1, train=False, crop_size=crop_size, resize_size=resize_size, num_workers=0
        )
        return spec.dataloader.dataset  # type: ignore[attr-defined,no-any-return]
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return text_file_dataloader(files, seq_len, shuffle=False, tokenizer=tokenizer).dataset


def write_shards(
    dataset: Dataset[Any],
    dst: str,
    chunk_bytes: str = "64MB",
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Writes every sample of ``dataset``, in order, as LitData shards to ``dst``; returns how many.

    Args:
        dataset: A map-style dataset.
        dst: A new local folder, or ``s3://bucket/prefix`` (written locally, then uploaded).
        chunk_bytes: The size of each shard (LitData's form: ``'64MB'``).
        storage_options: For ``s3://``: the checkpoints' ``storage_options``.

    Raises:
        ValueError: If ``dst`` already holds shards.
        composer.utils.object_store.ObjectStoreError: If the upload fails within ``retry_budget``.
    """
    from litdata.streaming.writer import BinaryWriter

    location = parse_location(dst, "DST")
    options = StorageOptions.from_input(storage_options)
    with tempfile.TemporaryDirectory(prefix="composer-shards-") as scratch:
        folder = location if isinstance(location, Path) else Path(scratch)
        if (folder / INDEX).exists():
            raise ValueError(f"DST {dst} already holds shards ({INDEX}); give a new folder or remove it first.")
        writer = BinaryWriter(str(folder), chunk_bytes=chunk_bytes)
        count = len(dataset)  # type: ignore[arg-type]
        for index in range(count):
            writer[index] = dataset[index]
        writer.done()
        writer.merge()
        shards = sorted(p.name for p in folder.iterdir() if p.name != INDEX)
        checksums = {"sha256": {name: file_sha256(folder / name) for name in shards}}
        (folder / CHECKSUMS).write_text(json.dumps(checksums, indent=1))
        if not isinstance(location, Path):
            store = S3ObjectStore(location.bucket, options)
            for file in sorted(folder.iterdir()):
                store.upload(str(file), location.key(file.name))
    return count
