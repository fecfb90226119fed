"""ScaleSchedule: half the ratio trains half the steps through the whole schedule, and never scales twice."""

from __future__ import annotations

import collections
import io
import math
import warnings

import pytest
import torch
from torch.optim import lr_scheduler

from composer import Trainer
from composer.algorithms import ScaleSchedule, ScaleScheduleHparams
from composer.algorithms.scale_schedule import scale_scheduler
from composer.core import Callback, Logger, State
from composer.optim import cosine_annealing_scheduler
from tests.common import SimpleModel, make_dataloader


class LearningRates(Callback):
    """The learning rate each batch trains with, and a checkpoint taken after the first epoch."""

    def __init__(self) -> None:
        self.lrs: list[float] = []
        self.checkpoint: bytes | None = None

    def batch_start(self, state: State, logger: Logger) -> None:
        self.lrs.append(state.optimizers[0].param_groups[0]["lr"])

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        if self.checkpoint is None:
            buffer = io.BytesIO()
            torch.save(state.state_dict(), buffer)
            self.checkpoint = buffer.getvalue()


def _trainer(ratio: float | None, schedule: str, model=None, callbacks=(), **kwargs) -> Trainer:
    """4 epochs of 4 batches (16 steps unscaled), SGD at lr 1.0, with a cosine schedule over the whole run."""
    torch.manual_seed(0)
    model = model if model is not None else SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    schedulers = (
        cosine_annealing_scheduler if schedule == "composer" else lr_scheduler.CosineAnnealingLR(optimizer, T_max=16)
    )
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration="4ep",
        optimizers=optimizer,
        schedulers=schedulers,
        algorithms=[ScaleSchedule(ratio)] if ratio is not None else [],
        callbacks=list(callbacks),
        progress_bar=False,
        seed=0,
        **kwargs,
    )


@pytest.mark.parametrize("schedule", ["composer", "torch"])
def test_half_ratio_halves_the_steps_and_ends_the_schedule(schedule: str):
    scaled, full = LearningRates(), LearningRates()
    trainer = _trainer(0.5, schedule, callbacks=[scaled])
    trainer.fit()
    _trainer(None, schedule, callbacks=[full]).fit()
    assert int(trainer.state.timer.batch) == 8 and len(full.lrs) == 16
    # Step k of the scaled run trains at the LR of step 2k of the full run: the same curve, twice as fast.
    assert scaled.lrs == pytest.approx(full.lrs[::2])
    assert scaled.lrs == pytest.approx([0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(8)])
    # After the last step the schedule stands at its final value.
    assert trainer.state.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_a_second_fit_does_not_scale_again():
    trainer = _trainer(0.5, "torch")
    trainer.fit()
    scheduler = trainer.state.schedulers[0]
    assert scheduler.T_max == 8
    trainer.fit(duration="1ep")
    assert scheduler.T_max == 8
    assert trainer.state.scale_schedule_ratio == 0.5


@pytest.mark.parametrize("schedule", ["composer", "torch"])
def test_resuming_from_a_checkpoint_does_not_scale_again(schedule: str):
    whole = LearningRates()
    uninterrupted = _trainer(0.5, schedule, callbacks=[whole])
    uninterrupted.fit()
    assert whole.checkpoint is not None

    resumed_lrs = LearningRates()
    resumed = _trainer(0.5, schedule, callbacks=[resumed_lrs])  # fresh objects: the torch T_max is 16 again
    resumed.state.load_state_dict(torch.load(io.BytesIO(whole.checkpoint), weights_only=True))
    resumed.fit()
    assert int(resumed.state.timer.batch) == 8
    assert resumed_lrs.lrs == pytest.approx(whole.lrs[4:])
    if schedule == "torch":
        assert resumed.state.schedulers[0].T_max == 8
    for p, q in zip(resumed.state.model.parameters(), uninterrupted.state.model.parameters()):
        torch.testing.assert_close(p, q)


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)


SCHEDULERS = {
    "StepLR": lambda opt: lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "MultiStepLR": lambda opt: lr_scheduler.MultiStepLR(opt, milestones=[4, 10], gamma=0.5),
    "ExponentialLR": lambda opt: lr_scheduler.ExponentialLR(opt, gamma=0.8),
    "CosineAnnealingLR": lambda opt: lr_scheduler.CosineAnnealingLR(opt, T_max=12),
    "CosineAnnealingWarmRestarts": lambda opt: lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=6),
}


def _lrs(scheduler: lr_scheduler.LRScheduler, steps: int) -> list[float]:
    lrs = []
    for _ in range(steps):
        lrs.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.optimizer.step()
        scheduler.step()
    return lrs


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scale_scheduler_makes_the_schedule_take_half_the_steps(name: str):
    original = _lrs(SCHEDULERS[name](_optimizer()), 24)
    scaled_scheduler = SCHEDULERS[name](_optimizer())
    scale_scheduler(scaled_scheduler, 0.5)
    assert _lrs(scaled_scheduler, 12) == pytest.approx(original[::2])


def test_scale_scheduler_periods_by_hand():
    step = SCHEDULERS["StepLR"](_optimizer())
    scale_scheduler(step, 2.0)
    assert step.step_size == 8
    multi = SCHEDULERS["MultiStepLR"](_optimizer())
    scale_scheduler(multi, 0.5)
    assert multi.milestones == collections.Counter({2: 1, 5: 1})
    exponential = SCHEDULERS["ExponentialLR"](_optimizer())
    scale_scheduler(exponential, 0.5)
    assert exponential.gamma == pytest.approx(0.64)
    restarts = SCHEDULERS["CosineAnnealingWarmRestarts"](_optimizer())
    scale_scheduler(restarts, 0.5)
    assert (restarts.T_0, restarts.T_i) == (3, 3)
    cosine = SCHEDULERS["CosineAnnealingLR"](_optimizer())
    scale_scheduler(cosine, 0.5, orig_max_epochs=30)
    assert cosine.T_max == 15


def test_unsupported_schedulers_are_refused():
    lam = lr_scheduler.LambdaLR(_optimizer(), lambda step: 1.0)
    with pytest.raises(ValueError, match="LambdaLR"):
        scale_scheduler(lam, 0.5)
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        max_duration="2ep",
        optimizers=optimizer,
        schedulers=lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=8),
        algorithms=[ScaleSchedule(0.5)],
        progress_bar=False,
    )
    with pytest.raises(ValueError, match="OneCycleLR"):
        trainer.fit()


def test_ratio_one_leaves_any_scheduler_alone():
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = lr_scheduler.LambdaLR(optimizer, lambda step: 0.5**step)
    Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        max_duration="1ep",
        optimizers=optimizer,
        schedulers=scheduler,
        algorithms=[ScaleSchedule(1.0)],
        progress_bar=False,
    ).fit()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**4)


def test_composer_schedules_are_left_to_ssr():
    # A compiled composer schedule is a LambdaLR too; ScaleSchedule must not refuse (or rescale) it.
    trainer = _trainer(0.5, "composer")
    trainer.fit()
    assert int(trainer.state.timer.batch) == 8


@pytest.mark.parametrize("ratio", [0, 0.0, -0.5, float("inf")])
def test_bad_ratio_names_the_argument(ratio: float):
    with pytest.raises(ValueError, match="ratio"):
        ScaleSchedule(ratio)
    with pytest.raises(ValueError, match="ratio"):
        ScaleScheduleHparams(ratio=ratio)
    with pytest.raises(ValueError, match="ssr"):
        scale_scheduler(SCHEDULERS["StepLR"](_optimizer()), ratio)


def test_unknown_method_raises_not_implemented_naming_the_method():
    assert ScaleSchedule(0.5, method="epochs").method == "epochs"
    with pytest.raises(NotImplementedError, match="method"):
        ScaleSchedule(0.5, method="batch")
    with pytest.raises(ValueError, match="method"):
        ScaleSchedule(0.5, method="batch")
    with pytest.raises(ValueError, match="method"):
        ScaleScheduleHparams(ratio=0.5, method="batch")


def test_ratio_that_rounds_the_run_to_zero_fails_at_init():
    with pytest.raises(ValueError, match="zero"):
        _trainer(0.1, "composer")


def test_a_scaled_period_of_zero_is_refused():
    with pytest.raises(ValueError, match="step_size"):
        scale_scheduler(lr_scheduler.StepLR(_optimizer(), step_size=1), 0.5)


def test_overriding_the_trainers_ratio_warns_once():
    with pytest.warns(UserWarning, match="scale_schedule_ratio") as record:
        trainer = _trainer(0.5, "composer", scale_schedule_ratio=0.75)
    assert len([w for w in record if "scale_schedule_ratio" in str(w.message)]) == 1
    assert trainer.state.scale_schedule_ratio == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _trainer(0.5, "composer", scale_schedule_ratio=0.5)  # the same ratio twice is fine


def test_hparams_build_the_algorithm():
    algorithm = ScaleScheduleHparams(ratio=0.25, method="epochs").initialize_object()
    assert (algorithm.ratio, algorithm.method) == (0.25, "epochs")
