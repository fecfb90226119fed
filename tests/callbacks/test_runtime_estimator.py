import io

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import RuntimeEstimator, RuntimeEstimatorHparams, remaining_schedule
from composer.core import Evaluator
from composer.core.time import Time
from composer.loggers import InMemoryLogger, ProgressBarLogger
from composer.loggers.progress_bar import format_seconds
from tests.common import SimpleModel, make_dataloader

TRAIN_SECONDS, WARM_UP_SECONDS, EVAL_BATCH_SECONDS = 2.0, 10.0, 0.5


class FakeClock(Callback):
    """A clock that training moves: 2 s per training batch (plus 10 s in the first), 0.5 s per evaluation batch."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def batch_start(self, state, logger):
        self.now += TRAIN_SECONDS + (WARM_UP_SECONDS if state.timer.batch.value == 0 else 0.0)

    def eval_batch_start(self, state, logger):
        self.now += EVAL_BATCH_SECONDS


def train(loggers=(), estimator=True, progress_bar=False):
    # 3 epochs of 4 batches; evaluator 'a' (2 batches, 1 s) every 3 batches, 'b' (3 batches, 1.5 s) every epoch.
    torch.manual_seed(0)
    clock = FakeClock()
    evaluators = [
        Evaluator(label="a", dataloader=make_dataloader(num_samples=8, batch_size=4, seed=1), eval_interval="3ba"),
        Evaluator(label="b", dataloader=make_dataloader(num_samples=12, batch_size=4, seed=2), eval_interval="1ep"),
    ]
    memory = InMemoryLogger()
    callbacks = [clock] + ([RuntimeEstimator(skip_batches=1, time_fn=clock)] if estimator else [])
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        eval_dataloader=evaluators,
        max_duration="3ep",
        callbacks=callbacks,
        loggers=[memory, *loggers],
        progress_bar=progress_bar,
    )
    trainer.fit()
    trainer.close()
    return memory


def expected_eta(i):
    """The time left after batch i (0-based) by the formula, with what had been measured by then."""
    completed = i + 1
    batches_left = 12 - completed
    a_done = i // 3  # 'a' ran after batches 3, 6, ... completed, before batch i's estimate
    a_left = 12 // 3 - completed // 3 + (1 if completed % 3 == 0 else 0)
    b_done = i // 4  # 'b' ran at the end of each finished epoch
    b_left = 3 - b_done
    return (
        batches_left * TRAIN_SECONDS
        + (a_left * 2 * EVAL_BATCH_SECONDS if a_done else 0.0)
        + (b_left * 3 * EVAL_BATCH_SECONDS if b_done else 0.0)
    )


def test_eta_is_exact_under_a_fake_clock():
    memory = train()
    assert memory.steps("time/eta") == list(range(1, 12))  # batch 0 is the warm-up
    assert memory.values("time/eta") == pytest.approx([expected_eta(i) for i in range(1, 12)], abs=1e-9)
    assert memory.values("time/eta")[-1] == 2.5  # the evaluations after the last batch: a (1 s) and b (1.5 s)


def test_remaining_schedule_cases():
    evals = {"a": Time.from_input("2ba"), "b": Time.from_input("1ep")}
    # 10 batches in epochs of 4, after batch 5: 5 batches left; 'a' after batches 6, 8, 10; epochs end at 8 and 10
    assert remaining_schedule(
        batch=5,
        epoch=1,
        batch_in_epoch=1,
        max_duration=Time.from_input("10ba"),
        steps_per_epoch=4,
        elapsed_fraction=0.5,
        eval_intervals=evals,
    ) == (5, {"a": 3, "b": 2})
    # A duration in samples: the batches left from the fraction done (after 30 batches, 3/4 of the run)
    batches, evaluations = remaining_schedule(
        batch=30,
        epoch=0,
        batch_in_epoch=30,
        max_duration=Time.from_input("1280sp"),
        steps_per_epoch=None,
        elapsed_fraction=0.75,
        eval_intervals=evals,
    )
    assert batches == pytest.approx(10.0) and evaluations == {"a": 6, "b": 1}  # batch 30's own included
    # Nothing done of a sample budget: nothing to estimate from
    assert (
        remaining_schedule(
            batch=0,
            epoch=0,
            batch_in_epoch=0,
            max_duration=Time.from_input("64sp"),
            steps_per_epoch=None,
            elapsed_fraction=0.0,
            eval_intervals={},
        )
        is None
    )


def test_state_dict_keeps_what_was_measured():
    estimator = RuntimeEstimator(time_fn=lambda: 0.0)
    estimator.load_state_dict({"batch_seconds": 6.0, "batches": 3, "eval_seconds": {"a": [2.0, 2.0]}})
    assert estimator.state_dict() == {"batch_seconds": 6.0, "batches": 3, "eval_seconds": {"a": [2.0, 2.0]}}


def test_the_progress_bar_shows_the_estimate_only_with_the_estimator():
    lines = io.StringIO()
    train(loggers=[ProgressBarLogger(stream=lines, interval_seconds=None)])
    epoch_lines = [line for line in lines.getvalue().splitlines() if line.startswith("Epoch")]
    # each epoch's line shows the estimate made at its last batch (3, 7, 11)
    assert [line.rsplit("ETA ", 1)[1] for line in epoch_lines] == [format_seconds(expected_eta(i)) for i in (3, 7, 11)]
    assert expected_eta(3) == 8 * 2 + 3 * 1.0  # 00:19, where the bar's own estimate says about 00:00

    bars = io.StringIO()
    train(loggers=[ProgressBarLogger(enabled=True, stream=bars, refresh_seconds=0, backend="tqdm")])
    assert f"eta={format_seconds(expected_eta(3))}" in bars.getvalue()
    without = io.StringIO()
    train(loggers=[ProgressBarLogger(enabled=True, stream=without, refresh_seconds=0, backend="tqdm")], estimator=False)
    assert "eta=" not in without.getvalue() and "loss=" in without.getvalue()


def test_bad_arguments():
    with pytest.raises(ValueError, match="skip_batches=-1"):
        RuntimeEstimator(skip_batches=-1)
    with pytest.raises(ValueError, match="skip_batches"):
        RuntimeEstimatorHparams(skip_batches=-2)
    assert RuntimeEstimatorHparams.from_dict({"skip_batches": 3}).initialize_object().skip_batches == 3
