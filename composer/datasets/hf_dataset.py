"""Your own data through Hugging Face ``datasets``, from local files only: parquet, JSON lines, CSV, arrow files, a
folder of them, or a ``save_to_disk`` folder.

:class:`HFDataset` names the columns: ``text_column`` for a language model (tokenized with a tokenizer of
:func:`~composer.datasets.tokenizer.load_tokenizer`, documents packed into ``seq_len`` windows), or ``image_column``
and ``label_column`` for a classifier. ``split`` picks the split; ``holdout`` instead splits one file by a seeded
fraction, the training loader reading the rest and the evaluation loader the part held out.

Nothing is downloaded: the load runs with the Hugging Face offline switches set for its duration only (the
environment variables and the libraries' own flags, put back after), so a hub name works only where a copy is in the
local cache, and fails at construction with the local form to use instead. Tokenized text is cached by ``datasets``
(a ``map`` whose fingerprint holds the data's, the column's and the tokenizer's), so a second run with the same
tokenizer reads its ids from the cache, and another tokenizer never reuses them.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "notes.jsonl").write_text('{"text": "All work and no play."}\\n' * 20)
    >>> data = HFDataset(str(folder / "notes.jsonl"), text_column="text", seq_len=16, cache_dir=str(folder / "cache"))
    >>> batch = next(iter(data.dataloader(batch_size=4, train=True)))
    >>> batch["input_ids"].shape
    torch.Size([4, 16])
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from composer.datasets.loader import split_dataloader
from composer.datasets.masking import BYTE_MASK_TOKEN_ID
from composer.datasets.normalization import ToNormalizedTensor
from composer.datasets.text import TokenTextDataset, text_collator
from composer.datasets.tokenizer import Tokenizer, load_tokenizer

__all__ = ["FORMATS", "HFDataset", "check_hf_arguments", "hf_offline", "load_local_dataset"]

FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv", ".arrow": "arrow"}
"""File suffix -> the ``datasets`` builder that reads it."""

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_CACHE_VERSION = "packed-1"  # bump when the tokenized layout changes, so old cache files are not reused


@contextlib.contextmanager
def hf_offline() -> Iterator[None]:
    """Hugging Face's offline switches on for the body only: ``HF_HUB_OFFLINE`` and ``HF_DATASETS_OFFLINE`` in the
    environment, and the flags ``datasets`` and ``huggingface_hub`` read them into at import; all put back after.

    Example:
        >>> import os
        >>> before = os.environ.get("HF_HUB_OFFLINE")
        >>> with hf_offline():
        ...     os.environ["HF_HUB_OFFLINE"]
        '1'
        >>> os.environ.get("HF_HUB_OFFLINE") == before
        True
    """
    import datasets.config
    import huggingface_hub.constants

    flags = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE")]
    flags.append((huggingface_hub.constants, "HF_HUB_OFFLINE"))
    saved_flags = [getattr(module, name) for module, name in flags]
    saved_variables = {name: os.environ.get(name) for name in _OFFLINE_VARIABLES}
    try:
        os.environ.update(dict.fromkeys(_OFFLINE_VARIABLES, "1"))
        for module, name in flags:
            setattr(module, name, True)
        yield
    finally:
        for (module, name), value in zip(flags, saved_flags):
            setattr(module, name, value)
        for name, saved in saved_variables.items():
            if saved is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = saved


def load_local_dataset(path: str, split: str = "train", cache_dir: str | None = None) -> Any:
    """One split of the dataset at ``path``, read offline (:func:`hf_offline`), as a ``datasets.Dataset``.

    Args:
        path: A data file (:data:`FORMATS`), a glob of them, a folder of them (splits named by their file names, as
            ``datasets`` infers them), a ``save_to_disk`` folder, or a hub name already in the local cache.
        split: The split; a single file or glob is that split.
        cache_dir: Where ``datasets`` keeps the arrow files it builds from the data files; None for its default.

    Raises:
        ValueError: For an unknown suffix, a split the data does not have, or a name that is no local file or
            folder and no cached hub dataset (the message shows the local form to use).
    """
    import datasets

    location = Path(path).expanduser()
    matches = sorted(glob.glob(str(location))) if not location.exists() else []
    with hf_offline():
        if location.is_dir() and (
            (location / "dataset_info.json").is_file() or (location / "dataset_dict.json").is_file()
        ):
            loaded = datasets.load_from_disk(str(location))
        elif location.is_dir():
            loaded = datasets.load_dataset(str(location), cache_dir=cache_dir)
        elif location.is_file() or matches:
            files = [str(location)] if location.is_file() else matches
            suffix = Path(files[0]).suffix.lower()
            if suffix not in FORMATS:
                raise ValueError(
                    f"path: {files[0]} has the suffix {suffix!r}, which is no data format read here; use one of "
                    f"{sorted(FORMATS)}, or a folder written by save_to_disk."
                )
            try:
                loaded = datasets.load_dataset(FORMATS[suffix], data_files={split: files}, cache_dir=cache_dir)
            except Exception as error:  # datasets raises many kinds (ValueError, StopIteration, its own) for bad files
                raise _unreadable(path, files, FORMATS[suffix], error) from None
        else:
            loaded = _cached_hub_dataset(path, cache_dir)
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise ValueError(f"split={split!r} is not a split of {path}; its splits are {sorted(loaded)}.")
        return loaded[split]
    return loaded


def _unreadable(path: str, files: list[str], builder: str, error: BaseException) -> ValueError:
    """The error for data files ``datasets`` cannot read: empty ones say so, others show the reader's error."""
    if all(_row_count(Path(f), builder) == 0 for f in files):
        return ValueError(f"path: {path} holds no rows (split empty): there is nothing to train on. Check the files.")
    cause = error.__cause__ or error
    return ValueError(
        f"path: {path} cannot be read as {builder} ({type(cause).__name__}: {cause}); check that each file is complete "
        "and of the format its suffix says."
    )


def _row_count(file: Path, builder: str) -> int | None:
    """The rows of a data file, where that is quick to tell (None: unknown)."""
    if file.stat().st_size == 0:
        return 0
    if builder == "parquet":
        import pyarrow.parquet

        try:
            return int(pyarrow.parquet.read_metadata(file).num_rows)
        except Exception:  # not a parquet file after all: the reader's error says more
            return None
    if builder in ("json", "csv"):
        with file.open("rb") as lines:
            rows = sum(1 for line in lines if line.strip())
        return rows - 1 if builder == "csv" else rows
    return None


def _cached_hub_dataset(path: str, cache_dir: str | None) -> Any:
    import datasets

    try:
        return datasets.load_dataset(path, cache_dir=cache_dir)
    except Exception:  # offline, datasets raises ConnectionError, FileNotFoundError or its own errors
        local = f"data/{path.replace('/', '_')}"
        raise ValueError(
            f"path={path!r} is not a local file or folder, and no copy of a hub dataset of that name is in the local "
            "cache: nothing is downloaded here. Where the network is allowed, save a copy once with "
            f'`python -c "import datasets; datasets.load_dataset({path!r}).save_to_disk({local!r})"` and give '
            f"path: {local} (or give the path of your parquet, JSON lines, CSV or arrow files)."
        ) from None


def check_hf_arguments(
    text_column: str | None,
    image_column: str | None,
    label_column: str | None,
    seq_len: int,
    holdout: float | None,
    mlm_probability: float | None,
    num_workers: int,
) -> None:
    """The checks of :class:`HFDataset`'s arguments that need no data (a recipe runs them when it is read).

    Raises:
        ValueError: Naming the argument, the value and what to give.
    """
    if (text_column is None) == (image_column is None and label_column is None):
        raise ValueError(
            f"name the columns of one kind of data: text_column for text, or image_column and label_column for "
            f"images; got text_column={text_column!r}, image_column={image_column!r}, label_column={label_column!r}."
        )
    if text_column is None and (image_column is None or label_column is None):
        raise ValueError(f"image_column={image_column!r} and label_column={label_column!r}: images need both.")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len={seq_len!r} must be a positive number of tokens.")
    if holdout is not None and not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout={holdout!r} must be a fraction in (0, 1) (0.1 holds out a tenth), or null.")
    if mlm_probability is not None and (text_column is None or not 0.0 < mlm_probability < 1.0):
        raise ValueError(f"mlm_probability={mlm_probability!r} must be in (0, 1) (BERT uses 0.15), for text only.")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers={num_workers!r} must be 0 (load in the main process) or more.")


class HFDataset:
    """One split of your own data files through Hugging Face ``datasets``, read offline: text, or images and labels.

    The split is read (offline) and its columns checked when this is built, so a wrong path, column or type fails
    here, before any training; :meth:`dataloader` then tokenizes (cached) or decodes images as batches are drawn.

    Args:
        path: A parquet, JSON lines, CSV or arrow file, a glob or folder of them, or a ``save_to_disk`` folder.
        split: The split to read.
        text_column: The column of text, for a language model.
        image_column: The column of images (``datasets`` images or arrays of pixel values), for a classifier.
        label_column: The column of integer class labels, with ``image_column``.
        tokenizer: A ``tokenizer.json`` or tokenizer folder; null for bytes.
        seq_len: Tokens per sample; documents are packed, each ended by the tokenizer's end-of-text token.
        holdout: The fraction of the split held out for evaluation, drawn with ``holdout_seed``: the training loader
            reads the rest, the evaluation loader the part held out. Null: the whole split.
        holdout_seed: The seed of that draw.
        mlm_probability: The fraction of tokens masked for a masked language model, or null.
        num_workers: DataLoader worker processes.
        cache_dir: Where ``datasets`` caches the data read and the tokenized ids; null for its default.

    Raises:
        ValueError: For arguments out of range, data that cannot be read, a missing column, a column of another
            type, or an empty split; the message names the file and the argument.
    """

    def __init__(
        self,
        path: str,
        split: str = "train",
        text_column: str | None = None,
        image_column: str | None = None,
        label_column: str | None = None,
        tokenizer: str | None = None,
        seq_len: int = 128,
        holdout: float | None = None,
        holdout_seed: int = 0,
        mlm_probability: float | None = None,
        num_workers: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        check_hf_arguments(text_column, image_column, label_column, seq_len, holdout, mlm_probability, num_workers)
        self.path, self.split, self.cache_dir = path, split, cache_dir
        self.text_column, self.image_column, self.label_column = text_column, image_column, label_column
        self.seq_len, self.holdout, self.holdout_seed = seq_len, holdout, holdout_seed
        self.mlm_probability, self.num_workers = mlm_probability, num_workers
        self.tokenizer: Tokenizer = load_tokenizer(tokenizer)
        self.data = load_local_dataset(path, split, cache_dir)
        self._check_columns()

    def _where(self) -> str:
        return f"{self.path} (split {self.split!r})"

    def _check_columns(self) -> None:

        features = self.data.features
        if len(self.data) == 0:
            raise ValueError(f"{self._where()} is empty: there is nothing to train on. Check path and split.")
        for key in ("text_column", "image_column", "label_column"):
            column = getattr(self, key)
            if column is not None and column not in features:
                raise ValueError(
                    f"{key}={column!r} is not a column of {self._where()}; its columns are {list(features)}."
                )
        wanted: dict[str, tuple[Callable[[Any], bool], str]] = {
            "text_column": (_is_text, "text"),
            "label_column": (_is_label, "integer class labels"),
            "image_column": (_is_image, "images (a datasets Image, or arrays of pixel values)"),
        }
        for key, (fits, what) in wanted.items():
            column = getattr(self, key)
            if column is not None and not fits(features[column]):
                raise ValueError(f"{key}={column!r} of {self._where()} holds {features[column]}, not {what}.")
            if column is not None and self.data.data.column(column).null_count:
                raise ValueError(f"{key}={column!r} of {self._where()} has empty (null) values; drop or fill them.")
        if self.text_column is not None and not _longest_text(self.data.data.column(self.text_column)):
            raise ValueError(
                f"text_column={self.text_column!r} of {self._where()} holds only empty texts: nothing to train on."
            )

    def part(self, train: bool) -> Any:
        """The ``datasets.Dataset`` a loader reads: the whole split, or with ``holdout`` the rest or the held-out part."""
        if self.holdout is None:
            return self.data
        from datasets.fingerprint import Hasher

        # The index files go to the cache, never next to the data (a save_to_disk folder is the user's).
        key = Hasher.hash([self.data._fingerprint, self.holdout, self.holdout_seed])
        folder = _cache_folder(self.cache_dir)
        parts = self.data.train_test_split(
            test_size=self.holdout,
            seed=self.holdout_seed,
            train_indices_cache_file_name=str(folder / f"{key}-rest.arrow"),
            test_indices_cache_file_name=str(folder / f"{key}-held-out.arrow"),
        )
        part = parts["train" if train else "test"]
        if len(part) == 0:
            raise ValueError(f"holdout={self.holdout!r} leaves no rows of {self._where()} for one side; change it.")
        return part

    def torch_dataset(self, train: bool, key: str = "") -> Dataset[Any]:
        """The samples: packed token windows (:class:`~composer.datasets.TokenTextDataset`) or (image, label) pairs
        (an image that cannot be decoded is named with the file, ``key``: the recipe's, and ``image_column``)."""
        part = self.part(train)
        if self.text_column is None:
            images = HFImageDataset(part, str(self.image_column), str(self.label_column))
            images.source = f"{key}{': ' if key else ''}image_column={self.image_column!r} of {self._where()}"
            return images
        tokens = _packed_tokens(part, self.text_column, self.tokenizer, self.cache_dir)
        if len(tokens) < self.seq_len:
            raise ValueError(
                f"{self._where()} holds {len(tokens)} tokens, fewer than seq_len={self.seq_len}: no sample. Lower "
                "seq_len or add text."
            )
        return TokenTextDataset(tokens, self.seq_len, vocab_size=self.tokenizer.vocab_size)

    def dataloader(self, batch_size: int, train: bool, seed: int = 0, key: str = "") -> DataLoader[Any]:
        """The loader: training shuffled from ``seed`` (last partial batch dropped), evaluation in order.

        Args:
            batch_size: Samples per batch.
            train: The training loader, or the evaluation loader.
            seed: The seed of the training order (and of the evaluation masks).
            key: The recipe key of this dataset, which an image that cannot be decoded names.
        """
        mlm = self.mlm_probability
        collate_fn = text_collator(self.tokenizer, mlm, BYTE_MASK_TOKEN_ID, train, seed) if self.text_column else None
        return split_dataloader(self.torch_dataset(train, key), batch_size, train, seed, self.num_workers, collate_fn)


class HFImageDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """(image, label) pairs of a ``datasets.Dataset``: images as float tensors ``(C, H, W)`` in ``[0, 1]``.

    Args:
        data: The dataset.
        image_column: Its column of images (decoded images, or arrays of pixel values ``(H, W)`` or ``(C, H, W)``).
        label_column: Its column of integer labels.

    Attributes:
        transform (ToNormalizedTensor): The conversion of each image; augmentations (AugMix, RandAugment) are added
            before it, as to a torchvision dataset's.
        source (str): What an image that cannot be decoded is named after (the column, the file, the recipe key).
    """

    source = ""

    def __init__(self, data: Any, image_column: str, label_column: str) -> None:
        self.data = data.select_columns([image_column, label_column])
        self.image_column, self.label_column = image_column, label_column
        self.labels = torch.as_tensor(np.asarray(self.data[label_column]), dtype=torch.long)
        self.transform = ToNormalizedTensor()

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._sample(self._images([index])[0], index)

    @property
    def deterministic_samples(self) -> bool:
        """Whether a sample depends on its index alone (no augmentation added to ``transform``), so that a resumed
        epoch skips the batches already trained without reading them (:mod:`composer.trainer.skipped_batches`)."""
        return type(self.transform) is ToNormalizedTensor

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The samples at ``indices`` (the DataLoader fetches a batch with this): their rows read from the arrow table
        at once, which costs about what reading one row does; decoded images of one size, without augmentations,
        converted as one batch (the values of ``dataset[i]``), others one by one."""
        images = self._images(indices)
        pixels = _stacked_pixels(images) if self.deterministic_samples else None
        if pixels is None:
            return [self._sample(image, index) for image, index in zip(images, indices, strict=True)]
        converted = self.transform.convert_batch(pixels)
        return list(zip(converted.unbind(0), self.labels[indices].unbind(0), strict=True))

    def _images(self, indices: list[int]) -> list[Any]:
        try:
            return list(self.data[indices][self.image_column])
        except Exception as error:  # PIL's, for bytes that are no image (datasets decodes them as the rows are read)
            if len(indices) > 1:  # one by one, to name the row
                return [self._images([index])[0] for index in indices]
            where = self.source or f"image_column={self.image_column!r}"
            raise ValueError(
                f"{where}: the image of row {indices[0]} cannot be decoded ({type(error).__name__}: {error}); fix or "
                "drop that row."
            ) from error

    def _sample(self, image: Any, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not hasattr(image, "mode"):  # an array of pixel values rather than a decoded image
            array = np.asarray(image)
            image = torch.from_numpy(array[None] if array.ndim == 2 else array)
            if image.dtype != torch.uint8:
                return image.float(), self.labels[index]
        return self.transform(image), self.labels[index]


def _stacked_pixels(images: list[Any]) -> torch.Tensor | None:
    """Decoded 8-bit images of one mode and size as one uint8 batch ``(B, C, H, W)``; None for anything else."""
    if not images or not all(hasattr(image, "mode") for image in images):
        return None
    if len({(image.mode, image.size) for image in images}) != 1:
        return None
    pixels = np.stack([np.asarray(image) for image in images])
    if pixels.dtype != np.uint8 or pixels.ndim not in (3, 4):
        return None
    batch = torch.from_numpy(pixels)
    return batch.unsqueeze(1) if batch.ndim == 3 else batch.permute(0, 3, 1, 2)


def _is_text(feature: Any) -> bool:
    import datasets

    return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")


def _longest_text(column: Any) -> int:
    """The length of the longest text of an arrow column of strings."""
    import pyarrow.compute

    return int(pyarrow.compute.max(pyarrow.compute.utf8_length(column)).as_py() or 0)


def _is_label(feature: Any) -> bool:
    import datasets

    return isinstance(feature, datasets.ClassLabel) or (
        isinstance(feature, datasets.Value) and feature.dtype.startswith(("int", "uint"))
    )


def _is_image(feature: Any) -> bool:
    import datasets

    while isinstance(feature, (datasets.List, datasets.Sequence)):
        feature = feature.feature
    if isinstance(feature, (datasets.Array2D, datasets.Array3D)):
        return True
    return isinstance(feature, datasets.Image) or (
        isinstance(feature, datasets.Value) and feature.dtype.startswith(("int", "uint", "float"))
    )


def _cache_folder(cache_dir: str | None) -> Path:
    """Where the tokenized ids and the held-out indices are cached: in ``cache_dir``, else in ``datasets``' cache."""
    import datasets

    folder = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "opencomposer-tokenized"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _packed_tokens(part: Any, column: str, tokenizer: Tokenizer, cache_dir: str | None) -> torch.Tensor:
    """The part's documents tokenized (cached by ``datasets``) and joined, each ended by the separator: 1-D int32."""
    import datasets
    from datasets.fingerprint import Hasher

    # The cache key: the data's fingerprint (its files and every transform so far), the column, the tokenizer's.
    fingerprint = Hasher.hash([part._fingerprint, column, tokenizer.fingerprint, _CACHE_VERSION])
    folder = _cache_folder(cache_dir)
    separator = list(tokenizer.separator)

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        return {"input_ids": [ids + separator for ids in tokenizer.encode_batch(batch[column])]}

    tokenized = part.map(
        encode,
        batched=True,
        remove_columns=part.column_names,
        features=datasets.Features({"input_ids": datasets.List(datasets.Value("int32"))}),
        new_fingerprint=fingerprint,
        cache_file_name=str(folder / f"{fingerprint}.arrow"),
        desc=f"tokenizing {column}",
    )
    table = tokenized.with_format("arrow")[:]
    chunks = [chunk.flatten().to_numpy(zero_copy_only=False) for chunk in table.column("input_ids").chunks]
    return torch.from_numpy(np.concatenate(chunks).astype(np.int32, copy=False))
