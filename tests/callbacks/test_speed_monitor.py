import time
import types

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import SpeedMonitor, SpeedMonitorHparams, speed_monitor
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


class FakeClock:
    """A clock that only moves when told: 1 s of "work" per batch, 100 s per evaluation, 50 s per checkpoint."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class Work(Callback):
    def __init__(self, clock):
        self.clock = clock

    def after_dataloader(self, state, logger):
        self.clock.now += 1.0  # training time: counts

    def eval_batch_start(self, state, logger):
        self.clock.now += 100.0  # evaluation: never counts

    def batch_checkpoint(self, state, logger):
        self.clock.now += 50.0  # a checkpoint written before the SpeedMonitor sees the event: does not count

    def epoch_checkpoint(self, state, logger):
        self.clock.now += 50.0


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(speed_monitor, "time", types.SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def train(clock, monitor, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    memory = InMemoryLogger()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=8, seed=1),
        max_duration="2ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[Work(clock), monitor],
        loggers=[memory],
        progress_bar=False,
        **kwargs,
    )
    trainer.fit()
    return trainer, memory


def test_known_throughput_with_eval_and_checkpoint_time_excluded(clock):
    trainer, memory = train(clock, SpeedMonitor(window_size=2), eval_interval="2ba")
    assert memory.steps("time/batch") == [1, 2, 3, 4, 5, 6]
    assert memory.values("time/batch") == [1.0] * 6
    assert memory.values("throughput/samples_per_sec") == [4.0] * 6  # 4 samples per second of work
    assert memory.values("throughput/batches_per_sec") == [1.0] * 6
    assert memory.values("time/train") == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # ETA = time/train * (1 - f) / f with f = batches / 6.
    assert memory.values("time/remaining_estimate") == pytest.approx([5, 4, 3, 2, 1, 0])
    assert memory.values("time/epoch") == [3.0, 3.0]
    assert memory.values("throughput/epoch/samples_per_sec") == [4.0, 4.0]
    assert memory.values("time/eval") == [200.0] * 3  # two eval batches of 100 s, after batches 2, 4 and 6
    assert "throughput/tokens_per_sec" not in memory.data  # the data has no tokens
    trainer.close()


def test_window_averages_the_last_batches(clock):
    class Uneven(Callback):
        def after_dataloader(self, state, logger):
            clock.now += 1.0 + int(state.timer.batch)  # batch n takes n + 1 seconds

    monitor = SpeedMonitor(window_size=2)
    torch.manual_seed(0)
    model = SimpleModel()
    memory = InMemoryLogger()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration="4ba",
        callbacks=[Uneven(), monitor],
        loggers=[memory],
        progress_bar=False,
    ).fit()
    assert memory.values("time/batch") == [1.0, 2.0, 3.0, 4.0]
    # Window of 2: samples / seconds over the last two batches.
    assert memory.values("throughput/samples_per_sec") == pytest.approx([4 / 1, 8 / 3, 8 / 5, 8 / 7])


def test_training_time_survives_a_checkpoint_round_trip(clock):
    trainer, _ = train(clock, SpeedMonitor())
    saved = trainer.state.callbacks[-1].state_dict()
    assert saved == {"train_seconds": 6.0}
    restored = SpeedMonitor()
    restored.load_state_dict(saved)
    assert restored.state_dict() == saved
    trainer.close()


def test_metric_names_cover_what_is_logged(clock):
    monitor = SpeedMonitor()
    trainer, memory = train(clock, monitor)
    logged = {k for k in memory.data if k.startswith(("time/", "throughput/"))}
    assert logged <= set(monitor.metric_names(trainer.state))
    trainer.close()


def test_bad_window_and_hparams():
    with pytest.raises(ValueError, match="window_size=0 must be a positive number of batches"):
        SpeedMonitor(window_size=0)
    assert SpeedMonitorHparams(window_size=5).initialize_object().window_size == 5


class SlowLoader:
    """A loader whose every batch takes ``seconds`` to arrive: on the fake clock, or really (``sleep``)."""

    def __init__(self, batches, seconds, clock=None):
        self.batches, self.seconds, self.clock = list(batches), seconds, clock

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            if self.clock is None:
                time.sleep(self.seconds)
            else:
                self.clock.now += self.seconds
            yield batch


class Busy(Callback):
    """The model's step taking ``seconds``: after the batch arrived, on the fake clock or really."""

    def __init__(self, seconds, clock=None):
        self.seconds, self.clock = seconds, clock

    def batch_start(self, state, logger):
        if self.clock is None:
            time.sleep(self.seconds)
        else:
            self.clock.now += self.seconds


def run_with(loader, callbacks, max_duration="2ep"):
    torch.manual_seed(0)
    model = SimpleModel()
    memory = InMemoryLogger()
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=max_duration,
        callbacks=callbacks,
        loggers=[memory],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return memory


def test_data_wait_is_the_time_before_the_batch_is_ready(clock):
    # 3 s waiting for each batch, then 1 s of work: a data-bound run, 3/4 of every batch spent waiting.
    loader = SlowLoader(make_dataloader(num_samples=12, batch_size=4), 3.0, clock)
    monitor = SpeedMonitor(window_size=2)
    memory = run_with(loader, [monitor, Busy(1.0, clock)])
    assert memory.values("time/batch") == [4.0] * 6
    assert memory.values("time/data_wait") == [3.0] * 6  # the first batch of each epoch too
    assert memory.values("time/data_wait_fraction") == pytest.approx([0.75] * 6)


def test_data_wait_fraction_is_over_the_window(clock):
    class Uneven(Callback):
        def after_dataloader(self, state, logger):  # listed before the monitor: counts as preparing the batch
            clock.now += int(state.timer.batch) + 1.0  # batch n waits n + 1 seconds

    memory = run_with(
        make_dataloader(num_samples=12, batch_size=4), [Uneven(), SpeedMonitor(window_size=2), Busy(1.0, clock)], "3ba"
    )
    assert memory.values("time/data_wait") == [1.0, 2.0, 3.0]
    assert memory.values("time/batch") == [2.0, 3.0, 4.0]
    assert memory.values("time/data_wait_fraction") == pytest.approx([1 / 2, 3 / 5, 5 / 7])


def test_a_sleeping_loader_shows_as_data_wait():
    # Real sleeps: only lower bounds, which hold however loaded the machine is.
    batches = make_dataloader(num_samples=12, batch_size=4)
    data_bound = run_with(SlowLoader(batches, 0.02), [SpeedMonitor()], "3ba")
    compute_bound = run_with(SlowLoader(batches, 0.0), [SpeedMonitor(), Busy(0.02)], "3ba")
    for wait, batch in zip(data_bound.values("time/data_wait"), data_bound.values("time/batch"), strict=True):
        assert 0.02 <= wait <= batch
    for wait, batch in zip(compute_bound.values("time/data_wait"), compute_bound.values("time/batch"), strict=True):
        assert batch - wait >= 0.02  # the sleep came after the batch was ready: not data wait
