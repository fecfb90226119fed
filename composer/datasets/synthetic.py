"""Synthetic datasets: seeded, in memory, and learnable, for tests, examples and benchmarks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.utils.data import Dataset

from composer.datasets.image_dataset import ImageTensorDataset
from composer.datasets.normalization import ToNormalizedTensor

__all__ = ["SyntheticClassificationDataset", "SyntheticTokenDataset"]


def _check_positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


# The inputs are stored as 8-bit pixels: z ~ N(0, 1) becomes clamp(round(128 + 32 z), 0, 255), and the default
# transform (pixel - 128) / 32 gives back z rounded to a multiple of 1/32 and clipped to [-4, 3.97]. Powers of two,
# so the float values are exact.
_PIXEL_MEAN = 128.0
_PIXEL_STD = 32.0


class SyntheticClassificationDataset(ImageTensorDataset):
    """Gaussian inputs labelled by a fixed random linear map, so that a model can learn the labels.

    Each input is drawn from a standard normal; its label is the argmax of a random linear map of it (``W x`` with
    ``W`` of shape ``(num_classes, prod(shape))``), so the classes are linearly separable: logistic regression or a
    small MLP reaches high accuracy, which makes a training run's progress visible in tests and benchmarks. All data
    is drawn up front from :class:`torch.Generator` objects seeded with ``seed`` (the inputs) and ``label_seed`` (the
    labelling map): the same seeds give the same data, whatever the global random state. Draw a training and an
    evaluation set with different ``seed`` and the same ``label_seed``.

    Like the real image datasets, it stores 8-bit pixels (``images``: ``128 + 32 x``, rounded and clipped) and
    converts each sample to float in its ``transform``, so per-sample image augmentations (AugMix, RandAugment) can
    be added to it for an image ``shape`` such as ``(3, 32, 32)``.

    Args:
        num_samples: Number of samples.
        shape: Shape of one input, for example ``(256,)`` or ``(3, 32, 32)``; an int means ``(shape,)``.
        num_classes: Number of classes (at least 2).
        seed: Seed of the inputs.
        label_seed: Seed of the labelling map; datasets with the same ``label_seed``, shape and ``num_classes``
            share one labelling rule.

    Attributes:
        images (torch.Tensor): The stored inputs, shape ``(num_samples, *shape)``, uint8.
        inputs (torch.Tensor): What the default transform makes of them, shape ``(num_samples, *shape)``, float32.
        targets (torch.Tensor): All labels, shape ``(num_samples,)``, int64 in ``[0, num_classes)`` (also ``labels``).
        transform (Callable | None): The per-sample transform.

    Example:
        >>> dataset = SyntheticClassificationDataset(num_samples=100, shape=(3, 8, 8), num_classes=10, seed=0)
        >>> x, y = dataset[0]
        >>> len(dataset), x.shape, x.dtype, y.dtype
        (100, torch.Size([3, 8, 8]), torch.float32, torch.int64)
        >>> torch.equal(x, dataset.inputs[0]) and dataset.images.dtype == torch.uint8
        True
        >>> torch.equal(dataset.inputs, SyntheticClassificationDataset(100, (3, 8, 8), 10, seed=0).inputs)
        True
        >>> eval_set = SyntheticClassificationDataset(20, (3, 8, 8), 10, seed=1)  # new inputs, same labelling rule
        >>> torch.equal(eval_set.inputs[0], dataset.inputs[0])
        False
    """

    def __init__(
        self, num_samples: int, shape: int | Sequence[int], num_classes: int, seed: int = 0, label_seed: int = 0
    ) -> None:
        _check_positive("num_samples", num_samples)
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        for dim in dims:
            _check_positive(f"shape {dims!r}: every dimension", dim)
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an int of at least 2, got {num_classes!r}.")
        self.num_samples = num_samples
        self.shape = dims
        self.num_classes = num_classes
        self.seed = seed
        self.label_seed = label_seed

        num_features = math.prod(dims)
        # The labelling map has its own seed, so that a training set and an evaluation set drawn with different
        # seeds share one labelling rule (and the evaluation accuracy means something).
        weight = torch.randn(num_classes, num_features, generator=torch.Generator().manual_seed(label_seed))
        normal = torch.randn(num_samples, *dims, generator=torch.Generator().manual_seed(seed))
        images = normal.mul_(_PIXEL_STD).add_(_PIXEL_MEAN).round_().clamp_(0, 255).to(torch.uint8)
        transform = ToNormalizedTensor(mean=_PIXEL_MEAN, std=_PIXEL_STD)
        # The same elementwise operations as the per-sample transform, so dataset[i][0] equals inputs[i] exactly.
        self.inputs = transform(images)
        targets = (self.inputs.reshape(num_samples, num_features) @ weight.T).argmax(dim=1)
        super().__init__(images, targets, transform)

    @property
    def targets(self) -> torch.Tensor:
        """The labels, ``(num_samples,)`` int64 (the name torchvision datasets use; same tensor as ``labels``)."""
        return self.labels

    def __repr__(self) -> str:
        return (
            f"SyntheticClassificationDataset(num_samples={self.num_samples}, shape={self.shape}, "
            f"num_classes={self.num_classes}, seed={self.seed}, label_seed={self.label_seed})"
        )


class SyntheticTokenDataset(Dataset[dict[str, torch.Tensor]]):
    """Random token sequences of random lengths, padded to ``seq_len``, as Hugging Face-style dicts.

    Each sample is ``{'input_ids', 'attention_mask', 'labels'}``, all int64 tensors of shape ``(seq_len,)``. A
    sample's length is uniform in ``[1, seq_len]``; its tokens are uniform in ``[1, vocab_size)``, and padding uses
    token 0 (``pad_token_id``) with attention mask 0 and label -100 (ignored by the loss). Labels equal the input
    ids (a causal language model shifts them itself). Use it to exercise token counting and language-model code
    without a tokenizer; the data is drawn up front from a :class:`torch.Generator` seeded with ``seed``.

    Args:
        num_samples: Number of sequences.
        seq_len: Padded length of every sequence.
        vocab_size: Size of the vocabulary, including the padding token 0 (at least 2).
        seed: Seed of the data.

    Attributes:
        num_tokens (int): Non-padding tokens in the whole dataset.
        deterministic_samples (bool): True: a sample depends on its index alone (a resumed epoch skips without
            reading, :mod:`composer.trainer.skipped_batches`).

    Example:
        >>> dataset = SyntheticTokenDataset(num_samples=4, seq_len=8, vocab_size=100, seed=0)
        >>> sorted(dataset[0])
        ['attention_mask', 'input_ids', 'labels']
        >>> dataset[0]["input_ids"].shape
        torch.Size([8])
        >>> dataset.num_tokens == sum(int(dataset[i]["attention_mask"].sum()) for i in range(4))
        True
    """

    pad_token_id = 0
    deterministic_samples = True

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int = 0) -> None:
        _check_positive("num_samples", num_samples)
        _check_positive("seq_len", seq_len)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int of at least 2 (token 0 is padding), got {vocab_size!r}.")
        self.num_samples = num_samples
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.seed = seed

        generator = torch.Generator().manual_seed(seed)
        lengths = torch.randint(1, seq_len + 1, (num_samples, 1), generator=generator)
        tokens = torch.randint(1, vocab_size, (num_samples, seq_len), generator=generator)
        self.attention_mask = (torch.arange(seq_len).unsqueeze(0) < lengths).long()  # (num_samples, seq_len)
        self.input_ids = tokens.masked_fill(self.attention_mask == 0, self.pad_token_id)
        self.labels = tokens.masked_fill(self.attention_mask == 0, -100)
        self.num_tokens = int(self.attention_mask.sum())

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[index],
            "attention_mask": self.attention_mask[index],
            "labels": self.labels[index],
        }
