"""SelectiveBackprop: the window/interrupt logic, exact counts, high-loss samples favoured, errors that say what to do."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import SelectiveBackprop, SelectiveBackpropHparams
from composer.algorithms.selective_backprop import select_using_loss, should_selective_backprop
from composer.core import Callback, Event, Logger, State
from composer.models import ComposerClassifier, ComposerModel


def _identity_losses(outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """With ``model = nn.Identity()`` and X of shape (N,), each sample's loss is its input value."""
    del y
    return outputs


# (current_duration, batch_idx, start, end, interrupt) -> expected, worked out by hand from the docstring's rule.
WINDOW_TABLE = [
    ((0.49, 0, 0.5, 0.9, 0), False),  # before the window
    ((0.50, 0, 0.5, 0.9, 0), True),  # the start is inside
    ((0.89, 7, 0.5, 0.9, 0), True),
    ((0.90, 0, 0.5, 0.9, 0), False),  # the end is outside
    ((0.60, 0, 0.5, 0.9, 2), True),  # interrupt=2: batches 1, 3, 5, ... are full batches
    ((0.60, 1, 0.5, 0.9, 2), False),
    ((0.60, 2, 0.5, 0.9, 2), True),
    ((0.60, 1, 0.5, 0.9, 3), True),  # interrupt=3: batches 2, 5, 8, ... are full batches
    ((0.60, 2, 0.5, 0.9, 3), False),
    ((0.60, 5, 0.5, 0.9, 3), False),
    ((0.60, 6, 0.5, 0.9, 3), True),
    ((0.60, 0, 0.5, 0.9, 1), False),  # interrupt=1: never
    ((0.00, 0, 0.0, 1.0, 0), True),
    ((1.00, 0, 0.0, 1.0, 0), False),
]


@pytest.mark.parametrize(("args", "expected"), WINDOW_TABLE)
def test_window_and_interrupt(args: tuple[float, int, float, float, int], expected: bool) -> None:
    assert should_selective_backprop(*args) is expected


@pytest.mark.parametrize(
    ("batch", "keep", "count"),
    [(10, 0.5, 5), (10, 0.25, 3), (7, 0.5, 4), (128, 0.5, 64), (10, 0.01, 1), (3, 0.9, 3), (9, 1 / 3, 3)],
)
def test_kept_count_is_exact(batch: int, keep: float, count: int) -> None:
    X, y = torch.randn(batch), torch.arange(batch)
    gen = torch.Generator().manual_seed(0)
    X_kept, y_kept = select_using_loss(X, y, torch.nn.Identity(), keep, generator=gen, loss_fn=_identity_losses)
    assert len(X_kept) == len(y_kept) == count
    assert len(set(y_kept.tolist())) == count  # without replacement
    assert torch.equal(X_kept, X[y_kept])  # pairs stay together
    assert torch.equal(y_kept, y_kept.sort().values)  # in the batch's order


def test_high_loss_samples_dominate() -> None:
    batch, keep, trials = 20, 0.5, 200
    losses = torch.randperm(batch, generator=torch.Generator().manual_seed(1)).float()
    y = torch.arange(batch)
    counts = torch.zeros(batch)
    kept_means, dropped_means = [], []
    for trial in range(trials):
        gen = torch.Generator().manual_seed(trial)
        kept, kept_y = select_using_loss(losses, y, torch.nn.Identity(), keep, generator=gen, loss_fn=_identity_losses)
        dropped = torch.ones(batch, dtype=torch.bool)
        dropped[kept_y] = False
        kept_means.append(kept.mean().item())
        dropped_means.append(losses[dropped].mean().item())
        counts[kept_y] += 1
    # Selection is random, so a single draw may keep easy samples; over seeded trials the hard ones dominate.
    # With weights proportional to the percentile (keep=0.5) the expected means are about 11.9 kept vs 7.1 dropped.
    wins = sum(k > d for k, d in zip(kept_means, dropped_means))
    assert wins >= 0.9 * trials
    assert sum(kept_means) / trials > sum(dropped_means) / trials + 3.0
    frequency_by_rank = counts[losses.argsort()] / trials  # the smallest loss first
    # Selection probability increases with the loss: the top quarter is kept far more often than the bottom one
    # (about 0.73 against 0.2 here), and each quarter more often than the one below it.
    quarters = [frequency_by_rank[i : i + 5].mean().item() for i in range(0, batch, 5)]
    assert quarters == sorted(quarters)
    assert quarters[-1] > 3 * quarters[0]


def test_reproducible_from_generator() -> None:
    X, y = torch.randn(16), torch.arange(16)
    runs = [
        select_using_loss(
            X, y, torch.nn.Identity(), 0.5, generator=torch.Generator().manual_seed(7), loss_fn=_identity_losses
        )[1]
        for _ in range(2)
    ]
    assert torch.equal(runs[0], runs[1])


class _Recorder(ComposerModel):
    """A tiny image classifier that records the input shape and grad mode of every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.BatchNorm2d(4),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(4, 3),
        )
        self.calls: list[tuple[tuple[int, ...], bool, bool]] = []

    def forward(self, batch: Any) -> torch.Tensor:
        X, _ = batch
        self.calls.append((tuple(X.shape), torch.is_grad_enabled(), self.training))
        return self.net(X)

    def loss(self, outputs: Any, batch: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        return F.cross_entropy(outputs, batch[1], *args, **kwargs)


def test_selection_pass_is_downsampled_and_without_grad() -> None:
    model = _Recorder()
    X, y = torch.randn(8, 3, 32, 32), torch.randint(0, 3, (8,))
    X_kept, _ = select_using_loss(X, y, model, keep=0.5, scale_factor=0.5, generator=torch.Generator().manual_seed(0))
    assert model.calls == [((8, 3, 16, 16), False, True)]  # no grad, and the model stays in training mode
    assert X_kept.shape == (4, 3, 32, 32)  # the kept samples are full size
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    select_using_loss(X, y, model, keep=0.5, scale_factor=0.5, generator=torch.Generator().manual_seed(0))
    assert model.calls[-1][2] is False  # still in eval mode


def test_composer_model_loss_matches_explicit_loss_fn() -> None:
    torch.manual_seed(0)
    model = ComposerClassifier(torch.nn.Linear(6, 4), num_classes=4)
    X, y = torch.randn(12, 6), torch.randint(0, 4, (12,))
    by_model = select_using_loss(X, y, model, 0.5, generator=torch.Generator().manual_seed(3))
    by_fn = select_using_loss(
        X,
        y,
        model,
        0.5,
        generator=torch.Generator().manual_seed(3),
        loss_fn=lambda out, t: F.cross_entropy(out, t, reduction="none"),
    )
    assert torch.equal(by_model[0], by_fn[0]) and torch.equal(by_model[1], by_fn[1])


class _SelectionLog(Callback):
    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.samples: list[int] = []

    def before_forward(self, state: State, logger: Logger) -> None:
        self.sizes.append(len(state.batch[0]))

    def batch_end(self, state: State, logger: Logger) -> None:
        self.samples.append(int(state.timer.sample))


def _fit_sb(**sb_kwargs: Any) -> tuple[_SelectionLog, list[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(32, 3, 8, 8, generator=g), torch.randint(0, 3, (32,), generator=g))
    log = _SelectionLog()
    model = _Recorder()
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="2ep",
        algorithms=[SelectiveBackprop(**sb_kwargs)],
        callbacks=[log],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()
    return log, [p.detach().clone() for p in model.parameters()]


def test_trainer_alternates_and_counts_loader_samples() -> None:
    log, _ = _fit_sb(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=2)
    assert log.sizes == [4, 8, 4, 8] * 2
    assert log.samples == [8 * (i + 1) for i in range(8)]  # the timer counts what the loader produced
    log, _ = _fit_sb(start=0.5, end=0.75, keep=0.25, scale_factor=1.0, interrupt=0)
    assert log.sizes == [8, 8, 8, 8, 2, 2, 8, 8]  # batches 4 and 5 of 8 lie in [0.5, 0.75)


def test_trainer_reproducible() -> None:
    _, first = _fit_sb(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0)
    _, second = _fit_sb(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_selection_pass_runs_under_the_run_precision() -> None:
    model = _Recorder()
    dtypes: list[torch.dtype] = []
    model.net[-1].register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    state = State(model=model, max_duration="2ep", steps_per_epoch=2, precision="bf16")
    state.batch = (torch.randn(6, 3, 8, 8), torch.randint(0, 3, (6,)))
    sb = SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0)
    sb.apply(Event.AFTER_DATALOADER, state, Logger(state))
    assert dtypes == [torch.bfloat16]
    assert state.batch[0].shape == (3, 3, 8, 8) and state.batch[0].dtype == torch.float32


def test_algorithm_declares_run_first_and_events() -> None:
    sb = SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0)
    assert SelectiveBackprop.run_first
    state = State(model=torch.nn.Linear(2, 2), max_duration="2ep", steps_per_epoch=2)
    assert [e for e in Event if sb.match(e, state)] == [Event.AFTER_DATALOADER]
    no_op = SelectiveBackprop(start=0.0, end=1.0, keep=1.0, scale_factor=0.5, interrupt=0)
    assert not no_op.match(Event.AFTER_DATALOADER, state)


ARGS = {"start": 0.5, "end": 0.9, "keep": 0.5, "scale_factor": 0.5, "interrupt": 2}


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"start": -0.1}, "start"),
        ({"start": 1.5}, "start"),
        ({"end": 1.2}, "end"),
        ({"start": 0.8, "end": 0.2}, "start"),
        ({"keep": 0.0}, "keep"),
        ({"keep": 1.5}, "keep"),
        ({"scale_factor": 0.0}, "scale_factor"),
        ({"scale_factor": 2.0}, "scale_factor"),
        ({"interrupt": -1}, "interrupt"),
    ],
)
def test_bad_arguments_raise(change: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SelectiveBackprop(**{**ARGS, **change})
    with pytest.raises(ValueError, match=name):
        SelectiveBackpropHparams(**{**ARGS, **change})


def test_function_errors() -> None:
    X, y = torch.randn(4, 5), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match="keep"):
        select_using_loss(X, y, torch.nn.Identity(), keep=0.0, loss_fn=_identity_losses)
    with pytest.raises(ValueError, match="scale_factor"):  # a (N, D) input cannot be downsampled
        select_using_loss(X, y, torch.nn.Linear(5, 3), keep=0.5, scale_factor=0.5, loss_fn=_identity_losses)
    with pytest.raises(TypeError, match="loss_fn"):  # a plain module has no loss
        select_using_loss(X, y, torch.nn.Linear(5, 3), keep=0.5)
    no_reduction = ComposerClassifier(torch.nn.Linear(5, 3), loss_fn=lambda out, t: F.cross_entropy(out, t))
    with pytest.raises(TypeError, match="reduction"):
        select_using_loss(X, y, no_reduction, keep=0.5)
    with pytest.raises(ValueError, match="per sample"):  # a loss that ignored reduction='none'
        select_using_loss(X, y, torch.nn.Linear(5, 3), keep=0.5, loss_fn=lambda out, t: F.cross_entropy(out, t))


def test_hparams_has_no_defaults_and_round_trips() -> None:
    with pytest.raises(ValueError, match="missing"):
        SelectiveBackpropHparams.from_dict({"start": 0.5})
    algorithm = SelectiveBackpropHparams.from_dict(ARGS).initialize_object()
    assert {k: getattr(algorithm, k) for k in ARGS} == ARGS
    with pytest.raises(TypeError):
        SelectiveBackprop()  # type: ignore[call-arg]  # all five are required
