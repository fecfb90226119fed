"""``composer checkpoint convert SRC DST``: a sharded checkpoint folder turned into one checkpoint file.

A run sharded with FSDP and ``state_dict_type='sharded'`` saves each checkpoint as a folder in which every rank wrote
its own shards. ``convert`` reads the whole folder in this one process (no process group, no GPU) and writes the
checkpoint an unsharded run would have written (atomically, with its checksum), which loads with ``load_path`` into
any run, sharded or not. SRC may be in an S3-compatible store (``s3://bucket/prefix/ep1-ba6``, with
``--endpoint-url`` for a store other than AWS; credentials from the standard AWS chain): the folder is checked
complete (``composer.pt`` there, every shard with the checksum it lists), downloaded into a temporary folder,
verified, converted, and the download deleted.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from composer.config import ConfigError

__all__ = ["add_parser"]


def _convert(args: argparse.Namespace) -> int:
    from composer.utils.checkpoint import CheckpointError, convert_sharded_to_full
    from composer.utils.object_store import ObjectStoreURL, parse_location

    try:
        source = parse_location(args.src, "SRC")
    except ValueError as error:
        raise ConfigError("checkpoint convert SRC", str(error)) from None
    if Path(args.dst).is_dir():
        example = Path(args.dst) / f"{Path(str(args.src).rstrip('/')).name}.pt"
        raise ConfigError(
            "checkpoint convert DST",
            f"{args.dst} is an existing folder; DST is the checkpoint file to write, e.g. {example}.",
        )
    try:
        if isinstance(source, ObjectStoreURL):
            with tempfile.TemporaryDirectory(prefix="composer-convert-") as scratch:
                written = convert_sharded_to_full(_download(source, args.endpoint_url, Path(scratch)), args.dst)
        else:
            written = convert_sharded_to_full(source, args.dst)
    except CheckpointError as error:
        raise ConfigError("checkpoint convert SRC", str(error)) from None
    except OSError as error:  # reading SRC or writing DST: the error names the file
        raise ConfigError(
            "checkpoint convert",
            f"converting {args.src} into {args.dst} failed ({type(error).__name__}: {error}); check that DST's folder "
            "can be created and written, and SRC read.",
        ) from None
    print(f"wrote {written}")
    return 0


def _download(source: Any, endpoint_url: str | None, scratch: Path) -> Path:
    """Downloads the sharded checkpoint folder at ``source`` (an ObjectStoreURL) into ``scratch``, verified."""
    from composer.utils.checkpoint import RemoteCheckpointFolder
    from composer.utils.object_store import ObjectStoreURL

    parent, _, name = source.prefix.rpartition("/")
    if not name:
        raise ConfigError(
            "checkpoint convert SRC",
            f"{source} names a bucket, not a checkpoint folder; give the folder, e.g. s3://{source.bucket}/run/ep1-ba6.",
        )
    options = {"local_folder": str(scratch), **({"endpoint_url": endpoint_url} if endpoint_url else {})}
    try:
        folder = RemoteCheckpointFolder.open(ObjectStoreURL(source.bucket, parent), options, "SRC", write=False)
    except ValueError as error:
        raise ConfigError("checkpoint convert SRC", str(error)) from None
    return folder.download_sharded(name)


def add_parser(subparsers: Any) -> None:
    """Adds ``composer checkpoint`` (and its ``convert``) to the command line's subcommands."""
    parser = subparsers.add_parser("checkpoint", help="work with checkpoints", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="{convert}")
    convert = actions.add_parser(
        "convert",
        help="turn a sharded checkpoint folder into one checkpoint file",
        description="Turns the sharded checkpoint folder SRC into the one checkpoint file DST.",
    )
    convert.add_argument(
        "src", metavar="SRC", help="a sharded checkpoint's folder, e.g. checkpoints/ep1-ba6 or s3://bucket/run/ep1-ba6"
    )
    convert.add_argument("dst", metavar="DST", help="the checkpoint file to write, e.g. ep1-ba6.pt")
    convert.add_argument(
        "--endpoint-url", default=None, help="an S3-compatible store's endpoint, for an s3:// SRC (default: AWS)"
    )
    convert.set_defaults(run=_convert)
