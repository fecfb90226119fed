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
    images, labels = train_set.images, train_set.labels
    assert images.shape == (1438, 1, 32, 32) and images.dtype == torch.uint8 and labels.dtype == torch.int64
    assert set(labels.tolist()) == set(range(10)) and set(eval_set.labels.tolist()) == set(range(10))
    # A sample is its 8-bit image over 255, through the dataset's transform.
    x, y = train_set[5]
    assert x.dtype == torch.float32 and torch.equal(x, images[5].float() / 255) and y == labels[5]
    # The same images as the 8x8 originals, upscaled bilinearly, in the same split and order: each side is rounded
    # to 8 bits, and bilinear weights are convex, so they agree to within one step of 1/255.
    small_train, _ = digits_datasets(image_size=8, split_seed=0)
    expected = F.interpolate(small_train.images.float() / 255, size=(32, 32), mode="bilinear", align_corners=False)
    assert (images.float() / 255 - expected).abs().max() <= 1 / 255 + 1e-6
    assert torch.equal(labels, small_train.labels)


def test_dataloaders_take_an_image_size():
    train_dl, eval_dl = digits_dataloaders(batch_size=16, eval_batch_size=64, image_size=16)
    x, y = next(iter(train_dl))
    assert x.shape == (16, 1, 16, 16) and y.shape == (16,)
    assert next(iter(eval_dl))[0].shape == (64, 1, 16, 16)
    with pytest.raises(ValueError, match="image_size"):
        digits_datasets(image_size=4)
