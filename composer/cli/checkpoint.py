"""``composer checkpoint convert SRC DST``: a sharded checkpoint folder turned into one checkpoint file.

A run sharded with FSDP and ``state_dict_type='sharded'`` saves each checkpoint as a folder in which every rank wrote
its own shards. ``convert`` reads the whole folder in this one process (no process group, no GPU) and writes the
checkpoint an unsharded run would have written (atomically, with its checksum), which loads with ``load_path`` into
any run, sharded or not.
"""

from __future__ import annotations

import argparse
from typing import Any

from composer.config import ConfigError

__all__ = ["add_parser"]


def _convert(args: argparse.Namespace) -> int:
    from composer.utils.checkpoint import CheckpointError, convert_sharded_to_full

    try:
        written = convert_sharded_to_full(args.src, args.dst)
    except CheckpointError as error:
        raise ConfigError("checkpoint convert SRC", str(error)) from None
    print(f"wrote {written}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer checkpoint`` (and its ``convert``) to the command line's subcommands."""
    parser = subparsers.add_parser("checkpoint", help="work with checkpoints", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="{convert}")
    convert = actions.add_parser(
        "convert",
        help="turn a sharded checkpoint folder into one checkpoint file",
        description="Turns the sharded checkpoint folder SRC into the one checkpoint file DST.",
    )
    convert.add_argument("src", metavar="SRC", help="a sharded checkpoint's folder, e.g. checkpoints/ep1-ba6")
    convert.add_argument("dst", metavar="DST", help="the checkpoint file to write, e.g. ep1-ba6.pt")
    convert.set_defaults(run=_convert)
