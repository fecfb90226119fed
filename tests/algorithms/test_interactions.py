"""Algorithms used together: ordering between them and the batches they hand each other."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import ProgressiveResizing, SelectiveBackprop
from composer.core import Callback, Logger, State
from composer.models import ComposerModel


class _ShapeRecordingClassifier(ComposerModel):
    """A tiny conv classifier that records (input shape, grad enabled) at every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(4, 3),
        )
        self.calls: list[tuple[tuple[int, ...], bool]] = []

    def forward(self, batch: Any) -> torch.Tensor:
        X, _ = batch
        self.calls.append((tuple(X.shape), torch.is_grad_enabled()))
        return self.net(X)

    def loss(self, outputs: Any, batch: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        return F.cross_entropy(outputs, batch[1], *args, **kwargs)


class _BatchShapes(Callback):
    def __init__(self) -> None:
        self.shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def before_forward(self, state: State, logger: Logger) -> None:
        X, y = state.batch
        self.shapes.append((tuple(X.shape), tuple(y.shape)))


def test_selective_backprop_with_progressive_resizing() -> None:
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 3, 32, 32, generator=g), torch.randint(0, 3, (32,), generator=g))
    model = _ShapeRecordingClassifier()
    shapes = _BatchShapes()
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="4ba",
        # Listed after ProgressiveResizing, SelectiveBackprop still runs first: it declares run_first.
        algorithms=[
            ProgressiveResizing(mode="resize", initial_scale=0.5, finetune_fraction=0.0),
            SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0),
        ],
        callbacks=[shapes],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()

    traces = trainer.engine.traces
    assert traces["SelectiveBackprop/AFTER_DATALOADER"].order == 0
    assert traces["ProgressiveResizing/AFTER_DATALOADER"].order == 1

    # Scale after b of 4 batches: 0.5 + 0.5 * b / 4 -> sides 16, 20, 24, 28 of 32.
    sides = [16, 20, 24, 28]
    # SB selects 4 of 8 samples on the full-size batch (its pass sees 32 * 0.5 = 16 pixels, whatever the resize),
    # then ProgressiveResizing shrinks the 4 kept samples; the training pass sees that batch, with gradients.
    expected_calls = []
    for side in sides:
        expected_calls += [((8, 3, 16, 16), False), ((4, 3, side, side), True)]
    assert model.calls == expected_calls
    assert shapes.shapes == [((4, 3, side, side), (4,)) for side in sides]
    assert int(trainer.state.timer.sample) == 32  # the timer counts the loader's samples
