"""Logged records held until a destination writes them, so that writing costs one device sync per flush."""

from __future__ import annotations

from typing import Any, NamedTuple

from composer.core.logging.logger import LogLevel
from composer.core.time import Timestamp
from composer.loggers.log_value import to_builtins

__all__ = ["Record", "RecordBuffer"]


class Record(NamedTuple):
    """One call to ``log_metric``: when, at which level, and the values (plain Python once drained)."""

    timestamp: Timestamp
    log_level: LogLevel
    data: dict[str, Any]


class RecordBuffer:
    """Keeps records as logged (tensors stay on their device) and hands them back converted, in logging order.

    A destination adds every record it receives and drains the buffer when it writes: at the end of an epoch or an
    evaluation, when the training ends, and whenever ``flush_interval`` records have piled up. Draining converts all
    pending tensors at once (:func:`~composer.loggers.log_value.to_builtins`), so a run on a GPU waits for the device
    once per flush rather than once per logged value.

    Args:
        flush_interval (int): :attr:`full` becomes True at this many pending records.

    Example:
        >>> import torch
        >>> from composer.core.time import Timer
        >>> buffer = RecordBuffer(flush_interval=2)
        >>> buffer.add(Timer().get_timestamp(), LogLevel.BATCH, {"loss/train": torch.tensor(0.5)})
        >>> buffer.full
        False
        >>> [record.data for record in buffer.drain()]
        [{'loss/train': 0.5}]
        >>> len(buffer)
        0
    """

    def __init__(self, flush_interval: int = 100) -> None:
        if not isinstance(flush_interval, int) or flush_interval < 1:
            raise ValueError(f"flush_interval={flush_interval!r} must be a positive number of records, e.g. 100.")
        self.flush_interval = flush_interval
        self._pending: list[Record] = []

    def add(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        """Keeps one record (``data`` is owned by the buffer from now on)."""
        self._pending.append(Record(timestamp, log_level, data))

    @property
    def full(self) -> bool:
        """Whether ``flush_interval`` records are pending."""
        return len(self._pending) >= self.flush_interval

    def drain(self) -> list[Record]:
        """Removes and returns the pending records, every value converted to plain Python."""
        pending, self._pending = self._pending, []
        if not pending:
            return []
        converted = to_builtins([record.data for record in pending])
        return [Record(r.timestamp, r.log_level, data) for r, data in zip(pending, converted)]

    def __len__(self) -> int:
        return len(self._pending)
