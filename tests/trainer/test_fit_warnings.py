"""Warnings at FIT_START for runs that would train without error but give a wrong result (issue 17): a torch
scheduler stepped every batch with a period counted in epochs, EMA's half life longer than the run, and a checkpoint
loaded past max_duration."""

import math
import warnings

import pytest
import torch

from composer import Trainer
from composer.algorithms import EMA
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader

BATCHES_PER_EPOCH = 8


def make_trainer(model=None, optimizer=None, **kwargs):
    torch.manual_seed(0)
    model = model or SimpleModel()
    kwargs.setdefault("train_dataloader", make_dataloader(num_samples=16, batch_size=2))  # 8 batches an epoch
    kwargs.setdefault("max_duration", "3ep")
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model=model, optimizers=optimizer, progress_bar=False, seed=0, **kwargs)


def fit_and_collect(trainer, times=1):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(times):
            trainer.fit() if _ == 0 else trainer.fit(duration="1ba")
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


# ---- torch schedulers stepped every batch -------------------------------------------------------------------------


def test_a_scheduler_period_in_epochs_stepped_every_batch_warns_once():
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)  # the usual idiom for 3 epochs
    memory = InMemoryLogger()
    from composer.callbacks import LRMonitor

    trainer = make_trainer(model, optimizer, schedulers=scheduler, callbacks=[LRMonitor()], loggers=[memory])
    messages = fit_and_collect(trainer, times=2)
    # The behaviour warned about: the rate follows torch's closed form over batches, so it cycles every 3 batches.
    rates = memory.values("lr-SGD/group0")[:7]
    expected = [0.05 * (1 + math.cos(math.pi * t / 3)) for t in range(7)]
    assert rates == pytest.approx(expected, abs=1e-9)
    matching = [m for m in messages if m.startswith("CosineAnnealingLR(T_max=3) steps after every batch")]
    assert len(matching) == 1  # once per run, not once per fit
    assert "3 of this run's 24 (3 epochs)" in matching[0]
    assert "step_schedulers_every_batch=False" in matching[0]


@pytest.mark.parametrize(
    "make_scheduler",
    [
        lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1),
        lambda opt: torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 2]),
        lambda opt: torch.optim.lr_scheduler.LinearLR(opt, total_iters=2),
    ],
)
def test_other_periods_warn_too(make_scheduler):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = make_scheduler(optimizer)
    messages = fit_and_collect(make_trainer(model, optimizer, schedulers=scheduler))
    assert sum(m.startswith(f"{type(scheduler).__name__}(") for m in messages) == 1


@pytest.mark.parametrize("per_batch", [True, False])
def test_no_warning_for_a_period_in_the_unit_stepped(per_batch):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Over the whole run in the unit it is stepped in: 24 batches, or 3 epochs.
    t_max = 3 * BATCHES_PER_EPOCH if per_batch else 3
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=t_max)
    trainer = make_trainer(model, optimizer, schedulers=scheduler, step_schedulers_every_batch=per_batch)
    assert not [m for m in fit_and_collect(trainer) if "CosineAnnealingLR" in m]


# ---- EMA ---------------------------------------------------------------------------------------------------------


def test_ema_with_a_half_life_longer_than_the_run_warns_once():
    trainer = make_trainer(algorithms=[EMA()])
    messages = [m for m in fit_and_collect(trainer, times=2) if m.startswith("EMA")]
    assert messages == [
        "EMA's half life of 1000 batches is over half of this run's 24 batches (the default half_life='1000ba'): the "
        "average will still weigh the first, barely trained weights heavily at the end, and evaluation runs on it. "
        "Choose a half life of at most about a fifth of the run, e.g. EMA(half_life='4ba')."
    ]


@pytest.mark.parametrize(
    ("ema", "warns"),
    [
        (EMA(half_life="12ba"), False),  # exactly half of 24 batches
        (EMA(half_life="13ba"), True),
        (EMA(half_life="2ep"), True),  # 2 of 3 epochs
        (EMA(half_life="1ep"), False),
        (EMA(smoothing=0.9), False),  # a half life of ln(0.5) / ln(0.9) = 6.6 batches
        (EMA(smoothing=0.99), True),  # 69 batches
    ],
)
def test_ema_half_life_rule(ema, warns):
    messages = fit_and_collect(make_trainer(algorithms=[ema]))
    assert any(m.startswith("EMA's half life") for m in messages) == warns


# ---- a checkpoint loaded past max_duration ------------------------------------------------------------------------


@pytest.fixture
def four_epoch_checkpoint(tmp_path):
    trainer = make_trainer(max_duration="4ep")
    trainer.fit()
    path = trainer.save_checkpoint(tmp_path / "ep4.pt")
    trainer.close()
    return path


def test_loading_past_max_duration_warns_naming_both_times(four_epoch_checkpoint):
    trainer = make_trainer(max_duration="2ep", load_path=four_epoch_checkpoint)
    messages = [m for m in fit_and_collect(trainer) if m.startswith("The checkpoint loaded")]
    assert len(messages) == 1
    assert f"loaded from {four_epoch_checkpoint} is at 4ep (epoch 4, batch 32), past max_duration=2ep" in messages[0]
    assert int(trainer.state.timer.epoch) == 4  # fit() trained nothing


def test_loading_before_max_duration_does_not_warn(four_epoch_checkpoint):
    trainer = make_trainer(max_duration="5ep", load_path=four_epoch_checkpoint)
    assert not [m for m in fit_and_collect(trainer) if m.startswith("The checkpoint loaded")]
    assert int(trainer.state.timer.epoch) == 5


def test_autoresume_of_a_finished_run_does_not_warn(tmp_path):
    settings = dict(max_duration="2ep", save_folder=str(tmp_path), run_name="finished", autoresume=True)
    make_trainer(**settings).fit()
    again = make_trainer(**settings)
    assert not [m for m in fit_and_collect(again) if m.startswith("The checkpoint loaded")]
    assert int(again.state.timer.epoch) == 2
