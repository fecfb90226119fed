import pytest
import torch

from composer import Logger as TopLogger
from composer.core import State
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.loggers import Logger as LoggersLogger


class Recorder(LoggerDestination):
    def __init__(self, max_level=LogLevel.BATCH):
        self.max_level = max_level
        self.records = []

    def will_log(self, state, log_level):
        return log_level <= self.max_level

    def log_metric(self, timestamp, log_level, data):
        self.records.append((int(timestamp.batch), log_level, data))


def make_state():
    return State(model=torch.nn.Linear(1, 1), max_duration="1ep")


def test_three_import_paths_are_one_class():
    assert TopLogger is Logger is LoggersLogger


def test_levels_filter_per_destination_and_data_copied():
    state = make_state()
    epoch_only, everything = Recorder(LogLevel.EPOCH), Recorder()
    logger = Logger(state, [epoch_only, everything])
    logger.metric_batch({"loss": 1.0})
    logger.metric_epoch({"acc": 0.5})
    logger.metric("fit", {"algos": []})
    assert [r[1] for r in epoch_only.records] == [LogLevel.EPOCH, LogLevel.FIT]
    assert [r[1] for r in everything.records] == [LogLevel.BATCH, LogLevel.EPOCH, LogLevel.FIT]
    epoch_only.records[0][2]["acc"] = 99
    assert everything.records[1][2]["acc"] == 0.5


def test_lazy_data_is_computed_once_and_only_when_wanted():
    state = make_state()
    calls = []

    def compute():
        calls.append(1)
        return {"x": 1}

    Logger(state, [Recorder(LogLevel.FIT)]).metric_batch(compute)
    assert calls == []
    Logger(state, [Recorder(), Recorder()]).metric_batch(compute)
    assert calls == [1]


def test_tensors_pass_through_unconverted():
    state = make_state()
    rec = Recorder()
    value = torch.tensor(2.5)
    Logger(state, [rec]).metric_batch({"loss": value})
    assert rec.records[0][2]["loss"] is value


def test_timestamp_follows_timer():
    state = make_state()
    rec = Recorder()
    logger = Logger(state, [rec])
    state.timer.on_batch_complete(samples=1)
    logger.log_metrics({"a": 1})
    assert rec.records[0][0] == 1


def test_unknown_level_raises():
    with pytest.raises(ValueError):
        Logger(make_state(), [Recorder()]).metric("sometimes", {"a": 1})


def test_log_images_reaches_destinations_that_log_the_level():
    class ImageRecorder(Recorder):
        def log_images(self, timestamp, log_level, name, images):
            self.records.append((name, images.shape, log_level))

    state = make_state()
    batch_only, epoch_only = ImageRecorder(), ImageRecorder(LogLevel.EPOCH)
    Logger(state, [batch_only, epoch_only, Recorder()]).log_images("inputs", torch.zeros(2, 3, 4, 4))
    assert batch_only.records == [("inputs", torch.Size([2, 3, 4, 4]), LogLevel.BATCH)]
    assert epoch_only.records == []
