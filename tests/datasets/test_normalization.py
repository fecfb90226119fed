"""Normalize: per-channel (x - mean) / std on uint8 or float images, targets untouched, and its errors."""

from __future__ import annotations

import pytest
import torch

from composer.datasets import Normalize


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
