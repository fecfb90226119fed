"""``composer tokenizer train FILES --vocab-size N --out DIR``: a byte-level BPE tokenizer learnt from your text.

The folder written holds ``tokenizer.json`` and ``tokenizer_config.json`` (a transformers tokenizer folder) with the
special tokens ``<|endoftext|>`` (ends each document when documents are packed), ``[MASK]`` and ``[PAD]``. Give the
folder as the ``tokenizer`` of a text dataset (``python_docs``, ``text_files``, ``hf_dataset``) and N as the model's
``vocab_size``.
"""

from __future__ import annotations

import argparse
from typing import Any

from composer.config import ConfigError

__all__ = ["add_parser"]


def _train(args: argparse.Namespace) -> int:
    from composer.datasets.tokenizer import load_tokenizer, train_bpe_tokenizer

    try:
        written = train_bpe_tokenizer(args.files, args.vocab_size, args.out)
    except ValueError as error:
        raise ConfigError("tokenizer train", str(error)) from None
    except OSError as error:
        raise ConfigError(
            "tokenizer train --out", f"writing {args.out} failed ({type(error).__name__}: {error})."
        ) from None
    print(f"wrote {written.parent} (vocab_size {load_tokenizer(written.parent).vocab_size})")
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer tokenizer`` (and its ``train``) to the command line's subcommands."""
    parser = subparsers.add_parser("tokenizer", help="train a tokenizer for the text datasets", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="{train}")
    train = actions.add_parser(
        "train",
        help="learn a byte-level BPE tokenizer from text files",
        description="Learns a byte-level BPE tokenizer from FILES and writes it to the folder DIR.",
    )
    train.add_argument("files", metavar="FILES", nargs="+", help="the text files to learn from")
    train.add_argument("--vocab-size", type=int, required=True, metavar="N", help="the vocabulary size (at least 259)")
    train.add_argument("--out", required=True, metavar="DIR", help="the folder to write, e.g. tokenizers/mine")
    train.set_defaults(run=_train)
