"""Config classes for the datasets of :mod:`composer.datasets`, as YAML names them (``train_dataset: {digits: {}}``).

A dataset config says where the data is and how to read it; the recipe slot it sits in decides the split:
``train_dataset`` gives the training split (shuffled, augmented where the dataset has an augmentation, last partial
batch dropped) and ``eval_dataset`` the evaluation split (in order, every sample). :meth:`DatasetHparams.synthetic`
returns a synthetic dataset of the same input shape, which the tests use to run every recipe without its data.

Example:
    >>> from composer.config.datasets import SyntheticClassificationHparams
    >>> spec = SyntheticClassificationHparams(shape=[1, 8, 8]).initialize_object(batch_size=4, train=True, seed=0)
    >>> images, labels = next(iter(spec.dataloader))
    >>> images.shape, labels.shape
    (torch.Size([4, 1, 8, 8]), torch.Size([4]))
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

from composer.core.data_spec import DataSpec
from composer.core.hparams import Hparams, derive_fields, hparams
from composer.datasets.hf_dataset import HFDataset, check_hf_arguments
from composer.datasets.loader import split_dataloader
from composer.datasets.streaming import StreamingShards
from composer.datasets.text import masking_collator

__all__ = [
    "DATASETS",
    "CIFAR10Hparams",
    "CIFAR100Hparams",
    "DatasetHparams",
    "DigitsHparams",
    "HFDatasetHparams",
    "ImageFolderHparams",
    "PythonDocsHparams",
    "StreamingHparams",
    "SyntheticClassificationHparams",
    "SyntheticTokensHparams",
    "TextFilesHparams",
]


def _check_masking(config: _TextFields | SyntheticTokensHparams) -> None:
    if config.mlm_probability is not None and not 0.0 < config.mlm_probability < 1.0:
        raise ValueError(
            f"mlm_probability={config.mlm_probability!r} must be in (0, 1) (BERT uses 0.15), or null for a causal "
            "language model."
        )
    if config.mask_token_id < 0:
        raise ValueError(
            f"mask_token_id={config.mask_token_id!r} must be a token id (0 or more): the model's "
            "config.mask_token_id, or 256 for the byte vocabulary (then the model needs vocab_size: 257)."
        )


def _check_workers(num_workers: int) -> None:
    if num_workers < 0:
        raise ValueError(f"num_workers={num_workers!r} must be 0 (load in the main process) or more.")


class DatasetHparams(Hparams, abc.ABC):
    """The base of the dataset configs; every one has a ``num_workers`` field (DataLoader worker processes).

    ``sample_fields`` and ``label_fields`` name the fields that decide the shape of a sample and the range of its
    labels, so that an error about a model and data that do not fit names the keys to change.
    """

    sample_fields: ClassVar[tuple[str, ...]] = ()
    label_fields: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Builds the loader of one split.

        Args:
            batch_size: Samples per batch.
            train: The training split (shuffled, augmented) or the evaluation split.
            seed: Seed of the shuffling order (and of augmentations drawn in workers).
        """

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """A synthetic dataset with this dataset's input shape and labels, for tests that must not read data."""
        raise NotImplementedError(f"{type(self).__name__} has no synthetic stand-in.")


@hparams
class SyntheticClassificationHparams(DatasetHparams):
    """Seeded, learnable Gaussian classification data of any shape (:class:`~composer.datasets.SyntheticClassificationDataset`).

    The training split draws its inputs with ``data_seed``, the evaluation split with ``data_seed + 1``; both share
    the labelling rule, so evaluation accuracy measures learning.

    Args:
        num_samples: Samples in the split. Default = 256.
        shape: Shape of one input. Default = [1, 32, 32].
        num_classes: Classes. Default = 10.
        data_seed: Seed of the inputs. Default = 0.
        label_seed: Seed of the labelling rule. Default = 0.
        num_workers: DataLoader worker processes. Default = 0.
    """

    num_samples: int = 256
    shape: list[int] = dataclasses.field(default_factory=lambda: [1, 32, 32])
    num_classes: int = 10
    data_seed: int = 0
    label_seed: int = 0
    num_workers: int = 0

    sample_fields: ClassVar[tuple[str, ...]] = ("shape",)
    label_fields: ClassVar[tuple[str, ...]] = ("num_classes",)

    def validate(self) -> None:
        """Checks the sizes."""
        _check_workers(self.num_workers)
        if self.num_samples < 1 or not self.shape or any(d < 1 for d in self.shape) or self.num_classes < 2:
            raise ValueError(
                f"num_samples={self.num_samples!r}, shape={self.shape!r} and num_classes={self.num_classes!r} must "
                "be positive (shape a non-empty list of positive ints, num_classes at least 2)."
            )

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the split."""
        from composer.datasets import SyntheticClassificationDataset

        dataset = SyntheticClassificationDataset(
            self.num_samples,
            tuple(self.shape),
            self.num_classes,
            seed=self.data_seed if train else self.data_seed + 1,
            label_seed=self.label_seed,
        )
        return DataSpec(split_dataloader(dataset, batch_size, train, seed, self.num_workers))

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """This dataset with ``num_samples`` samples."""
        return dataclasses.replace(self, num_samples=num_samples)


@hparams
class SyntheticTokensHparams(DatasetHparams):
    """Seeded random token sequences for language models (:class:`~composer.datasets.SyntheticTokenDataset`).

    Args:
        num_samples: Sequences in the split. Default = 256.
        seq_len: Padded length of every sequence. Default = 128.
        vocab_size: Vocabulary size, including the padding token 0. Default = 256.
        data_seed: Seed of the data (the evaluation split uses ``data_seed + 1``). Default = 0.
        num_workers: DataLoader worker processes. Default = 0.
        mlm_probability: Fraction of tokens masked for a masked language model, or null. Padding is never
            masked. Default = None.
        mask_token_id: The mask token, used with ``mlm_probability``. Default = 256.
    """

    num_samples: int = 256
    seq_len: int = 128
    vocab_size: int = 256
    data_seed: int = 0
    num_workers: int = 0
    mlm_probability: float | None = None
    mask_token_id: int = 256

    sample_fields: ClassVar[tuple[str, ...]] = ("seq_len", "vocab_size")
    label_fields: ClassVar[tuple[str, ...]] = ("vocab_size",)

    def validate(self) -> None:
        """Checks the sizes and the masking."""
        _check_workers(self.num_workers)
        _check_masking(self)
        if self.num_samples < 1 or self.seq_len < 1 or self.vocab_size < 2:
            raise ValueError(
                f"num_samples={self.num_samples!r} and seq_len={self.seq_len!r} must be positive and "
                f"vocab_size={self.vocab_size!r} at least 2."
            )

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the split."""
        from composer.datasets import SyntheticTokenDataset

        data_seed = self.data_seed if train else self.data_seed + 1
        dataset = SyntheticTokenDataset(self.num_samples, self.seq_len, self.vocab_size, seed=data_seed)
        collate_fn = masking_collator(self.mlm_probability, self.mask_token_id, train, seed, self.vocab_size)
        return DataSpec(split_dataloader(dataset, batch_size, train, seed, self.num_workers, collate_fn))

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """This dataset with ``num_samples`` samples."""
        return dataclasses.replace(self, num_samples=num_samples)


@hparams
class DigitsHparams(DatasetHparams):
    """scikit-learn's handwritten digits, upscaled from 8x8; no download (:func:`~composer.datasets.digits_datasets`).

    1,438 training and 359 evaluation images, 10 classes, nothing downloaded (needs ``opencomposer[data]``).

    Args:
        image_size: Side of the images; the 8x8 originals are upscaled bilinearly. Default = 32.
        split_seed: Seed of the stratified 80/20 train/eval split. Default = 0.
        num_workers: DataLoader worker processes. Default = 0.
    """

    image_size: int = 32
    split_seed: int = 0
    num_workers: int = 0

    sample_fields: ClassVar[tuple[str, ...]] = ("image_size",)

    def validate(self) -> None:
        """Checks the image size."""
        _check_workers(self.num_workers)
        if self.image_size < 8:
            raise ValueError(f"image_size={self.image_size!r} must be at least 8 (the originals are 8x8).")

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the split."""
        from composer.datasets import digits_datasets

        train_set, eval_set = digits_datasets(image_size=self.image_size, split_seed=self.split_seed)
        return DataSpec(split_dataloader(train_set if train else eval_set, batch_size, train, seed, self.num_workers))

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Gaussian images of the same shape, 10 classes."""
        return SyntheticClassificationHparams(num_samples=num_samples, shape=[1, self.image_size, self.image_size])


@hparams
class _CIFARHparams(DatasetHparams):
    """Fields shared by CIFAR-10 and CIFAR-100."""

    path: str
    num_workers: int = 0

    num_classes: ClassVar[int] = 10

    def validate(self) -> None:
        """Checks the worker count (the path is checked when the data is read)."""
        _check_workers(self.num_workers)

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the training split (augmented) or the test split."""
        from composer.datasets.cifar import cifar_dataloader

        return cifar_dataloader(
            self.path, batch_size, train=train, num_classes=self.num_classes, seed=seed, num_workers=self.num_workers
        )

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Gaussian 3x32x32 images with this dataset's class count."""
        return SyntheticClassificationHparams(num_samples=num_samples, shape=[3, 32, 32], num_classes=self.num_classes)


@hparams
class CIFAR10Hparams(_CIFARHparams):
    """CIFAR-10 from the standard archive at your path (:func:`~composer.datasets.cifar.cifar_dataloader`).

    Args:
        path: ``cifar-10-python.tar.gz``, the ``cifar-10-batches-py`` folder, or a folder holding either.
        num_workers: DataLoader worker processes. Default = 0.
    """

    num_classes: ClassVar[int] = 10


@hparams
class CIFAR100Hparams(_CIFARHparams):
    """CIFAR-100 (fine labels) from the standard archive at your path.

    Args:
        path: ``cifar-100-python.tar.gz``, the ``cifar-100-python`` folder, or a folder holding either.
        num_workers: DataLoader worker processes. Default = 0.
    """

    num_classes: ClassVar[int] = 100


@hparams
class ImageFolderHparams(DatasetHparams):
    """ImageNet-style folder of class sub-folders, via torchvision (:func:`~composer.datasets.image_folder.image_folder_dataloader`).

    Needs ``opencomposer[vision]``. Give the folder of the split: ``/data/imagenet/train`` for ``train_dataset``,
    ``/data/imagenet/val`` for ``eval_dataset``.

    Args:
        path: A folder of class sub-folders of images.
        crop_size: Side of the images the model sees. Default = 224.
        resize_size: Short side before the evaluation center crop. Default = 256.
        num_classes: Classes, used only by the synthetic stand-in. Default = 1000.
        num_workers: DataLoader worker processes. Default = 8.
    """

    path: str
    crop_size: int = 224
    resize_size: int = 256
    num_classes: int = 1000
    num_workers: int = 8

    sample_fields: ClassVar[tuple[str, ...]] = ("crop_size",)
    label_fields: ClassVar[tuple[str, ...]] = ("path",)

    def validate(self) -> None:
        """Checks the sizes."""
        _check_workers(self.num_workers)
        if self.crop_size < 1 or self.resize_size < self.crop_size:
            raise ValueError(
                f"crop_size={self.crop_size!r} must be positive and resize_size={self.resize_size!r} at least as "
                "large (evaluation resizes, then center-crops)."
            )

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the folder."""
        from composer.datasets.image_folder import image_folder_dataloader

        return image_folder_dataloader(
            self.path,
            batch_size,
            train=train,
            crop_size=self.crop_size,
            resize_size=self.resize_size,
            seed=seed,
            num_workers=self.num_workers,
        )

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Gaussian 3-channel images of ``crop_size``."""
        return SyntheticClassificationHparams(
            num_samples=num_samples, shape=[3, self.crop_size, self.crop_size], num_classes=self.num_classes
        )


@hparams
class _TextFields(DatasetHparams):
    """The fields and checks of the text datasets: bytes (or a tokenizer's tokens) cut into sequences of ``seq_len``."""

    seq_len: int = 128
    num_workers: int = 0
    mlm_probability: float | None = None
    mask_token_id: int = 256
    tokenizer: str | None = None

    sample_fields: ClassVar[tuple[str, ...]] = ("seq_len",)
    label_fields: ClassVar[tuple[str, ...]] = ("mlm_probability", "mask_token_id", "tokenizer")

    def validate(self) -> None:
        """Checks the sequence length and the masking."""
        _check_workers(self.num_workers)
        _check_masking(self)
        if self.seq_len < 1:
            raise ValueError(f"seq_len={self.seq_len!r} must be a positive number of bytes.")

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Random byte sequences of the same length (masked the same way)."""
        return SyntheticTokensHparams(
            num_samples=num_samples,
            seq_len=self.seq_len,
            vocab_size=256,
            mlm_probability=self.mlm_probability,
            mask_token_id=self.mask_token_id,
        )


@hparams
class PythonDocsHparams(_TextFields):
    """Built-in Python-documentation text, byte-level; no download (:mod:`composer.datasets.text`).

    A masked language model (``model: {huggingface: {task: masked_lm, ...}}``) needs ``mlm_probability``: the
    batches are then masked by BERT's 80/10/10 rule and scored only where masked
    (:class:`~composer.datasets.MaskingCollator`); without it the model sees its labels in its input and is refused.

    Args:
        seq_len: Bytes per sample. Default = 128.
        num_workers: DataLoader worker processes. Default = 0.
        mlm_probability: Fraction of bytes masked for a masked language model (BERT: 0.15), or null for a causal
            one. Default = None.
        mask_token_id: The mask token: the model's ``mask_token_id``, or 256 (one past the bytes; the model then
            needs ``vocab_size: 257``). Default = 256.
        tokenizer: A ``tokenizer.json`` or tokenizer folder (``composer tokenizer train`` writes one), whose own mask
            token then serves; null for bytes. Default = None.
        tuning: Use the tuning fold instead: train on ``'tuning_train'`` and evaluate on ``'tuning'``, disjoint from
            the validation split results are reported on (for hyperparameter searches). Default = False.
    """

    tuning: bool = False

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader of the ``train`` or ``validation`` split (masked when ``mlm_probability`` is set)."""
        from composer.datasets.text import python_docs_dataset, text_collator
        from composer.datasets.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(self.tokenizer)
        split = ("tuning_train" if train else "tuning") if self.tuning else ("train" if train else "validation")
        dataset = python_docs_dataset(split, self.seq_len, tokenizer)
        collate_fn = text_collator(tokenizer, self.mlm_probability, self.mask_token_id, train, seed)
        return DataSpec(split_dataloader(dataset, batch_size, train, seed, self.num_workers, collate_fn))


@hparams
class TextFilesHparams(_TextFields):
    """Your own text files, byte-level (:func:`~composer.datasets.text_file_dataloader`).

    Args:
        paths: The text files (give the validation files in ``eval_dataset``).
        seq_len: Bytes per sample. Default = 128.
        num_workers: DataLoader worker processes. Default = 0.
        mlm_probability: Fraction of bytes masked for a masked language model (BERT: 0.15), or null for a causal
            one. Default = None.
        mask_token_id: The mask token: the model's ``mask_token_id``, or 256 (one past the bytes; the model then
            needs ``vocab_size: 257``). Default = 256.
        tokenizer: A ``tokenizer.json`` or tokenizer folder (``composer tokenizer train`` writes one), whose own mask
            token then serves; null for bytes. Default = None.
    """

    paths: list[str] = dataclasses.field(kw_only=True)  # required: after the shared fields, which have defaults

    def validate(self) -> None:
        """Checks the sequence length, the masking and that files are named."""
        super().validate()
        if not self.paths:
            raise ValueError(f"paths={self.paths!r} must name files; give the text files to read.")

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Returns the loader over the files."""
        from pathlib import Path

        from composer.datasets import text_file_dataloader

        missing = [p for p in self.paths if not Path(p).expanduser().is_file()]
        if missing:
            raise FileNotFoundError(f"text files {missing} do not exist; paths must name readable text files.")
        paths = [Path(p).expanduser() for p in self.paths]
        loader = text_file_dataloader(
            paths,
            self.seq_len,
            batch_size,
            shuffle=train,
            seed=seed,
            num_workers=self.num_workers,
            mlm_probability=self.mlm_probability,
            mask_token_id=self.mask_token_id,
            tokenizer=self.tokenizer,
        )
        return DataSpec(loader)


@derive_fields(HFDataset)
class HFDatasetHparams(DatasetHparams):
    """Your own parquet, JSON lines, CSV or arrow files through Hugging Face ``datasets``, read offline (:class:`~composer.datasets.hf_dataset.HFDataset`).

    Text (``text_column``, with a ``tokenizer``) or images (``image_column`` and ``label_column``).
    """

    sample_fields: ClassVar[tuple[str, ...]] = ("seq_len", "image_column")
    label_fields: ClassVar[tuple[str, ...]] = ("label_column", "tokenizer")

    def validate(self) -> None:
        """The checks that need no data (the data is read by :meth:`initialize_object`)."""
        fields = ("text_column", "image_column", "label_column", "seq_len", "holdout", "mlm_probability", "num_workers")
        check_hf_arguments(*(getattr(self, name) for name in fields))

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Reads the split and returns its loader (the rest or the held-out part, with ``holdout``)."""
        data = HFDataset(**{field.name: getattr(self, field.name) for field in dataclasses.fields(self)})
        return DataSpec(data.dataloader(batch_size, train, seed, f"{'train' if train else 'eval'}_dataset.hf_dataset"))

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Random byte sequences of the same length, for text."""
        if getattr(self, "text_column", None) is None:
            return super().synthetic(num_samples)
        return SyntheticTokensHparams(num_samples=num_samples, seq_len=getattr(self, "seq_len"))  # noqa: B009


@derive_fields(StreamingShards)
class StreamingHparams(DatasetHparams):
    """LitData shards from a local folder or ``s3://``, streamed by each rank and worker (:class:`~composer.datasets.streaming.StreamingShards`)."""

    def initialize_object(self, batch_size: int, train: bool, seed: int = 0) -> DataSpec:
        """Checks the shards and returns the stream's loader (shuffled from ``seed`` for training)."""
        key = f"{'train' if train else 'eval'}_dataset.streaming.path"  # what an error while streaming names
        return DataSpec(self._shards().dataloader(batch_size, train, seed, key=key))

    def _shards(self) -> StreamingShards:
        return StreamingShards(**{field.name: getattr(self, field.name) for field in dataclasses.fields(self)})

    def synthetic(self, num_samples: int = 16) -> DatasetHparams:
        """Random data shaped like the first sample: token windows, or (input, label) pairs of two classes."""
        sample = self._shards().dataset(train=False)[0]
        if isinstance(sample, dict) and "input_ids" in sample:
            return SyntheticTokensHparams(num_samples=num_samples, seq_len=len(sample["input_ids"]))
        shape = list(getattr(sample[0], "shape", ()))
        return SyntheticClassificationHparams(num_samples=num_samples, shape=shape, num_classes=2)


DATASETS: dict[str, type[DatasetHparams]] = {
    "digits": DigitsHparams,
    "synthetic_classification": SyntheticClassificationHparams,
    "synthetic_tokens": SyntheticTokensHparams,
    "cifar10": CIFAR10Hparams,
    "cifar100": CIFAR100Hparams,
    "image_folder": ImageFolderHparams,
    "python_docs": PythonDocsHparams,
    "text_files": TextFilesHparams,
    "hf_dataset": HFDatasetHparams,
    "streaming": StreamingHparams,
}
"""The dataset registry: each name a recipe's ``train_dataset:`` and ``eval_dataset:`` may use, mapped to its config
class."""
