"""The base of destinations that write files: filtering by level and interval, buffering, flushing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.time import Time, Timestamp
from composer.loggers.log_interval import LogInterval
from composer.loggers.record_buffer import Record, RecordBuffer

if TYPE_CHECKING:
    from composer.core.state import State

__all__ = ["BufferedDestination", "OpenedOnFitDestination"]


class BufferedDestination(LoggerDestination):
    """A destination that keeps what it receives and writes it in batches through :meth:`write`.

    Values pass :meth:`will_log` when their level is at most ``log_level`` and the ``log_interval`` is due (see
    :class:`~composer.loggers.log_interval.LogInterval`). They are written, converted to plain Python, at the end of
    every epoch and evaluation, at the end of ``fit``, on ``close``, and whenever ``flush_interval`` records are
    pending. Subclasses implement :meth:`write` and usually ``init`` (open the file or run) and ``close`` (call
    :meth:`flush`, then release what ``init`` opened).

    Resuming: saving a checkpoint calls :meth:`state_dict`, which writes every pending record first, so the output
    holds everything logged before the checkpoint, and saves :meth:`resume_state` (what the subclass needs to find
    that point again: how many lines it had written, say). When the Trainer resumes from that checkpoint (autoresume,
    or ``load_path`` with the whole state), :meth:`load_state_dict` keeps it in :attr:`resumed_from`, before
    ``Event.FIT_START``; the subclass then continues the same output and drops what the interrupted run logged after
    the checkpoint (it is logged again). A checkpoint saved without this destination resumes nothing, silently.

    Args:
        log_level (LogLevel | str): The most verbose level written.
        log_interval (str | Time | int): Write BATCH values every this many batches (``'10ba'``), or only EPOCH
            values every this many epochs (``'1ep'``).
        flush_interval (int): Write once this many records are pending.
    """

    def __init__(
        self,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
    ) -> None:
        self._interval = LogInterval(log_level, log_interval)
        self._buffer = RecordBuffer(flush_interval)
        self.resumed_from: dict[str, Any] | None = None

    checkpoint_state_optional = True  # a checkpoint saved without this destination: start fresh, without a warning

    def resume_state(self) -> dict[str, Any]:
        """What a resumed run needs to continue the output from the checkpoint being saved (plain Python values)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Writes every pending record (the checkpoint covers them), then returns :meth:`resume_state`."""
        self.flush()
        return self.resume_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Marks this destination as resuming from a checkpoint that saved ``state`` (kept in :attr:`resumed_from`)."""
        self.resumed_from = dict(state)

    @property
    def log_level(self) -> LogLevel:
        """The most verbose level written."""
        return self._interval.log_level

    @property
    def log_interval(self) -> Time[int]:
        """How often BATCH (interval in batches) or EPOCH (interval in epochs) values are written."""
        return self._interval.interval

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        return self._interval.will_log(state, log_level)

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        self._buffer.add(timestamp, log_level, data)

    def write(self, records: list[Record]) -> None:
        """Writes ``records`` (values already plain Python), in logging order."""
        raise NotImplementedError(f"{type(self).__name__} must implement write(records).")

    def flush(self) -> None:
        """Writes every pending record now."""
        records = self._buffer.drain()
        if records:
            self.write(records)

    def batch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._buffer.full:
            self.flush()

    def epoch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self.flush()

    def eval_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self.flush()

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self.flush()

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        self.flush()


class OpenedOnFitDestination(BufferedDestination):
    """A buffered destination whose run or writer opens at ``Event.FIT_START`` (or at its first write), not at INIT.

    Between ``init`` and ``close`` the destination is started; subclasses implement ``_open`` (open the run or
    writer once it is started, and return it) and extend ``close`` to release it. Opening late lets a resumed run
    learn its checkpoint's state (:attr:`resumed_from`) first, so it continues the same run. The arguments are
    :class:`BufferedDestination`'s.
    """

    _started = False  # between INIT and close (set on the instance by init and close)

    def _open(self) -> Any:
        """The run or writer, opened on the first call after INIT (None before INIT and after close)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _open().")

    def init(self, state: State, logger: Logger) -> None:
        del state, logger
        self._started = True

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._open()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        self._started = False
