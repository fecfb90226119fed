"""Normalize and ToNormalizedTensor: (x - mean) / std on uint8 images, per batch or per sample, and their errors."""

from __future__ import annotations

import pytest
import torch

from composer.datasets import Normalize, ToNormalizedTensor


def test_matches_the_formula_per_channel():
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (4, 3, 5, 5), generator=g, dtype=torch.uint8)
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    out, targets = Normalize(mean, std)((images, torch.arange(4)))
    for c in range(3):
        assert torch.allclose(out[:, c], (images[:, c].float() - mean[c]) / std[c])
    assert out.dtype == torch.float32 and targets.tolist() == [0, 1, 2, 3]
    assert torch.allclose(Normalize(mean, std)(images), out)  # a bare tensor batch


def test_errors():
    with pytest.raises(ValueError, match="one mean and one std per channel"):
        Normalize((1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match="positive"):
        Normalize((1.0,), (0.0,))
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        Normalize((0.0,) * 3, (1.0,) * 3)(torch.zeros(2, 1, 4, 4))


def test_to_normalized_tensor_matches_the_formula_for_tensors_and_pil_images():
    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (3, 5, 4), generator=g, dtype=torch.uint8)
    # Default: pixel / 255, like torchvision's ToTensor.
    torch.testing.assert_close(ToNormalizedTensor()(image), image.double().div(255).float())
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    out = ToNormalizedTensor(mean, std)(image)
    for c in range(3):
        torch.testing.assert_close(out[c], (image[c].float() - mean[c]) / std[c])
    assert out.dtype == torch.float32
    # Any shape with scalar statistics; a PIL image becomes (C, H, W) ((1, H, W) for mode 'L').
    torch.testing.assert_close(
        ToNormalizedTensor(128, 32)(torch.tensor([0, 128, 255], dtype=torch.uint8)), torch.tensor([-4.0, 0.0, 127 / 32])
    )
    Image = pytest.importorskip("PIL.Image")
    pil = Image.fromarray(image.permute(1, 2, 0).numpy())
    assert torch.equal(ToNormalizedTensor(mean, std)(pil), out)
    gray = Image.fromarray(image[0].numpy())
    assert torch.equal(ToNormalizedTensor()(gray), ToNormalizedTensor()(image[:1]))


def test_to_normalized_tensor_batches_equal_samples():
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (6, 3, 4, 4), generator=g, dtype=torch.uint8)
    for transform in (ToNormalizedTensor(), ToNormalizedTensor((1.0, 2.0, 3.0), (3.0, 5.0, 7.0))):
        batch = transform.convert_batch(images)
        assert torch.equal(batch, torch.stack([transform(image) for image in images]))


def test_to_normalized_tensor_errors():
    with pytest.raises(ValueError, match="uint8"):
        ToNormalizedTensor()(torch.zeros(1, 2, 2))  # already a float: converting twice is a bug
    with pytest.raises(ValueError, match=r"3 channels and expects images \(3, H, W\)"):
        ToNormalizedTensor((0.0,) * 3, (1.0,) * 3)(torch.zeros(1, 4, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="positive"):
        ToNormalizedTensor(std=0)
    with pytest.raises(ValueError, match="as many means as stds"):
        ToNormalizedTensor((1.0, 2.0), (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="one number per channel"):
        ToNormalizedTensor(mean="gray")  # type: ignore[arg-type]
