"""SWA: the final weights are the mean of the epoch-end snapshots, the LR anneal follows the cosine, BN is recomputed."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import SWA, SWAHparams
from composer.algorithms.swa import swa_annealed_lr, update_bn_statistics, update_swa_weights
from composer.core import Callback, Logger, State
from composer.models import ComposerClassifier
from composer.optim import linear_scheduler
from tests.common import SimpleModel, make_dataloader

BATCHES_PER_EPOCH = 4


class WeightsAtEpochEnd(Callback):
    """The weights after the last batch of every epoch (what SWA averages at EPOCH_END), recorded at BATCH_END."""

    def __init__(self) -> None:
        self.snapshots: list[list[torch.Tensor]] = []

    def batch_end(self, state: State, logger: Logger) -> None:
        if int(state.timer.batch_in_epoch) == BATCHES_PER_EPOCH:
            self.snapshots.append([p.detach().clone() for p in state.model.parameters()])


class LearningRates(Callback):
    """The learning rate each batch trains with (callbacks run after algorithms at BATCH_START)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def batch_start(self, state: State, logger: Logger) -> None:
        self.lrs.append(state.optimizers[0].param_groups[0]["lr"])


def _bn_model() -> ComposerClassifier:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return ComposerClassifier(net, num_classes=3)


def _fit(algorithms, model=None, epochs=4, lr=0.1, **kwargs) -> Trainer:
    model = model if model is not None else SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=4 * BATCHES_PER_EPOCH, batch_size=4),
        max_duration=f"{epochs}ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9),
        algorithms=algorithms,
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    return trainer


def test_update_swa_weights_is_the_running_mean():
    layer = torch.nn.Linear(2, 2)
    snapshots = [torch.randn(2, 2, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    layer.weight.data.copy_(snapshots[0])
    mean = update_swa_weights(None, layer, 0)  # the first snapshot starts the mean
    for n, w in enumerate(snapshots[1:], start=1):
        layer.weight.data.copy_(w)
        mean = update_swa_weights(mean, layer, n)
    torch.testing.assert_close(mean["weight"], torch.stack(snapshots).mean(dim=0))
    assert not mean["weight"].requires_grad


@pytest.mark.parametrize(("swa_start", "num_snapshots"), [(0.5, 3), (0.6, 2), (0.0, 4), (1.0, 1)])
def test_averaged_weights_equal_the_mean_of_epoch_end_snapshots(swa_start: float, num_snapshots: int):
    # 4 epochs: epoch k ends at k/4 of the run; every epoch end at or past swa_start joins the mean.
    swa, recorder = SWA(swa_start=swa_start), WeightsAtEpochEnd()
    trainer = _fit([swa], callbacks=[recorder])
    assert swa.num_averaged == num_snapshots
    assert len(recorder.snapshots) == 4
    averaged = recorder.snapshots[-num_snapshots:]
    for i, p in enumerate(trainer.state.model.parameters()):
        torch.testing.assert_close(p.detach(), torch.stack([snapshot[i] for snapshot in averaged]).mean(dim=0))


def _expected_lr(batch: int, lr0: float, swa_lr: float, swa_start: float, anneal_epochs: int, epochs: int = 4) -> float:
    """The LR batch ``batch`` trains with: lr0 before swa_start, then the cosine from lr0 to swa_lr (by hand)."""
    total = epochs * BATCHES_PER_EPOCH
    start = math.ceil(swa_start * total)  # the first batch at or past swa_start
    if batch < start:
        return lr0
    by_epochs = 1.0 if anneal_epochs == 0 else (batch - start) / BATCHES_PER_EPOCH / anneal_epochs
    by_end = (batch - start) / (total - start)
    progress = min(1.0, max(by_epochs, by_end))
    return swa_lr + (lr0 - swa_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize("anneal_epochs", [0, 1, 10])
def test_lr_anneals_along_the_cosine_to_swa_lr(anneal_epochs: int):
    lrs = LearningRates()
    _fit([SWA(swa_start=0.5, anneal_epochs=anneal_epochs, swa_lr=0.01)], callbacks=[lrs])
    expected = [_expected_lr(b, 0.1, 0.01, 0.5, anneal_epochs) for b in range(16)]
    assert lrs.lrs == pytest.approx(expected)
    if anneal_epochs <= 1:
        assert lrs.lrs[-1] == pytest.approx(0.01)  # reached, and it stays there


def test_anneal_starts_from_the_scheduled_lr_and_overrides_the_scheduler():
    lrs = LearningRates()
    schedule = functools.partial(linear_scheduler, start_factor=1.0, end_factor=0.0)
    _fit([SWA(swa_start=0.5, anneal_epochs=1, swa_lr=0.02)], callbacks=[lrs], schedulers=schedule)
    scheduled = [0.1 * (1 - b / 16) for b in range(16)]
    assert lrs.lrs[:8] == pytest.approx(scheduled[:8])
    assert lrs.lrs[8:] == pytest.approx([_expected_lr(b, scheduled[8], 0.02, 0.5, 1) for b in range(8, 16)])


def test_swa_lr_none_leaves_the_schedule_alone():
    schedule = functools.partial(linear_scheduler, start_factor=1.0, end_factor=0.0)
    with_swa, without = LearningRates(), LearningRates()
    _fit([SWA(swa_start=0.25)], callbacks=[with_swa], schedulers=schedule)
    _fit([], callbacks=[without], schedulers=schedule)
    assert with_swa.lrs == without.lrs


def test_batch_norm_statistics_are_recomputed_for_the_averaged_weights():
    swa = SWA(swa_start=0.5)
    trainer = _fit([swa], model=_bn_model())
    model = trainer.state.model
    linear, bn = model.module[0], model.module[1]
    loader = make_dataloader(num_samples=4 * BATCHES_PER_EPOCH, batch_size=4)
    with torch.no_grad():
        hidden = [linear(x) for x, _ in loader]  # (4, 6) pre-BN activations under the averaged weights
    torch.testing.assert_close(bn.running_mean, torch.stack([h.mean(0) for h in hidden]).mean(0))
    torch.testing.assert_close(bn.running_var, torch.stack([h.var(0, unbiased=True) for h in hidden]).mean(0))
    assert int(bn.num_batches_tracked) == BATCHES_PER_EPOCH
    assert bn.momentum == 0.1 and model.training


def test_stopping_early_still_swaps_in_the_average():
    class StopAfterTwoEpochs(Callback):
        def batch_end(self, state: State, logger: Logger) -> None:
            if int(state.timer.batch) == 2 * BATCHES_PER_EPOCH:
                state.stop_training("test")

    swa, recorder = SWA(swa_start=0.25), WeightsAtEpochEnd()
    trainer = _fit([swa], callbacks=[recorder, StopAfterTwoEpochs()])
    assert int(trainer.state.timer.epoch) == 2 and swa.num_averaged == 2
    for i, p in enumerate(trainer.state.model.parameters()):
        torch.testing.assert_close(p.detach(), (recorder.snapshots[0][i] + recorder.snapshots[1][i]) / 2)


def test_update_bn_statistics_restores_mode_and_momentum_and_skips_models_without_bn():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2, momentum=0.3)).eval()
    update_bn_statistics(net, [torch.randn(4, 2, generator=torch.Generator().manual_seed(0))])
    assert not net.training and net[1].momentum == 0.3
    with pytest.raises(ValueError, match="no batches"):
        update_bn_statistics(net, [])

    def never():
        raise AssertionError("a model without batch norm must not read the data")
        yield

    update_bn_statistics(torch.nn.Linear(2, 2), never())


def test_swa_annealed_lr_endpoints():
    assert swa_annealed_lr(0.5, 0.1, 0.0) == 0.5
    assert swa_annealed_lr(0.5, 0.1, 1.0) == pytest.approx(0.1)
    assert swa_annealed_lr(0.5, 0.1, 7.0) == pytest.approx(0.1)  # clipped


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"swa_start": -0.1}, "swa_start"),
        ({"swa_start": 1.5}, "swa_start"),
        ({"anneal_epochs": -1}, "anneal_epochs"),
        ({"swa_lr": 0.0}, "swa_lr"),
        ({"swa_lr": -0.1}, "swa_lr"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SWA(**kwargs)
    with pytest.raises(ValueError, match=name):
        SWAHparams(**kwargs)


def test_update_bn_statistics_passes_batches_as_given():
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(2)

        def forward(self, batch):
            seen.append(type(batch))
            return self.bn(batch["x"])

    data = DataLoader(
        TensorDataset(torch.randn(4, 2)), batch_size=2, collate_fn=lambda rows: {"x": torch.stack([r[0] for r in rows])}
    )
    update_bn_statistics(Spy(), iter(data))
    assert seen == [dict, dict]
