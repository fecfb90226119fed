"""The built-in digits task's data: 32x32 upscaled digits with the right shapes, labels, split and values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from composer.datasets import digits_dataloaders, digits_datasets

pytest.importorskip("sklearn")


def test_upscaled_digits_shapes_labels_and_split():
    train_set, eval_set = digits_datasets(image_size=32, split_seed=0)
    assert len(train_set) + len(eval_set) == 1797 and len(eval_set) == 359
    images, labels = train_set.tensors
    assert images.shape == (1438, 1, 32, 32) and images.dtype == torch.float32 and labels.dtype == torch.int64
    assert images.min() >= 0.0 and images.max() <= 1.0
    assert set(labels.tolist()) == set(range(10)) and set(eval_set.tensors[1].tolist()) == set(range(10))
    # The same images as the 8x8 originals, upscaled bilinearly, in the same split and order.
    small_train, _ = digits_datasets(image_size=8, split_seed=0)
    expected = F.interpolate(small_train.tensors[0], size=(32, 32), mode="bilinear", align_corners=False)
    assert torch.allclose(images, expected) and torch.equal(labels, small_train.tensors[1])


def test_dataloaders_take_an_image_size():
    train_dl, eval_dl = digits_dataloaders(batch_size=16, eval_batch_size=64, image_size=16)
    x, y = next(iter(train_dl))
    assert x.shape == (16, 1, 16, 16) and y.shape == (16,)
    assert next(iter(eval_dl))[0].shape == (64, 1, 16, 16)
    with pytest.raises(ValueError, match="image_size"):
        digits_datasets(image_size=4)
