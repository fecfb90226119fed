"""cutout's square: its size, its placement (clipped at the borders), shared by the batch; CutOut in the Trainer."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import CutOut, CutOutHparams
from composer.core import Callback
from composer.functional import cutout
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def square_mask(height: int, width: int, cy: int, cx: int, length: int) -> torch.Tensor:
    """The reference hole: rows [cy - L//2, cy - L//2 + L) x cols [cx - L//2, cx - L//2 + L), cut to the image."""
    rows = torch.arange(height)[:, None]
    cols = torch.arange(width)[None, :]
    top, left = cy - length // 2, cx - length // 2
    return (rows >= top) & (rows < top + length) & (cols >= left) & (cols < left + length)


def all_square_masks(height: int, width: int, length: int) -> list[torch.Tensor]:
    return [square_mask(height, width, cy, cx, length) for cy in range(height) for cx in range(width)]


@pytest.mark.parametrize("length", [1, 3, 4])
def test_one_hole_is_a_clipped_square_centred_in_the_image(length: int):
    height, width = 6, 7
    candidates = all_square_masks(height, width, length)
    sizes = set()
    for seed in range(40):
        x = torch.rand(3, 2, height, width) + 1.0  # no zeros before cutout
        out = cutout(x, n_holes=1, length=length, generator=torch.Generator().manual_seed(seed))
        holes = out == 0
        mask = holes[0, 0]
        assert (holes == mask).all()  # the same square in every image and channel
        assert any(torch.equal(mask, c) for c in candidates)  # a square of side `length`, clipped to the image
        assert torch.equal(out[:, :, ~mask], x[:, :, ~mask])  # nothing else changed
        sizes.add(int(mask.sum()))
    assert length * length in sizes  # squares away from the border are whole
    if length > 1:
        assert min(sizes) < length * length  # and squares at the border are clipped


def test_several_holes_are_a_union_of_squares():
    height = width = 8
    out = cutout(torch.ones(2, 1, height, width), n_holes=3, length=2, generator=torch.Generator().manual_seed(0))
    mask = out[0, 0] == 0
    covered = torch.zeros_like(mask)
    for candidate in all_square_masks(height, width, 2):
        if (candidate & ~mask).sum() == 0:
            covered |= candidate
    assert torch.equal(covered, mask)  # every zero lies in a whole (or clipped) square inside the zero region
    assert 0 < int(mask.sum()) <= 3 * 4


def test_single_image_and_input_untouched():
    x = torch.ones(3, 5, 5)
    out = cutout(x, n_holes=1, length=2, generator=torch.Generator().manual_seed(1))
    assert out.shape == x.shape and (out == 0).any() and (x == 1).all()


def test_zero_holes_or_zero_length_is_identity():
    x = torch.randn(2, 3, 4, 4)
    assert torch.equal(cutout(x, 0, 3), x)
    assert torch.equal(cutout(x, 2, 0), x)


def test_seeded_is_reproducible():
    x = torch.randn(2, 3, 16, 16)
    a = cutout(x, 2, 5, generator=torch.Generator().manual_seed(4))
    b = cutout(x, 2, 5, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        cutout(torch.ones(4, 4), 1, 2)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        cutout(torch.ones(1, 1, 1, 4, 4), 1, 2)
    with pytest.raises(ValueError, match="n_holes"):
        cutout(torch.ones(1, 4, 4), -1, 2)
    with pytest.raises(ValueError, match="length"):
        cutout(torch.ones(1, 4, 4), 1, 2.5)
    with pytest.raises(ValueError, match="length"):
        CutOut(n_holes=1, length=-3)
    with pytest.raises(ValueError, match="n_holes"):
        CutOutHparams(n_holes=-1, length=4)


class InputRecorder(Callback):
    def __init__(self) -> None:
        self.inputs: list[torch.Tensor] = []

    def before_forward(self, state, logger) -> None:
        self.inputs.append(state.batch_pair[0].clone())


def test_trainer_sees_holes():
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(8, 3, 8, 8, generator=g) + 1.0, torch.randint(0, 4, (8,), generator=g))
    recorder = InputRecorder()
    trainer = Trainer(
        model=cifar_resnet(depth=8, num_classes=4),
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="2ba",
        algorithms=[CutOut(n_holes=1, length=3)],
        callbacks=[recorder],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    candidates = all_square_masks(8, 8, 3)
    assert len(recorder.inputs) == 2
    for inputs in recorder.inputs:
        mask = inputs[0, 0] == 0
        assert ((inputs == 0) == mask).all()
        assert any(torch.equal(mask, c) for c in candidates)
