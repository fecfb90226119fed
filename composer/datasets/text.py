"""Byte-level language-modelling data that needs no download: a shipped corpus, and a loader for your own files.

The built-in corpus is English technical prose: the Python 3.11.7 documentation that ships with CPython itself,
namely the language-reference topics of ``pydoc_data/topics.py`` (what ``help('assert')`` shows) followed by the
docstrings of the standard library's modules (test suites, IDLE, lib2to3, ensurepip, demos and installed packages
left out). It is natural text (sentences, examples, grammar snippets) under the PSF license, so it may be
redistributed with its notice (``data/NOTICE.txt``).

Why ship the text instead of building it from the installed Python: docstrings and topics change between
releases, patch releases included, so a corpus built on the fly would differ between machines. The text is
therefore shipped once, gzip-compressed (``data/python_docs.txt.gz``, 0.6 MB for 2.1 MB of text), and its SHA-256
is checked on every load; :func:`_build_python_docs` is the recipe that produced it (rebuilding from CPython
3.11.7's standard library gives the same bytes, which a test checks where that version runs).

Documents (one per reference topic or module) are separated by the ASCII record separator; document ``i`` goes to
the validation split when ``i % 10 == 9`` (58 of 583 documents, about 9% of the bytes), so the split is fixed and
both splits cover the whole range of subjects. For hyperparameter searches there is a second, disjoint fold:
``'tuning'`` holds the documents with ``i % 10 == 8`` and ``'tuning_train'`` the rest of ``'train'``, so a search
never sees the validation split that results are reported on. Tokens are raw UTF-8 bytes (a vocabulary of 256); documents are
joined with a blank line.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from composer.datasets.loader import split_dataloader
from composer.datasets.masking import BYTE_MASK_TOKEN_ID, MaskingCollator
from composer.datasets.tokenizer import ByteTokenizer, Tokenizer, load_tokenizer

__all__ = [
    "PYTHON_DOCS_SHA256",
    "ByteTextDataset",
    "TokenTextDataset",
    "byte_unigram_entropy",
    "load_python_docs",
    "masking_collator",
    "pack_documents",
    "python_docs_dataloaders",
    "python_docs_dataset",
    "text_collator",
    "text_file_dataloader",
    "tokenized_text",
]

PYTHON_DOCS_SHA256 = "54ada614d8fdc1c6e7a8354d35ceffd3462edc61439f598f88410e0ca20d5412"
"""SHA-256 of the decompressed corpus (UTF-8 text, documents separated by ``'\\x1e'``)."""

_DATA_FILE = Path(__file__).parent / "data" / "python_docs.txt.gz"
_DOCUMENT_SEPARATOR = "\x1e"
_VALIDATION_EVERY = 10  # document i is in the validation split when i % 10 == 9
_DOCUMENT_JOINER = b"\n\n"
_SPLITS = ("train", "validation", "tuning_train", "tuning")
_TUNING_FOLD = _VALIDATION_EVERY - 2  # document i is in the tuning fold when i % 10 == 8
# Parts of the standard library whose docstrings are not prose about the library (tests, demos, vendored tools).
_EXCLUDED_PARTS = frozenset(
    ("test", "tests", "idlelib", "turtledemo", "lib2to3", "ensurepip", "__phello__", "pydoc_data", "site-packages")
)


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def _docstrings(node: ast.AST) -> Iterator[str]:
    """The docstrings of ``node`` and everything inside it, in source order."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        doc = ast.get_docstring(node, clean=True)
        if doc:
            yield doc
    for child in ast.iter_child_nodes(node):
        yield from _docstrings(child)


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().split("\n"))


def _build_python_docs(stdlib: Path) -> str:
    """The corpus text built from a CPython standard library folder (the recipe behind the shipped file)."""
    tree = ast.parse((stdlib / "pydoc_data" / "topics.py").read_bytes())
    topics: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "topics" for t in node.targets):
            topics = ast.literal_eval(node.value)
    documents = [topics[name] for name in sorted(topics)]
    for path in sorted(stdlib.rglob("*.py")):
        relative = path.relative_to(stdlib)
        if _EXCLUDED_PARTS.intersection(relative.parts) or relative.name.startswith("test_"):
            continue
        try:
            module = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        docstrings = list(_docstrings(module))
        if docstrings:
            documents.append("\n\n".join(docstrings))
    return _DOCUMENT_SEPARATOR.join(_normalise(document) for document in documents)


def _python_docs_documents() -> list[bytes]:
    raw = gzip.decompress(_DATA_FILE.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != PYTHON_DOCS_SHA256:
        raise RuntimeError(
            f"The built-in text corpus {_DATA_FILE.name} has SHA-256 {digest}, expected {PYTHON_DOCS_SHA256}: the "
            "file was changed or damaged. Reinstall opencomposer (or restore the file from the repository)."
        )
    return raw.split(_DOCUMENT_SEPARATOR.encode())


def load_python_docs(split: str = "train") -> torch.Tensor:
    """Returns one split of the built-in Python-documentation corpus as a 1-D uint8 tensor of UTF-8 bytes.

    The corpus ships with the package, so this needs no download and gives the same bytes everywhere (its SHA-256
    is checked). ``'train'`` holds about 1.9 MB, ``'validation'`` about 0.2 MB; see the module docstring for what
    the text is and how the split is made.

    Args:
        split: ``'train'`` or ``'validation'`` (or the tuning fold's ``'tuning_train'`` and ``'tuning'``).

    Returns:
        torch.Tensor: The split's bytes, 1-D, uint8.

    Raises:
        ValueError: If ``split`` is not one of the four.
        RuntimeError: If the shipped file does not match its recorded SHA-256.

    Example:
        >>> data = load_python_docs("validation")
        >>> data.dtype, data.ndim
        (torch.uint8, 1)
        >>> bytes(data[:28].tolist())
        b'Binary arithmetic operations'
    """
    return torch.frombuffer(bytearray(_DOCUMENT_JOINER.join(_split_documents(split))), dtype=torch.uint8)


def python_docs_dataset(split: str, seq_len: int, tokenizer: Tokenizer | None = None) -> TokenTextDataset:
    """One split of the built-in corpus as windows of ``seq_len`` tokens: bytes, or packed tokens of ``tokenizer``.

    Args:
        split: ``'train'`` or ``'validation'`` (or the tuning fold's ``'tuning_train'`` and ``'tuning'``).
        seq_len: Tokens per sample.
        tokenizer: None for bytes (a :class:`ByteTextDataset` over :func:`load_python_docs`), or a tokenizer
            (:func:`~composer.datasets.tokenizer.load_tokenizer`): each document packed (:func:`pack_documents`).

    Example:
        >>> python_docs_dataset("validation", 64)[0]["input_ids"].shape
        torch.Size([64])
    """
    return tokenized_text(_split_documents(split), seq_len, tokenizer or ByteTokenizer())


def _split_documents(split: str) -> list[bytes]:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {list(_SPLITS)}, got {split!r}.")
    folds = {  # the remainders i % 10 of the documents each split holds
        "train": set(range(_VALIDATION_EVERY)) - {_VALIDATION_EVERY - 1},
        "validation": {_VALIDATION_EVERY - 1},
        "tuning_train": set(range(_VALIDATION_EVERY)) - {_VALIDATION_EVERY - 1, _TUNING_FOLD},
        "tuning": {_TUNING_FOLD},
    }
    return [
        document for index, document in enumerate(_python_docs_documents()) if index % _VALIDATION_EVERY in folds[split]
    ]


def byte_unigram_entropy(data: torch.Tensor) -> float:
    """Returns the entropy, in nats, of the byte frequencies of ``data``: the loss of the best context-free model.

    A language model that has learnt anything beyond byte frequencies has a per-token loss below this value.

    Args:
        data: A 1-D tensor of byte values (any integer dtype, values in ``[0, 256)``).

    Returns:
        float: The entropy of the byte frequencies, in nats.

    Example:
        >>> byte_unigram_entropy(torch.tensor([0, 1, 0, 1], dtype=torch.uint8))  # two equally likely bytes: log 2
        0.6931471805599453
    """
    counts = torch.bincount(data.reshape(-1).long(), minlength=256).double()
    probabilities = counts[counts > 0] / counts.sum()
    return float(-(probabilities * probabilities.log()).sum())


class TokenTextDataset(Dataset[dict[str, torch.Tensor]]):
    """Consecutive, non-overlapping windows of ``seq_len`` tokens, as Hugging Face-style dicts for a causal LM.

    Sample ``i`` covers tokens ``[i * seq_len, (i + 1) * seq_len)`` of ``tokens``; the tail shorter than ``seq_len``
    is left out. Each sample is ``{'input_ids': (seq_len,), 'labels': (seq_len,)}``, both int64 and equal: the model
    shifts the labels itself (Hugging Face convention), so every window trains ``seq_len - 1`` next-token
    predictions. Build ``tokens`` with :func:`pack_documents` (documents joined by the tokenizer's end-of-text
    token), or use :class:`ByteTextDataset` for bytes.

    Args:
        tokens: The token stream, a 1-D integer tensor.
        seq_len: Tokens per sample.
        vocab_size: The tokenizer's vocabulary size (one past its largest id), kept for the model check; None if
            unknown.

    Attributes:
        deterministic_samples (bool): True: a sample depends on its index alone, so a resumed epoch skips the
            batches already trained without reading them (:mod:`composer.trainer.skipped_batches`).

    Example:
        >>> dataset = TokenTextDataset(torch.arange(10), seq_len=4)
        >>> len(dataset), dataset[1]["input_ids"].tolist()
        (2, [4, 5, 6, 7])
    """

    deterministic_samples = True

    def __init__(self, tokens: torch.Tensor, seq_len: int, vocab_size: int | None = None) -> None:
        _check_positive_int("seq_len", seq_len)
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 1 or tokens.is_floating_point():
            raise ValueError(
                f"tokens must be a 1-D integer tensor of token ids, got {type(tokens).__name__}"
                + (
                    f" of dtype {tokens.dtype} and shape {tuple(tokens.shape)}"
                    if isinstance(tokens, torch.Tensor)
                    else ""
                )
                + "."
            )
        if len(tokens) < seq_len:
            raise ValueError(
                f"the text holds {len(tokens)} tokens, fewer than seq_len={seq_len}, so it makes no sample; use a "
                "smaller seq_len or more text."
            )
        self.data = tokens
        self.seq_len = seq_len
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return len(self.data) // self.seq_len

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range for a dataset of {len(self)} samples.")
        start = (index % len(self)) * self.seq_len
        tokens = self.data[start : start + self.seq_len].long()
        return {"input_ids": tokens, "labels": tokens.clone()}


class ByteTextDataset(TokenTextDataset):
    """Consecutive, non-overlapping windows of ``seq_len`` bytes, as Hugging Face-style dicts for a causal LM.

    Sample ``i`` covers bytes ``[i * seq_len, (i + 1) * seq_len)`` of ``data``; the tail shorter than ``seq_len`` is
    left out. Each sample is ``{'input_ids': (seq_len,), 'labels': (seq_len,)}``, both int64 and equal: the model
    shifts the labels itself (Hugging Face convention), so every window trains ``seq_len - 1`` next-byte predictions.

    Args:
        data: The text as a 1-D uint8 tensor (for example from :func:`load_python_docs`) or as bytes.
        seq_len: Bytes per sample.

    Example:
        >>> dataset = ByteTextDataset(b"hello world!", seq_len=5)
        >>> len(dataset)
        2
        >>> bytes(dataset[1]["input_ids"].tolist())
        b' worl'
        >>> torch.equal(dataset[1]["input_ids"], dataset[1]["labels"])
        True
    """

    def __init__(self, data: torch.Tensor | bytes, seq_len: int) -> None:
        if isinstance(data, (bytes, bytearray)):
            data = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if not isinstance(data, torch.Tensor) or data.ndim != 1 or data.dtype != torch.uint8:
            raise ValueError(
                f"data must be bytes or a 1-D uint8 tensor of byte values, got {type(data).__name__}"
                + (f" of dtype {data.dtype} and shape {tuple(data.shape)}" if isinstance(data, torch.Tensor) else "")
                + "."
            )
        super().__init__(data, seq_len, vocab_size=256)

    @classmethod
    def from_files(cls, paths: Sequence[str | os.PathLike[str]], seq_len: int) -> ByteTextDataset:
        """Builds the dataset from the raw bytes of text files, in the given order, joined by a blank line.

        Args:
            paths: The files to read (any encoding; bytes are used as they are).
            seq_len: Bytes per sample.

        Raises:
            ValueError: If ``paths`` is empty or names something that is not a file.
        """
        return cls(_DOCUMENT_JOINER.join(_read_files(paths)), seq_len)


def _read_files(paths: Sequence[str | os.PathLike[str]]) -> list[bytes]:
    if isinstance(paths, (str, os.PathLike)) or len(paths) == 0:
        raise ValueError(f"paths must be a non-empty list of text files, got {paths!r}.")
    parts = []
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"paths includes {str(path)!r}, which is not a file; pass paths of text files.")
        parts.append(Path(path).read_bytes())
    return parts


def masking_collator(
    mlm_probability: float | None, mask_token_id: int, shuffle: bool, seed: int, vocab_size: int = 256
) -> MaskingCollator | None:
    """The collate function of a byte-level loader: None for causal LM, else a :class:`MaskingCollator`.

    A shuffled (training) loader masks from torch's random state, so each epoch masks anew; an evaluation loader
    masks each batch from ``seed`` and its tokens, so every evaluation scores the same positions.

    Args:
        mlm_probability: None for causal language modelling, or the fraction of bytes to mask (BERT: 0.15).
        mask_token_id: The mask token (the model's ``config.mask_token_id``, or :data:`BYTE_MASK_TOKEN_ID`).
        shuffle: Whether the loader is a training loader.
        seed: The seed of an evaluation loader's masks.
        vocab_size: The vocabulary random replacements are drawn from (the bytes by default).

    Example:
        >>> masking_collator(None, BYTE_MASK_TOKEN_ID, shuffle=True, seed=0) is None
        True
        >>> masking_collator(0.15, BYTE_MASK_TOKEN_ID, shuffle=False, seed=0).seed
        0
    """
    if mlm_probability is None:
        return None
    seed_or_none = None if shuffle else seed
    return MaskingCollator(mask_token_id, vocab_size=vocab_size, mlm_probability=mlm_probability, seed=seed_or_none)


def pack_documents(documents: Sequence[Sequence[int]], separator: Sequence[int]) -> torch.Tensor:
    """The token ids of ``documents`` as one stream, each document followed by ``separator`` (the end-of-text token).

    Cut into ``seq_len`` windows by :class:`TokenTextDataset`, this is causal-LM packing: no padding, and a window
    may span the end of one document and the start of the next, which the separator marks.

    Args:
        documents: Each document's token ids.
        separator: The ids that end each document (a tokenizer's ``separator``).

    Returns:
        torch.Tensor: 1-D, int32.

    Example:
        >>> pack_documents([[5, 6], [7]], separator=[0]).tolist()
        [5, 6, 0, 7, 0]
    """
    pieces = [np.asarray(piece, dtype=np.int32) for document in documents for piece in (document, separator)]
    return torch.from_numpy(np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32))


def tokenized_text(documents: Sequence[bytes], seq_len: int, tokenizer: Tokenizer) -> TokenTextDataset:
    """The windows of ``seq_len`` tokens of UTF-8 ``documents``: bytes joined by a blank line, or packed tokens.

    Args:
        documents: The documents' UTF-8 bytes (undecodable bytes become U+FFFD for a real tokenizer).
        seq_len: Tokens per sample.
        tokenizer: A :class:`~composer.datasets.tokenizer.ByteTokenizer` (the bytes as they are) or another
            tokenizer (:func:`pack_documents` of its token ids).

    Example:
        >>> tokenized_text([b"ab", b"cd"], 3, ByteTokenizer())[0]["input_ids"].tolist()
        [97, 98, 10]
    """
    if isinstance(tokenizer, ByteTokenizer):
        return ByteTextDataset(_DOCUMENT_JOINER.join(documents), seq_len)
    ids = tokenizer.encode_batch([document.decode("utf-8", errors="replace") for document in documents])
    return TokenTextDataset(pack_documents(ids, tokenizer.separator), seq_len, vocab_size=tokenizer.vocab_size)


def text_collator(
    tokenizer: Tokenizer, mlm_probability: float | None, mask_token_id: int, shuffle: bool, seed: int
) -> MaskingCollator | None:
    """The collate function of a text loader: None for causal LM, else masking with the tokenizer's mask token.

    Bytes are masked with ``mask_token_id`` (:func:`masking_collator`); another tokenizer's own mask token is used,
    its end-of-text tokens are never masked, and random replacements are drawn from its vocabulary.

    Raises:
        ValueError: If ``mlm_probability`` is set and the tokenizer has no mask token.
    """
    if mlm_probability is None or isinstance(tokenizer, ByteTokenizer):
        return masking_collator(mlm_probability, mask_token_id, shuffle, seed)
    if tokenizer.mask_token_id is None:
        raise ValueError(
            f"tokenizer: {tokenizer.source} has no mask token ([MASK] or <mask>, or mask_token in "
            "tokenizer_config.json), which mlm_probability needs; use a tokenizer with one (`composer tokenizer "
            "train` adds [MASK]) or drop mlm_probability for a causal model."
        )
    return MaskingCollator(
        tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size,
        mlm_probability=mlm_probability,
        special_token_ids=tokenizer.separator,
        seed=None if shuffle else seed,
    )


def python_docs_dataloaders(
    seq_len: int = 128,
    batch_size: int = 32,
    eval_seq_len: int | None = None,
    eval_batch_size: int | None = None,
    seed: int = 0,
    num_workers: int = 0,
    mlm_probability: float | None = None,
    mask_token_id: int = BYTE_MASK_TOKEN_ID,
    tokenizer: str | os.PathLike[str] | None = None,
) -> tuple[DataLoader[dict[str, torch.Tensor]], DataLoader[dict[str, torch.Tensor]]]:
    """Returns training and validation loaders over the built-in Python-documentation corpus, byte by byte.

    Use it to train a language model on real text in minutes on a CPU, with nothing downloaded. Batches are dicts
    ``{'input_ids': (B, S), 'labels': (B, S)}`` of int64 byte values (a vocabulary of 256). The training loader
    reshuffles every epoch with a :class:`torch.Generator` seeded with ``seed`` and drops the last partial batch;
    the validation loader keeps its order and every sample. Evaluate at a longer ``eval_seq_len`` to measure length
    extrapolation (ALiBi).

    For a masked language model (BERT) pass ``mlm_probability``: the batches are then masked by BERT's 80/10/10
    rule (:func:`~composer.datasets.masking.mask_tokens`), with labels ``-100`` wherever nothing was masked.

    Args:
        seq_len: Training sequence length in bytes.
        batch_size: Training batch size.
        eval_seq_len: Validation sequence length; default ``seq_len``.
        eval_batch_size: Validation batch size; default ``batch_size``.
        seed: Seed of the training order (and of the validation masks).
        num_workers: DataLoader worker processes.
        mlm_probability: None for causal language modelling (labels equal to the inputs), or the fraction of bytes
            to mask for a masked language model (BERT uses 0.15).
        mask_token_id: The mask token, used with ``mlm_probability``: the model's ``config.mask_token_id``
            (:func:`~composer.datasets.masking.mask_token_id_of`), else 256 (a model with ``vocab_size=257``).
        tokenizer: None for bytes, or a tokenizer (:func:`~composer.datasets.tokenizer.load_tokenizer`): documents
            are then packed (:func:`pack_documents`), lengths count tokens, and masks use its mask token.

    Returns:
        tuple[DataLoader, DataLoader]: The training loader and the validation loader.

    Example:
        >>> train_dl, eval_dl = python_docs_dataloaders(seq_len=64, batch_size=8)
        >>> batch = next(iter(train_dl))
        >>> batch["input_ids"].shape, len(train_dl.dataset) * 64 > 1_500_000
        (torch.Size([8, 64]), True)
        >>> _, masked_dl = python_docs_dataloaders(seq_len=64, batch_size=8, mlm_probability=0.15)
        >>> batch = next(iter(masked_dl))
        >>> scored = batch["labels"] != -100
        >>> 0.05 < scored.float().mean().item() < 0.3, bool((batch["input_ids"][scored] == 256).any())
        (True, True)
    """
    _check_positive_int("seq_len", seq_len)
    eval_seq_len = seq_len if eval_seq_len is None else _check_positive_int("eval_seq_len", eval_seq_len)
    eval_batch_size = batch_size if eval_batch_size is None else eval_batch_size
    tokens = load_tokenizer(tokenizer)
    train_set = python_docs_dataset("train", seq_len, tokens)
    eval_set = python_docs_dataset("validation", eval_seq_len, tokens)
    train_collate = text_collator(tokens, mlm_probability, mask_token_id, shuffle=True, seed=seed)
    eval_collate = text_collator(tokens, mlm_probability, mask_token_id, shuffle=False, seed=seed)
    return (
        split_dataloader(train_set, batch_size, True, seed, num_workers, train_collate),
        split_dataloader(eval_set, eval_batch_size, False, seed, num_workers, eval_collate),
    )


def text_file_dataloader(
    paths: Sequence[str | os.PathLike[str]],
    seq_len: int = 128,
    batch_size: int = 32,
    shuffle: bool = True,
    seed: int = 0,
    num_workers: int = 0,
    mlm_probability: float | None = None,
    mask_token_id: int = BYTE_MASK_TOKEN_ID,
    tokenizer: str | os.PathLike[str] | None = None,
) -> DataLoader[dict[str, torch.Tensor]]:
    """Returns a byte-level language-modelling loader over your own text files.

    The files' bytes are joined (in the given order, separated by a blank line) and cut into windows of ``seq_len``
    bytes, as in :class:`ByteTextDataset`. Hold out a validation set by passing other files to a second call with
    ``shuffle=False``.

    Args:
        paths: The text files.
        seq_len: Bytes per sample.
        batch_size: Samples per batch.
        shuffle: Reshuffle every epoch (seeded with ``seed``) and drop the last partial batch.
        seed: Seed of the order (and, without ``shuffle``, of the masks).
        num_workers: DataLoader worker processes.
        mlm_probability: None for causal language modelling, or the fraction of bytes to mask for a masked
            language model, as in :func:`python_docs_dataloaders`.
        mask_token_id: The mask token, used with ``mlm_probability``: the model's ``config.mask_token_id``
            (:func:`~composer.datasets.masking.mask_token_id_of`), else 256 (a model with ``vocab_size=257``).
        tokenizer: None for bytes, or a ``tokenizer.json`` or tokenizer folder: each file is then a document, and
            the documents are packed (:func:`pack_documents`).

    Returns:
        DataLoader: The loader; its batches are dicts of ``input_ids`` and ``labels``, each ``(batch_size, seq_len)``.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "notes.txt").write_text("All work and no play. " * 20)
        >>> loader = text_file_dataloader([folder / "notes.txt"], seq_len=16, batch_size=4)
        >>> next(iter(loader))["input_ids"].shape
        torch.Size([4, 16])
    """
    tokens = load_tokenizer(tokenizer)
    collate_fn = text_collator(tokens, mlm_probability, mask_token_id, shuffle, seed)
    dataset = tokenized_text(_read_files(paths), seq_len, tokens)
    return split_dataloader(dataset, batch_size, shuffle, seed, num_workers, collate_fn)
