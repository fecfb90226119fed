"""``composer data convert SRC DST``: LitData shards for the ``streaming`` dataset, from your data.

SRC is a folder of class sub-folders of images, a text file or a folder of text files, or (with ``--text-column``, or
``--image-column`` and ``--label-column``) a data file, glob or folder that the ``hf_dataset`` dataset reads. DST is a
new local folder or ``s3://bucket/prefix`` (reached with ``--storage-options``, the checkpoints' settings, as JSON).
Give DST as the ``path`` of a ``streaming`` dataset.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from composer.config import ConfigError

__all__ = ["add_parser"]

_OPTIONS = ("seq_len", "tokenizer", "text_column", "image_column", "label_column", "crop_size", "resize_size")


def _convert(args: argparse.Namespace) -> int:
    from composer.datasets.shards import source_dataset, write_shards
    from composer.utils.object_store import ObjectStoreError

    try:
        options = json.loads(args.storage_options) if args.storage_options else None
    except json.JSONDecodeError as error:
        example = '{"endpoint_url": "http://127.0.0.1:9000"}'
        raise ConfigError(
            "data convert --storage-options",
            f"{args.storage_options!r} is not JSON ({error}); give an object: '{example}'.",
        ) from None
    try:
        dataset = source_dataset(
            args.src,
            seq_len=args.seq_len,
            tokenizer=args.tokenizer,
            text_column=args.text_column,
            image_column=args.image_column,
            label_column=args.label_column,
            crop_size=args.crop_size,
            resize_size=args.resize_size,
            cache_dir=args.cache_dir,
        )
        count = write_shards(dataset, args.dst, chunk_bytes=args.chunk_bytes, storage_options=options)
    except (ValueError, ObjectStoreError) as error:
        raise ConfigError(_located(str(error)), str(error)) from None
    print(f"wrote {count} samples to {args.dst}")
    return 0


def _located(message: str) -> str:
    """``data convert`` and what a message is about, by the argument its first word names (``text_column='x' is not a
    column ...``: ``--text-column``; ``path: ...``, the data read: ``SRC``)."""
    first = re.match(r"\w+", message)
    name = first.group() if first else ""
    if name in _OPTIONS:
        return f"data convert --{name.replace('_', '-')}"
    return {"path": "data convert SRC", "SRC": "data convert SRC", "DST": "data convert DST"}.get(name, "data convert")


def add_parser(subparsers: Any) -> None:
    """Adds ``composer data`` (and its ``convert``) to the command line's subcommands."""
    parser = subparsers.add_parser("data", help="write shards for the streaming dataset", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="{convert}")
    convert = actions.add_parser(
        "convert",
        help="write LitData shards from an image folder, text files or an hf_dataset source",
        description=__doc__,
    )
    convert.add_argument("src", metavar="SRC", help="an image folder, text files, or a data file with --*-column")
    convert.add_argument("dst", metavar="DST", help="a new folder, or s3://bucket/prefix")
    convert.add_argument("--seq-len", type=int, default=128, metavar="N", help="tokens per text sample (128)")
    convert.add_argument("--tokenizer", metavar="PATH", help="a tokenizer.json or tokenizer folder (default: bytes)")
    convert.add_argument("--text-column", metavar="NAME", help="the text column of a data file")
    convert.add_argument("--image-column", metavar="NAME", help="the image column of a data file")
    convert.add_argument("--label-column", metavar="NAME", help="the label column of a data file")
    convert.add_argument("--crop-size", type=int, default=224, metavar="N", help="side of the images written (224)")
    convert.add_argument("--resize-size", type=int, default=256, metavar="N", help="short side before the crop (256)")
    convert.add_argument("--cache-dir", metavar="DIR", help="datasets' cache for a data file (default: its own)")
    convert.add_argument("--chunk-bytes", default="64MB", metavar="SIZE", help="size of each shard (64MB)")
    convert.add_argument("--storage-options", metavar="JSON", help='for s3://, e.g. \'{"endpoint_url": "http://..."}\'')
    convert.set_defaults(run=_convert)
