import pytest

from composer.core.logging.logger import LogLevel
from composer.loggers import LogInterval


@pytest.mark.parametrize(
    ("interval", "level", "kept"),
    [
        ("3ba", LogLevel.BATCH, [0, 3, 6]),
        ("3ba", LogLevel.EPOCH, list(range(8))),
        ("1ep", LogLevel.BATCH, []),
        (2, LogLevel.BATCH, [0, 2, 4, 6]),
    ],
)
def test_which_batches_are_kept(interval, level, kept):
    every = LogInterval("batch", interval)
    assert [b for b in range(8) if every.due(batch=b, epoch=b // 4, log_level=level)] == kept


def test_epoch_interval_and_levels():
    every_2_epochs = LogInterval("epoch", "2ep")
    assert [e for e in range(5) if every_2_epochs.due(batch=0, epoch=e, log_level=LogLevel.EPOCH)] == [0, 2, 4]
    assert every_2_epochs.due(batch=1, epoch=1, log_level=LogLevel.FIT)
    assert not LogInterval("fit").due(batch=0, epoch=0, log_level=LogLevel.EPOCH)


@pytest.mark.parametrize("bad", ["0ba", "1.5ba", "10sp", "0.5dur", "soon"])
def test_bad_intervals_are_rejected(bad):
    with pytest.raises(ValueError, match=rf"log_interval='{bad}'"):
        LogInterval("batch", bad)
