"""Logging is cheap: values stay on their device until a destination writes them, and then move in one go."""

import io

import torch

from composer.core import State
from composer.core.logging.logger import Logger, LogLevel
from composer.loggers import FileLogger, ProgressBarLogger
from composer.loggers.log_value import to_builtins
from composer.loggers.record_buffer import RecordBuffer


class Counting(torch.Tensor):
    """A tensor that counts the reads that would synchronise with its device."""

    reads = 0

    def item(self):
        Counting.reads += 1
        return super().item()

    def tolist(self):
        Counting.reads += 1
        return super().tolist()


def counting(value):
    return torch.Tensor._make_subclass(Counting, torch.tensor(value))


def make_state():
    return State(model=torch.nn.Linear(1, 1), max_duration="10ba", steps_per_epoch=10)


def test_plain_lines_read_the_loss_once_per_epoch():
    state = make_state()
    bar = ProgressBarLogger(stream=io.StringIO())
    logger = Logger(state, [bar])
    Counting.reads = 0
    bar.epoch_start(state, logger)
    for _ in range(10):
        logger.metric_batch({"loss/train": counting(0.5)})
        state.timer.on_batch_complete(4)
        bar.batch_end(state, logger)
    assert Counting.reads == 0
    state.timer.on_epoch_complete()
    bar.epoch_end(state, logger)
    assert Counting.reads == 1


def test_a_file_destination_converts_only_when_it_writes(tmp_path):
    state = make_state()
    destination = FileLogger(tmp_path / "log.jsonl", log_interval="1ba", flush_interval=100)
    logger = Logger(state, [destination])
    destination.init(state, logger)
    Counting.reads = 0
    for _ in range(10):
        logger.metric_batch({"loss/train": counting(0.5)})
        state.timer.on_batch_complete(4)
        destination.batch_end(state, logger)
    assert Counting.reads == 0
    destination.epoch_end(state, logger)
    assert Counting.reads == 1  # ten losses, one stacked copy
    destination.close(state, logger)
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 10


def test_buffer_is_full_at_the_flush_interval_and_keeps_order():
    state = make_state()
    buffer = RecordBuffer(flush_interval=3)
    for i in range(3):
        assert not buffer.full
        buffer.add(state.timer.get_timestamp(), LogLevel.BATCH, {"x": torch.tensor(float(i)), "s": "a"})
    assert buffer.full
    assert [r.data for r in buffer.drain()] == [{"x": 0.0, "s": "a"}, {"x": 1.0, "s": "a"}, {"x": 2.0, "s": "a"}]


def test_to_builtins_keeps_dtypes_apart_and_converts_everything():
    records = [
        {"a": torch.tensor(1.5, dtype=torch.float16), "b": torch.tensor(2.25), "n": torch.tensor(3)},
        {"v": torch.tensor([1.0, 2.0]), "s": "text", "f": 0.5},
    ]
    assert to_builtins(records) == [{"a": 1.5, "b": 2.25, "n": 3}, {"v": [1.0, 2.0], "s": "text", "f": 0.5}]
