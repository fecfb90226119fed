"""colout's output size (floor of (1 - p) * size), the rows and columns it keeps, and ColOut in the Trainer."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from composer.algorithms import ColOut, ColOutHparams
from composer.algorithms.colout import ColOutTransform
from composer.core import Callback
from composer.functional import colout
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def expected_size(size: int, p: float) -> int:
    return max(1, math.floor(round((1 - p) * size, 9)))


def positions(height: int, width: int, batch: int = 2, channels: int = 3) -> torch.Tensor:
    """Images whose pixel (i, j) holds i * width + j, so the output reveals which rows and columns it kept."""
    grid = torch.arange(height * width, dtype=torch.float32).reshape(height, width)
    return grid.expand(batch, channels, height, width).clone()


@pytest.mark.parametrize(
    ("height", "width", "p_row", "p_col"),
    [(32, 32, 0.15, 0.15), (10, 10, 0.3, 0.9), (7, 9, 0.0, 0.5), (8, 8, 0.99, 0.0), (5, 12, 0.5, 0.25)],
)
def test_output_size_is_floor_of_kept_fraction(height: int, width: int, p_row: float, p_col: float):
    out = colout(positions(height, width), p_row, p_col, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 3, expected_size(height, p_row), expected_size(width, p_col))


def test_kept_rows_and_columns_are_a_sorted_subset_shared_by_the_batch():
    height, width = 9, 11
    x = positions(height, width)
    out = colout(x, 0.3, 0.4, generator=torch.Generator().manual_seed(1))
    rows = (out[0, 0, :, 0] // width).long()
    cols = (out[0, 0, 0, :] % width).long()
    assert bool((rows[1:] > rows[:-1]).all()) and bool((cols[1:] > cols[:-1]).all())  # distinct, in order
    assert torch.equal(out, x[:, :, rows][:, :, :, cols])  # every image and channel lost the same rows and columns


def test_zero_fractions_keep_the_image():
    x = torch.randn(2, 3, 5, 6)
    assert torch.equal(colout(x, 0.0, 0.0), x)


def test_single_tensor_image_and_seeding():
    x = positions(12, 12, batch=1)[0]
    a = colout(x, 0.25, 0.5, generator=torch.Generator().manual_seed(2))
    b = colout(x, 0.25, 0.5, generator=torch.Generator().manual_seed(2))
    assert a.shape == (3, 9, 6) and torch.equal(a, b)


@pytest.mark.parametrize("mode", ["1", "L", "LA", "I", "F", "RGB", "RGBA"])
def test_pil_image_keeps_its_mode(mode: str):
    image_module = pytest.importorskip("PIL.Image")
    pixels = np.random.default_rng(0).integers(0, 256, size=(10, 8, 3), dtype=np.uint8)
    image = image_module.fromarray(pixels).convert(mode)
    out = colout(image, p_row=0.3, p_col=0.25, generator=torch.Generator().manual_seed(3))
    assert out.mode == mode and out.size == (6, 7)  # PIL sizes are (width, height)


def test_pil_image_pixels_match_kept_rows_and_columns():
    image_module = pytest.importorskip("PIL.Image")
    grid = np.arange(10 * 8, dtype=np.int32).reshape(10, 8)
    out = np.asarray(colout(image_module.fromarray(grid), 0.3, 0.25, generator=torch.Generator().manual_seed(4)))
    rows, cols = out[:, 0] // 8, out[0, :] % 8
    assert (np.diff(rows) > 0).all() and (np.diff(cols) > 0).all()
    assert np.array_equal(out, grid[np.ix_(rows, cols)])


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="p_row"):
        colout(torch.ones(1, 4, 4), p_row=1.0, p_col=0.1)
    with pytest.raises(ValueError, match="p_col"):
        colout(torch.ones(1, 4, 4), p_row=0.1, p_col=-0.1)
    with pytest.raises(ValueError, match=r"\(C, H, W\)"):
        colout(torch.ones(4, 4), 0.1, 0.1)
    with pytest.raises(ValueError, match=r"\(C, H, W\)"):
        colout(torch.ones(1, 1, 1, 4, 4), 0.1, 0.1)
    with pytest.raises(TypeError, match="PIL image"):
        colout(np.ones((4, 4)), 0.1, 0.1)
    with pytest.raises(ValueError, match="p_row"):
        ColOut(p_row=1.5)
    with pytest.raises(ValueError, match="p_col"):
        ColOutHparams(p_col=1.0)


def test_unsupported_pil_mode_raises():
    image_module = pytest.importorskip("PIL.Image")
    with pytest.raises(ValueError, match="mode 'P'.*convert"):
        colout(image_module.new("P", (4, 4)), 0.25, 0.25)


class InputRecorder(Callback):
    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def before_forward(self, state, logger) -> None:
        self.shapes.append(tuple(state.batch_pair[0].shape))


def test_trainer_batch_mode_shrinks_the_inputs():
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g))
    recorder = InputRecorder()
    trainer = Trainer(
        model=cifar_resnet(depth=8, num_classes=4),
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="2ba",
        algorithms=[ColOut(p_row=0.25, p_col=0.5, batch=True)],
        callbacks=[recorder],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    assert recorder.shapes == [(4, 3, 6, 4), (4, 3, 6, 4)]


class TransformedImages(Dataset):
    """A torchvision-style dataset: ``transform`` is applied to each image."""

    def __init__(self, num_samples: int = 8) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(num_samples, 3, 8, 8, generator=g)
        self.labels = torch.randint(0, 4, (num_samples,), generator=g)
        self.transform = None

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        return (self.transform(image) if self.transform is not None else image), self.labels[index]


def test_trainer_sample_mode_wraps_the_dataset_transform_once():
    dataset = TransformedImages()
    dataset.transform = lambda image: image * 2  # an existing transform keeps running, before ColOut
    recorder = InputRecorder()
    trainer = Trainer(
        model=cifar_resnet(depth=8, num_classes=4),
        train_dataloader=DataLoader(dataset, batch_size=4),
        max_duration="2ba",
        algorithms=[ColOut(p_row=0.25, p_col=0.25, batch=False)],
        callbacks=[recorder],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    trainer.fit(duration="1ba")  # FIT_START again: the transform must not be wrapped twice
    assert recorder.shapes == [(4, 3, 6, 6)] * 3
    assert isinstance(dataset.transform, ColOutTransform)
    assert not isinstance(dataset.transform.transform, ColOutTransform)
    image, _ = dataset[0]
    assert image.shape == (3, 6, 6)
    assert all(bool(torch.isin(row, dataset.images[0] * 2).all()) for row in image[0])


def test_sample_mode_needs_a_dataset_transform():
    data = TensorDataset(torch.randn(8, 3, 8, 8), torch.randint(0, 4, (8,)))
    trainer = Trainer(
        model=cifar_resnet(depth=8, num_classes=4),
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="1ba",
        algorithms=[ColOut(batch=False)],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    with pytest.raises(ValueError, match="transform"):
        trainer.fit()


def test_transform_pickles_for_dataloader_workers():
    transform = pickle.loads(pickle.dumps(ColOutTransform(0.5, 0.5)))
    assert transform(torch.ones(3, 8, 8)).shape == (3, 4, 4)
