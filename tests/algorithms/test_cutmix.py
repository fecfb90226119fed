"""cutmix_batch against the formula for a given box, the box's size and clipping, and CutMix in the Trainer."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from composer.algorithms import CutMix, CutMixHparams
from composer.functional import cutmix_batch, gen_cutmix_bbox
from composer.trainer import Trainer
from tests.algorithms.test_mixup import NUM_CLASSES, LossInputsRecorder, label_image_model, label_images


def test_cutmix_batch_matches_formula_for_given_box_and_indices():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, 8, 10, generator=g)
    y = torch.randint(0, 4, (5,), generator=g)
    indices = torch.tensor([4, 2, 0, 1, 3])
    top, bottom, left, right = 2, 6, 1, 4
    x_mix, y_mix, perm = cutmix_batch(x, y, n_classes=4, bbox=(top, bottom, left, right), indices=indices)

    expected = x.clone()
    expected[:, :, top:bottom, left:right] = x[indices][:, :, top:bottom, left:right]
    own = 1 - (4 * 3) / (8 * 10)  # the area ratio of the box actually pasted
    one_hot = F.one_hot(y, 4).float()
    assert torch.equal(x_mix, expected)
    torch.testing.assert_close(y_mix, own * one_hot + (1 - own) * one_hot[indices])
    assert torch.equal(perm, indices)
    assert not torch.equal(x, x_mix)  # a new tensor; the input is untouched


def test_box_size_from_lambda_inside_the_image():
    for seed in range(20):
        top, bottom, left, right = gen_cutmix_bbox(64, 48, 0.75, torch.Generator().manual_seed(seed))
        assert 0 <= top <= bottom <= 64 and 0 <= left <= right <= 48
        assert bottom - top <= int(64 * math.sqrt(0.25)) and right - left <= int(48 * math.sqrt(0.25))
    sides = {
        (b - t, r - left)
        for seed in range(50)
        for t, b, left, r in [gen_cutmix_bbox(64, 48, 0.75, torch.Generator().manual_seed(seed))]
    }
    assert (32, 24) in sides  # unclipped boxes have exactly the sides int(H * sqrt(1 - lam)), int(W * sqrt(1 - lam))
    assert any(h < 32 or w < 24 for h, w in sides)  # and boxes near the border are clipped


def test_lambda_one_pastes_nothing():
    x, y = torch.randn(4, 3, 6, 6), torch.tensor([0, 1, 2, 3])
    x_mix, y_mix, _ = cutmix_batch(x, y, 4, interpolation_lambda=1.0)
    assert torch.equal(x_mix, x)
    torch.testing.assert_close(y_mix, F.one_hot(y, 4).float())


@pytest.mark.parametrize("seed", range(5))
def test_targets_follow_the_clipped_area(seed: int):
    images, labels = label_images(8, seed=seed).tensors
    x_mix, y_mix, _ = cutmix_batch(
        images, labels, NUM_CLASSES, alpha=1.0, generator=torch.Generator().manual_seed(seed)
    )
    torch.testing.assert_close(x_mix.mean(dim=(2, 3)), y_mix)


def test_bad_inputs_raise():
    x, y = torch.randn(4, 3, 6, 6), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        cutmix_batch(torch.randn(4, 6), y, 3)
    with pytest.raises(ValueError, match="bbox"):
        cutmix_batch(x, y, 3, bbox=(0, 7, 0, 3))
    with pytest.raises(ValueError, match="bbox"):
        cutmix_batch(x, y, 3, bbox=(3, 1, 0, 3))
    with pytest.raises(ValueError, match="interpolation_lambda"):
        cutmix_batch(x, y, 3, interpolation_lambda=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        cutmix_batch(x, y, 3, alpha=-1.0)
    with pytest.raises(ValueError, match="one target per image"):
        cutmix_batch(x, y[:2], 3)
    with pytest.raises(ValueError, match="alpha"):
        CutMix(alpha=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        CutMixHparams(alpha=-1.0)


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_trainer_pastes_boxes_and_mixes_targets_by_area(grad_accum: int):
    recorder = LossInputsRecorder()
    trainer = Trainer(
        model=label_image_model(),
        train_dataloader=DataLoader(label_images(24), batch_size=8),
        max_duration="3ba",
        algorithms=[CutMix(alpha=1.0)],
        callbacks=[recorder],
        grad_accum=grad_accum,
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    assert len(recorder.seen) == 3 * grad_accum
    for inputs, targets, outputs in recorder.seen:
        assert targets.shape == outputs.shape
        torch.testing.assert_close(inputs.mean(dim=(2, 3)), targets)
    assert any(bool((t.max(dim=1).values < 0.99).any()) for _, t, _ in recorder.seen)
