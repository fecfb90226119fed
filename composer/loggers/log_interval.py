"""How often a destination writes: a log level plus a :class:`~composer.core.time.Time` interval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from composer.core.logging.logger import LogLevel
from composer.core.time import Time, TimeUnit
from composer.utils.interval import parse_interval

if TYPE_CHECKING:
    from composer.core.state import State

__all__ = ["LogInterval"]


class LogInterval:
    """Decides whether a value logged at a given level is written now.

    A value more verbose than ``log_level`` is never written. Of the rest, FIT values are always written; with an
    interval in batches (``'10ba'``), BATCH values are written when the batch count is a multiple of the interval and
    EPOCH values always; with an interval in epochs (``'2ep'``), EPOCH values are written when the epoch count is a
    multiple of the interval and BATCH values never. The counts are those of the trainer's timer when the value is
    logged (the training loss of the first batch is logged at batch 0).

    Args:
        log_level (LogLevel | str | int): The most verbose level written.
        interval (str | Time | int): ``'Nba'`` or ``'Nep'``; an int means batches.

    Example:
        >>> every_2 = LogInterval("batch", "2ba")
        >>> for batch in range(4):
        ...     print(batch, every_2.due(batch=batch, epoch=0, log_level=LogLevel.BATCH))
        0 True
        1 False
        2 True
        3 False
    """

    def __init__(self, log_level: LogLevel | str | int, interval: str | Time[Any] | int = "1ba") -> None:
        self.log_level = LogLevel.parse(log_level)
        self.interval: Time[int] = parse_interval(interval, "log_interval")

    def due(self, *, batch: int, epoch: int, log_level: LogLevel) -> bool:
        """Whether a value logged at ``log_level`` when the timer reads ``batch`` and ``epoch`` is written."""
        if log_level > self.log_level:
            return False
        if log_level == LogLevel.FIT:
            return True
        n = self.interval.value
        if self.interval.unit == TimeUnit.BATCH:
            return log_level == LogLevel.EPOCH or batch % n == 0
        return log_level == LogLevel.EPOCH and epoch % n == 0

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        """:meth:`due` at the state's current time: the body of a destination's ``will_log``."""
        timer = state.timer
        return self.due(batch=timer.batch.value, epoch=timer.epoch.value, log_level=log_level)

    def __repr__(self) -> str:
        return f"LogInterval(log_level={self.log_level.name.lower()!r}, interval='{self.interval}')"
