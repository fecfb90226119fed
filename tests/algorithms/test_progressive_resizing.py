"""ProgressiveResizing: the size follows its schedule per batch, full size in the finetune fraction, exact resizes."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import ProgressiveResizing, ProgressiveResizingHparams
from composer.algorithms.progressive_resizing import resize_inputs, resize_scale
from composer.core import Callback, Event, Logger, LoggerDestination, State
from composer.models import ComposerClassifier


def _reference_scale(elapsed: float, initial: float, finetune: float) -> float:
    if elapsed >= 1 - finetune:
        return 1.0
    return initial + (1 - initial) * elapsed / (1 - finetune)


def _reference_size(length: int, scale: float) -> int:
    """The seed's ``H * scale_factor``, rounded down as the original did: ``int(H * scale)`` (at least 1 pixel)."""
    return max(1, int(length * scale))


@pytest.mark.parametrize(("initial", "finetune"), [(0.5, 0.2), (0.25, 0.0), (0.8, 0.5), (0.5, 1.0)])
def test_scale_schedule(initial: float, finetune: float) -> None:
    for elapsed in (0.0, 0.1, 0.3, 0.5, 0.7, 0.79, 0.8, 0.95, 1.0):
        expected = _reference_scale(elapsed, initial, finetune)
        assert resize_scale(elapsed, initial, finetune) == pytest.approx(expected)
        if elapsed >= 1 - finetune:
            assert resize_scale(elapsed, initial, finetune) == 1.0  # full size throughout the finetune fraction


def test_resize_is_bilinear_interpolation() -> None:
    X = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 10, (2,))
    X_small, y_out = resize_inputs(X, y, scale_factor=0.5, mode="resize")
    expected = F.interpolate(X, scale_factor=0.5, mode="bilinear", align_corners=False)
    assert torch.equal(X_small, expected)
    assert y_out is y
    X_down, _ = resize_inputs(X, y, scale_factor=0.7, mode="resize")  # 22.4 -> 22 pixels
    assert torch.equal(X_down, F.interpolate(X, size=(22, 22), mode="bilinear", align_corners=False))
    X_odd, _ = resize_inputs(X, y, scale_factor=0.55, mode="resize")  # 17.6 -> 17 pixels: odd sizes are kept
    assert torch.equal(X_odd, F.interpolate(X, size=(17, 17), mode="bilinear", align_corners=False))


@pytest.mark.parametrize("mode", ["resize", "crop"])
@pytest.mark.parametrize("scale", [0.05, 0.3, 0.55, 0.6, 0.77, 0.99, 1.0])
def test_output_shape_is_the_seeds_formula_rounded_down(mode: str, scale: float) -> None:
    # Seed 001: X_sized has shape (N, C, H * scale_factor, W * scale_factor); the original rounded down with int().
    X = torch.rand(2, 3, 31, 20, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 4, (2, 31, 20), generator=torch.Generator().manual_seed(1))
    X_sized, y_sized = resize_inputs(X, y, scale, mode=mode, resize_targets=True, generator=torch.Generator())
    expected = (_reference_size(31, scale), _reference_size(20, scale))
    assert tuple(X_sized.shape) == (2, 3, *expected)
    assert tuple(y_sized.shape) == (2, *expected)
    assert (X_sized.shape[-2], X_sized.shape[-1]) == (int(31 * scale), int(20 * scale))


def test_size_multiple_rounds_down_to_a_multiple() -> None:
    X, y = torch.rand(2, 3, 32, 32), torch.zeros(2)
    for scale in (0.5, 0.55, 0.6, 0.77, 0.99):
        for multiple in (2, 8):
            X_sized, _ = resize_inputs(X, y, scale, size_multiple=multiple)
            side = int(32 * scale) // multiple * multiple
            assert X_sized.shape[-2:] == (side, side)
    assert resize_inputs(X, y, 0.05, size_multiple=2)[0].shape[-1] == 2  # never below the multiple
    assert resize_inputs(torch.rand(1, 1, 15, 15), y, 1.0, size_multiple=2)[0].shape[-1] == 15  # full size kept
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=rf"size_multiple={bad!r} must be a positive integer"):
            resize_inputs(X, y, 0.5, size_multiple=bad)  # type: ignore[arg-type]


def test_crop_is_a_window_of_the_input() -> None:
    X = torch.arange(2 * 3 * 16 * 16, dtype=torch.float32).reshape(2, 3, 16, 16)
    corners = set()
    for seed in range(10):
        X_crop, _ = resize_inputs(X, torch.zeros(2), 0.5, mode="crop", generator=torch.Generator().manual_seed(seed))
        assert X_crop.shape == (2, 3, 8, 8)
        top, left = int(X_crop[0, 0, 0, 0]) // 16, int(X_crop[0, 0, 0, 0]) % 16
        assert torch.equal(X_crop, X[..., top : top + 8, left : left + 8])
        corners.add((top, left))
    assert len(corners) > 1  # the position is random
    first, _ = resize_inputs(X, torch.zeros(2), 0.5, mode="crop", generator=torch.Generator().manual_seed(3))
    again, _ = resize_inputs(X, torch.zeros(2), 0.5, mode="crop", generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, again)  # and reproducible from the generator


def test_resize_targets() -> None:
    X = torch.rand(2, 3, 16, 16)
    dense = torch.rand(2, 4, 16, 16)
    _, dense_small = resize_inputs(X, dense, 0.5, mode="resize", resize_targets=True)
    assert torch.equal(dense_small, F.interpolate(dense, size=(8, 8), mode="bilinear", align_corners=False))
    mask = torch.randint(0, 5, (2, 16, 16))
    _, mask_small = resize_inputs(X, mask, 0.5, mode="resize", resize_targets=True)
    assert mask_small.dtype == mask.dtype and mask_small.shape == (2, 8, 8)
    assert torch.equal(mask_small, mask[:, ::2, ::2])  # nearest at an exact factor of 2 picks every other pixel
    X_crop, mask_crop = resize_inputs(
        X, mask, 0.5, mode="crop", resize_targets=True, generator=torch.Generator().manual_seed(0)
    )
    for top in range(9):
        for left in range(9):
            if torch.equal(X_crop, X[..., top : top + 8, left : left + 8]):
                assert torch.equal(mask_crop, mask[..., top : top + 8, left : left + 8])


def test_full_scale_is_a_no_op() -> None:
    X, y = torch.rand(2, 3, 15, 15), torch.zeros(2)
    for mode in ("resize", "crop"):
        X_out, y_out = resize_inputs(X, y, 1.0, mode=mode, resize_targets=True)
        assert X_out is X and y_out is y


class _Shapes(Callback):
    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def before_forward(self, state: State, logger: Logger) -> None:
        self.shapes.append(tuple(state.batch[0].shape))


@pytest.mark.parametrize("mode", ["resize", "crop"])
def test_trainer_size_grows_per_batch_then_full(mode: str) -> None:
    epochs, batches_per_epoch, side = 2, 5, 32
    initial, finetune = 0.5, 0.3
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(20, 3, side, side, generator=g), torch.randint(0, 2, (20,), generator=g))
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 2, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(2, 2)
    )
    shapes = _Shapes()
    trainer = Trainer(
        model=ComposerClassifier(net, num_classes=2),
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration=f"{epochs}ep",
        algorithms=[ProgressiveResizing(mode=mode, initial_scale=initial, finetune_fraction=finetune)],
        callbacks=[shapes],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()
    total = epochs * batches_per_epoch
    expected = [
        (4, 3, s, s)
        for s in (_reference_size(side, _reference_scale(b / total, initial, finetune)) for b in range(total))
    ]
    assert shapes.shapes == expected
    first_epoch = [s[-1] for s in shapes.shapes[:batches_per_epoch]]
    assert len(set(first_epoch)) > 1, "the size must grow within an epoch, not only at epoch boundaries"
    assert shapes.shapes[-3:] == [(4, 3, side, side)] * 3  # the last 30%: full size


class _Record(LoggerDestination):
    def __init__(self) -> None:
        self.data: dict[str, object] = {}

    def log_metric(self, timestamp: object, log_level: object, data: dict[str, object]) -> None:
        self.data.update(data)


def test_algorithm_events_and_logging() -> None:
    algorithm = ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.0)
    state = State(model=torch.nn.Linear(2, 2), max_duration="4ba", steps_per_epoch=4)
    assert [e for e in Event if algorithm.match(e, state)] == [Event.AFTER_DATALOADER]
    state.timer.on_batch_complete(4)  # a quarter of the run: scale 0.5 + 0.5 * 0.25
    state.batch = (torch.rand(4, 3, 32, 32), torch.zeros(4))
    record = _Record()
    algorithm.apply(Event.AFTER_DATALOADER, state, Logger(state, [record]))
    assert record.data == {
        "progressive_resizing/height": 20,
        "progressive_resizing/width": 20,
        "progressive_resizing/scale_factor": 0.625,
    }


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mode": "nearest"}, "mode"),
        ({"initial_scale": 1.5}, "initial_scale"),
        ({"initial_scale": -0.5}, "initial_scale"),
        ({"finetune_fraction": 1.1}, "finetune_fraction"),
        ({"finetune_fraction": -0.1}, "finetune_fraction"),
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ProgressiveResizing(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=name):
        ProgressiveResizingHparams(**kwargs)  # type: ignore[arg-type]


def test_resize_inputs_bad_arguments() -> None:
    X, y = torch.rand(2, 3, 8, 8), torch.zeros(2)
    with pytest.raises(ValueError, match="scale_factor"):
        resize_inputs(X, y, 1.5)
    with pytest.raises(ValueError, match="mode"):
        resize_inputs(X, y, 0.5, mode="area")
    with pytest.raises(ValueError, match="X"):
        resize_inputs(torch.rand(2, 8), y, 0.5)
    with pytest.raises(ValueError, match="resize_targets"):
        resize_inputs(X, y, 0.5, resize_targets=True)


def test_hparams_round_trip() -> None:
    config = ProgressiveResizingHparams.from_dict({"mode": "crop", "initial_scale": 0.25})
    algorithm = config.initialize_object()
    assert (algorithm.mode, algorithm.initial_scale, algorithm.finetune_fraction, algorithm.resize_targets) == (
        "crop",
        0.25,
        0.2,
        False,
    )


@pytest.mark.parametrize(("size_multiple", "side"), [(1, 17), (2, 16)])
def test_algorithm_resizes_segmentation_targets_with_the_inputs(size_multiple: int, side: int) -> None:
    # A tenth of the run: scale 0.5 + 0.5 * 0.1 = 0.55, so 32 pixels -> int(17.6) = 17, or 16 with even sizes.
    algorithm = ProgressiveResizing(
        mode="resize", initial_scale=0.5, finetune_fraction=0.0, resize_targets=True, size_multiple=size_multiple
    )
    state = State(model=torch.nn.Linear(2, 2), max_duration="10ba", steps_per_epoch=10)
    state.timer.on_batch_complete(4)
    X = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    mask = torch.randint(0, 5, (4, 32, 32), generator=torch.Generator().manual_seed(1))
    state.batch = (X, mask)
    algorithm.apply(Event.AFTER_DATALOADER, state, Logger(state))
    X_out, mask_out = state.batch
    assert torch.equal(X_out, F.interpolate(X, size=(side, side), mode="bilinear", align_corners=False))
    # Integer class masks are resized with nearest neighbour, so they stay valid class indices.
    nearest = F.interpolate(mask.unsqueeze(1).float(), size=(side, side), mode="nearest").squeeze(1).long()
    assert mask_out.dtype == mask.dtype and torch.equal(mask_out, nearest)


def test_hparams_carry_size_multiple_and_scale_buckets_after_the_seed_fields() -> None:
    names = [f.name for f in dataclasses.fields(ProgressiveResizingHparams)]  # type: ignore[arg-type]
    assert names == ["mode", "initial_scale", "finetune_fraction", "resize_targets", "size_multiple", "scale_buckets"]
    assert ProgressiveResizingHparams().size_multiple == 1 and ProgressiveResizingHparams().scale_buckets is None
    assert ProgressiveResizingHparams.from_dict({"size_multiple": 2}).initialize_object().size_multiple == 2
    assert ProgressiveResizingHparams.from_dict({"scale_buckets": 3}).initialize_object().scale_buckets == 3
    with pytest.raises(ValueError, match="size_multiple"):
        ProgressiveResizingHparams(size_multiple=0)
    for bad in (1, -2, 2.5, True):
        with pytest.raises(ValueError, match=r"scale_buckets=.* must be None, 0 .* or an int of at least 2"):
            ProgressiveResizing(scale_buckets=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("buckets", [2, 3, 4, 7])
@pytest.mark.parametrize(("initial", "finetune"), [(0.5, 0.2), (0.25, 0.0)])
def test_scale_buckets_round_the_linear_scale_down_to_k_even_steps(buckets: int, initial: float, finetune: float):
    levels = [initial + (1 - initial) * j / (buckets - 1) for j in range(buckets)]
    seen = set()
    for step in range(1001):
        elapsed = step / 1000
        linear = _reference_scale(elapsed, initial, finetune)
        expected = max(level for level in levels if level <= linear + 1e-9)  # the nearest step at or below it
        scale = resize_scale(elapsed, initial, finetune, buckets=buckets)
        assert scale == pytest.approx(expected), elapsed
        seen.add(round(scale, 9))
    assert len(seen) == buckets and max(seen) == 1.0  # every step taken, full size at the end
    assert resize_scale(0.3, initial, finetune) == pytest.approx(_reference_scale(0.3, initial, finetune))


def _run_sides(model: torch.nn.Module, **kwargs) -> list[int]:
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(32, 3, 32, 32, generator=g), torch.randint(0, 2, (32,), generator=g))
    shapes = _Shapes()
    trainer = Trainer(model=model, train_dataloader=DataLoader(data, batch_size=4), max_duration="1ep",
                      algorithms=[ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.25, **kwargs)],
                      callbacks=[shapes], progress_bar=False, seed=0)  # fmt: skip
    trainer.fit()
    trainer.close()
    return [shape[-1] for shape in shapes.shapes]


def test_four_sizes_by_default_when_the_model_is_compiled_and_the_linear_schedule_when_not() -> None:
    def net() -> ComposerClassifier:
        layers = [torch.nn.Conv2d(3, 2, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
        return ComposerClassifier(torch.nn.Sequential(*layers, torch.nn.Linear(2, 2)), num_classes=2)

    linear = [_reference_size(32, _reference_scale(b / 8, 0.5, 0.25)) for b in range(8)]
    assert _run_sides(net()) == linear == [16, 18, 21, 24, 26, 29, 32, 32]
    compiled = net()
    compiled.compile(backend="eager")  # as Trainer(compile_config=...) compiles it: in place
    assert _run_sides(compiled) == [16, 16, 21, 21, 26, 26, 32, 32]  # scales 0.5, 2/3, 5/6, 1: 4 sizes
    assert _run_sides(net(), scale_buckets=4) == [16, 16, 21, 21, 26, 26, 32, 32]  # eagerly as a compiled run
    assert _run_sides(compiled, scale_buckets=0) == linear  # 0: linear, compiled or not
