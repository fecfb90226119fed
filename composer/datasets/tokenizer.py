"""Tokenizers for the text datasets: bytes by default, a ``tokenizer.json``, or a local transformers tokenizer folder.

The text datasets (``python_docs``, ``text_files``, ``hf_dataset``) turn text into token ids through one small
interface, :class:`Tokenizer`: ``encode_batch``, the vocabulary size, the token that ends a document (which packs
documents into causal-LM sequences) and the mask token (masked-LM collation). :func:`load_tokenizer` gives:

* ``None``: :class:`ByteTokenizer`, the UTF-8 bytes (a vocabulary of 256; documents end with a blank line), the
  default, which needs nothing installed;
* a ``tokenizer.json`` file: a Hugging Face ``tokenizers`` tokenizer, such as the one ``composer tokenizer train``
  writes (:func:`train_bpe_tokenizer`), with its special tokens read from a ``tokenizer_config.json`` next to it or
  recognised by their usual names (``<|endoftext|>``, ``</s>``, ``[SEP]``; ``[MASK]``, ``<mask>``);
* a folder: a transformers tokenizer folder (``tokenizer.json`` with ``tokenizer_config.json``, read without
  transformers; a folder without ``tokenizer.json`` is read by ``transformers.AutoTokenizer``, offline).

Nothing is downloaded. Each tokenizer has a ``fingerprint`` (the SHA-256 of its files), which keys the tokenized data
in the ``datasets`` cache, so that a changed tokenizer never reuses another's token ids.

Example:
    >>> tokenizer = load_tokenizer(None)
    >>> tokenizer.vocab_size, tokenizer.encode_batch(["hi"])
    (256, [[104, 105]])
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from composer.datasets.masking import BYTE_MASK_TOKEN_ID

__all__ = [
    "END_OF_TEXT",
    "MASK",
    "ByteTokenizer",
    "FileTokenizer",
    "Tokenizer",
    "load_tokenizer",
    "train_bpe_tokenizer",
]

END_OF_TEXT = "<|endoftext|>"
"""The token that ends each document in a tokenizer :func:`train_bpe_tokenizer` writes."""

MASK = "[MASK]"
"""The mask token of a tokenizer :func:`train_bpe_tokenizer` writes."""

_PAD = "[PAD]"
_END_NAMES = (END_OF_TEXT, "</s>", "<eos>", "[SEP]")
_MASK_NAMES = (MASK, "<mask>")
_FIX = (
    "Give a tokenizer.json (written by `composer tokenizer train` or Hugging Face tokenizers), a transformers "
    "tokenizer folder, or null for bytes."
)


class Tokenizer(Protocol):
    """What the text datasets need of a tokenizer.

    Attributes:
        vocab_size: One more than the largest token id: the smallest ``vocab_size`` a model may have.
        separator: The token ids that end each document when documents are packed into one stream.
        mask_token_id: The mask token of masked language modelling, or None.
        fingerprint: Changes whenever the token ids could (the SHA-256 of the tokenizer's files).
        source: Where the tokenizer came from, for messages.
    """

    vocab_size: int
    separator: tuple[int, ...]
    mask_token_id: int | None
    fingerprint: str
    source: str

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text, without special tokens."""
        ...


class ByteTokenizer:
    """UTF-8 bytes as tokens: a vocabulary of 256, documents separated by a blank line, 256 as the mask token.

    Example:
        >>> ByteTokenizer().encode_batch(["é"])
        [[195, 169]]
    """

    vocab_size: int = 256
    separator: tuple[int, ...] = (10, 10)
    mask_token_id: int | None = BYTE_MASK_TOKEN_ID
    fingerprint: str = "bytes"
    source: str = "bytes"

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The UTF-8 bytes of each text."""
        return [list(text.encode("utf-8")) for text in texts]


class FileTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer read from a ``tokenizer.json`` (see :func:`load_tokenizer`).

    Args:
        path: The ``tokenizer.json``.
        special_tokens: ``tokenizer_config.json``'s entries (``eos_token``, ``sep_token``, ``mask_token``), if any.

    Raises:
        ValueError: If the file does not load, or holds no token that ends a document.
    """

    def __init__(self, path: str | os.PathLike[str], special_tokens: dict[str, Any] | None = None) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        self.source = str(path)
        try:
            self.tokenizer = HFTokenizer.from_file(self.source)
        except Exception as error:  # tokenizers raises a bare Exception for a malformed file
            raise ValueError(f"tokenizer: {self.source} does not load as a tokenizer ({error}). {_FIX}") from None
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        if not vocab:
            raise ValueError(f"tokenizer: {self.source} has an empty vocabulary. {_FIX}")
        self.vocab_size = max(vocab.values()) + 1
        named = special_tokens or {}
        end = _special(vocab, named, ("eos_token", "sep_token"), _END_NAMES)
        if end is None:
            raise ValueError(
                f"tokenizer: {self.source} has no token that ends a document (eos_token or sep_token in "
                f"tokenizer_config.json, or one of {list(_END_NAMES)}), which packing documents needs. Train one with "
                "`composer tokenizer train`, which adds <|endoftext|>."
            )
        self.separator: tuple[int, ...] = (end,)
        self.mask_token_id: int | None = _special(vocab, named, ("mask_token",), _MASK_NAMES)
        self.fingerprint = _digest([Path(path)])

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text, without special tokens."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]


class _TransformersTokenizer:
    """A transformers tokenizer folder without a ``tokenizer.json`` (a slow tokenizer), read offline."""

    def __init__(self, folder: Path) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ImportError(
                f"tokenizer: {folder} has no tokenizer.json, so reading it needs transformers; install "
                "opencomposer[nlp]."
            ) from None
        self.source = str(folder)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"tokenizer: {folder} does not load as a tokenizer ({error}). {_FIX}") from None
        self.vocab_size = len(self.tokenizer)
        end = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.tokenizer.sep_token_id
        if end is None:
            raise ValueError(f"tokenizer: {folder} has neither an eos_token nor a sep_token to end documents. {_FIX}")
        self.separator: tuple[int, ...] = (int(end),)
        self.mask_token_id: int | None = self.tokenizer.mask_token_id
        self.fingerprint = _digest(sorted(p for p in folder.iterdir() if p.is_file()))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text, without special tokens."""
        return list(self.tokenizer(list(texts), add_special_tokens=False)["input_ids"])


def load_tokenizer(path: str | os.PathLike[str] | None) -> Tokenizer:
    """The tokenizer at ``path``: None for bytes, a ``tokenizer.json``, or a transformers tokenizer folder.

    Args:
        path: See the module docstring.

    Returns:
        Tokenizer: Its vocabulary size, document separator, mask token and fingerprint, and ``encode_batch``.

    Raises:
        ValueError: If nothing is at ``path``, or what is there does not load as a tokenizer (the message names the
            file and says what to give instead).

    Example:
        >>> load_tokenizer("no/such/tokenizer.json")
        Traceback (most recent call last):
        ...
        ValueError: tokenizer: no/such/tokenizer.json does not exist. Give a tokenizer.json ...
    """
    if path is None:
        return ByteTokenizer()
    location = Path(path).expanduser()
    if location.is_dir():
        if (location / "tokenizer.json").is_file():
            return FileTokenizer(location / "tokenizer.json", _special_tokens(location))
        return _TransformersTokenizer(location)
    if not location.is_file():
        raise ValueError(f"tokenizer: {path} does not exist. {_FIX}")
    return FileTokenizer(location, _special_tokens(location.parent))


def train_bpe_tokenizer(files: Sequence[str | os.PathLike[str]], vocab_size: int, out: str | os.PathLike[str]) -> Path:
    """Trains a byte-level BPE tokenizer on text files and writes it as a transformers tokenizer folder.

    The folder holds ``tokenizer.json`` (Hugging Face ``tokenizers``) and ``tokenizer_config.json`` naming its special
    tokens: ``<|endoftext|>`` (ends each document), ``[MASK]`` and ``[PAD]``, ids 0 to 2. Byte-level pre-tokenization
    means any text encodes, with no unknown token. Give the folder (or its ``tokenizer.json``) as a text dataset's
    ``tokenizer``, and ``vocab_size`` to the model.

    Args:
        files: The text files to learn merges from.
        vocab_size: The vocabulary to reach, at least 259 (the 256 bytes and the 3 special tokens).
        out: The folder to write (created if needed).

    Returns:
        Path: The ``tokenizer.json`` written.

    Raises:
        ValueError: If ``vocab_size`` is too small, or a file is missing.
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    specials = [END_OF_TEXT, MASK, _PAD]
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256 + len(specials):
        raise ValueError(
            f"vocab_size must be an int of at least 259 (256 bytes and 3 special tokens), got {vocab_size!r}."
        )
    missing = [str(f) for f in files if not Path(f).is_file()]
    if not files or missing:
        raise ValueError(f"files must name existing text files; missing: {missing or 'none given'}.")
    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(f) for f in files], trainer)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": END_OF_TEXT,
        "bos_token": END_OF_TEXT,
        "mask_token": MASK,
        "pad_token": _PAD,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return folder / "tokenizer.json"


def _special_tokens(folder: Path) -> dict[str, Any]:
    """The special tokens a ``tokenizer_config.json`` (or ``special_tokens_map.json``) in ``folder`` names."""
    found: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = folder / name
        if path.is_file():
            try:
                found.update(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, OSError) as error:
                raise ValueError(f"tokenizer: {path} is not valid JSON ({error}). {_FIX}") from None
    return found


def _special(vocab: dict[str, int], named: dict[str, Any], keys: Sequence[str], usual: Sequence[str]) -> int | None:
    """The id of the first special token ``named`` gives under ``keys``, else of the first ``usual`` name present."""
    for key in keys:
        value = named.get(key)
        token = value.get("content") if isinstance(value, dict) else value
        if isinstance(token, str) and token in vocab:
            return vocab[token]
    return next((vocab[token] for token in usual if token in vocab), None)


def _digest(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
