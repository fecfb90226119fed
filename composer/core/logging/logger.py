"""The Logger that algorithms, callbacks and the trainer log through, and the LoggerDestination base."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from composer.core.callback import Callback

if TYPE_CHECKING:
    from composer.core.state import State
    from composer.core.time import Timestamp

__all__ = ["LogData", "LogLevel", "Logger", "LoggerDestination"]

LogData = Mapping[str, Any]
"""Metric name to value: a number, a string, a tensor (left on its device), or sequences and mappings of these."""


class LogLevel(IntEnum):
    """How often a value is logged; a destination keeps the levels up to the one it is configured with.

    Attributes:
        FIT: Once per run (hyperparameters, the algorithms used).
        EPOCH: Once per epoch (evaluation metrics, epoch throughput).
        BATCH: Once per batch (the training loss, learning rates).
    """

    FIT = 1
    EPOCH = 2
    BATCH = 3

    @classmethod
    def parse(cls, value: LogLevel | str | int) -> LogLevel:
        """The level named or numbered by ``value`` (``'batch'``, ``'BATCH'``, ``3``, ``LogLevel.BATCH``)."""
        if type(value) is cls:  # the common case, on every logged batch
            return value
        if isinstance(value, str):
            if value.upper() not in cls.__members__:
                raise ValueError(f"Unknown log level {value!r}; expected one of {[m.name.lower() for m in cls]}.")
            return cls[value.upper()]
        return cls(value)


class LoggerDestination(Callback):
    """Base class for where logged values go (a console, a file, memory, a progress bar, an experiment tracker).

    A destination is also a :class:`~composer.core.callback.Callback`, so it can react to events (open a file at
    ``INIT``, flush at ``EPOCH_END``, close in ``close``). It receives every value for which :meth:`will_log` is True.
    Values arrive as logged: a tensor stays on its device until the destination converts it, so a destination that
    ignores a value never forces a device-to-host copy.
    """

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        """Whether this destination wants values logged at ``log_level`` now (default: all of them)."""
        del state, log_level
        return True

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        """Receives ``data`` logged at ``log_level`` at ``timestamp`` (a copy of the mapping, owned by this call)."""
        del timestamp, log_level, data

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Receives images: one (C, H, W) image or an (N, C, H, W) batch, floats in [0, 1], on the CPU (default:
        ignored)."""
        del timestamp, log_level, name, images

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Receives a piece of text (generated samples, say) to show under ``name`` (default: ignored)."""
        del timestamp, log_level, name, text


class Logger:
    """Hands logged values to each :class:`LoggerDestination` that wants them.

    Importable as ``composer.Logger``, ``composer.loggers.Logger`` and ``composer.core.logging.logger.Logger``.

    Args:
        state (State): The training state (its timer stamps every value).
        destinations (Sequence[LoggerDestination], optional): Where values go. Default: none, and logging costs
            nothing.

    Example:
        >>> from composer.core.logging.logger import LoggerDestination, LogLevel
        >>> class Print(LoggerDestination):
        ...     def log_metric(self, timestamp, log_level, data):
        ...         print(log_level.name, int(timestamp.batch), data)
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> logger = Logger(state, destinations=[Print()])
        >>> logger.metric_batch({"loss/train": 0.25})
        BATCH 0 {'loss/train': 0.25}
    """

    def __init__(self, state: State, destinations: Sequence[LoggerDestination] = ()) -> None:
        self._state = state
        self.destinations: list[LoggerDestination] = list(destinations)

    @property
    def backends(self) -> list[LoggerDestination]:
        """Alias of :attr:`destinations`."""
        return self.destinations

    def metric(self, log_level: LogLevel | str | int, data: LogData | Callable[[], LogData]) -> None:
        """Logs ``data`` at ``log_level``.

        Args:
            log_level (LogLevel | str | int): ``LogLevel.BATCH``, ``'batch'``, ...
            data (LogData | Callable[[], LogData]): The values, or a function computing them; it is called only if
                some destination will log them, and at most once.
        """
        if self.destinations:
            self._log(LogLevel.parse(log_level), data)

    def _log(self, level: LogLevel, data: LogData | Callable[[], LogData]) -> None:
        state = self._state
        wanted: list[LoggerDestination] = []
        for destination in self.destinations:
            if destination.will_log(state, level):
                wanted.append(destination)
        if not wanted:  # most batches: no destination shows this batch's values, so they are never computed
            return
        values = data() if callable(data) else data
        timestamp = state.timer.get_timestamp()
        for destination in wanted:
            destination.log_metric(timestamp, level, dict(values))

    def _send(
        self, log_level: LogLevel | str | int, send: Callable[[LoggerDestination, Timestamp, LogLevel], None]
    ) -> None:
        """Calls ``send(destination, timestamp, level)`` for each destination that logs ``log_level`` now."""
        if not self.destinations:
            return
        level = LogLevel.parse(log_level)
        state = self._state
        timestamp = state.timer.get_timestamp()
        for destination in self.destinations:
            if destination.will_log(state, level):
                send(destination, timestamp, level)

    # The level is known: these skip parsing it (metric_batch runs several times per batch).

    def metric_fit(self, data: LogData | Callable[[], LogData]) -> None:
        """Logs ``data`` at :attr:`LogLevel.FIT`."""
        if self.destinations:
            self._log(LogLevel.FIT, data)

    def metric_epoch(self, data: LogData | Callable[[], LogData]) -> None:
        """Logs ``data`` at :attr:`LogLevel.EPOCH`."""
        if self.destinations:
            self._log(LogLevel.EPOCH, data)

    def metric_batch(self, data: LogData | Callable[[], LogData]) -> None:
        """Logs ``data`` at :attr:`LogLevel.BATCH`."""
        if self.destinations:
            self._log(LogLevel.BATCH, data)

    def log_images(self, name: str, images: Any, log_level: LogLevel | str | int = LogLevel.BATCH) -> None:
        """Hands ``images`` ((C, H, W) or (N, C, H, W), floats in [0, 1]) to each destination logging ``log_level``."""
        self._send(
            log_level, lambda destination, timestamp, level: destination.log_images(timestamp, level, name, images)
        )

    def log_text(self, name: str, text: str, log_level: LogLevel | str | int = LogLevel.EPOCH) -> None:
        """Hands ``text`` to each destination that logs ``log_level`` now and takes text.

        The progress display, console, file, in-memory, TensorBoard, MLflow and W&B destinations take text; others
        ignore it. The default level, EPOCH, reaches the console of a default Trainer: its progress display prints
        FIT and EPOCH text (a ``ConsoleLogger``, ``log_to_console=True``, prints EPOCH values by default, too).

        Args:
            name (str): What the text is, such as ``'generate/0'``.
            text (str): The text.
            log_level (LogLevel | str | int): The level it is logged at.

        Example:
            >>> from composer.core.logging.logger import LoggerDestination, LogLevel
            >>> class Print(LoggerDestination):
            ...     def log_text(self, timestamp, log_level, name, text):
            ...         print(name, repr(text))
            >>> import torch
            >>> from composer.core import State
            >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
            >>> Logger(state, destinations=[Print()]).log_text("generate/0", "def f(x):")
            generate/0 'def f(x):'
        """
        if not isinstance(text, str):
            raise TypeError(f"log_text text must be a str, got {type(text).__name__}; decode tokens first.")
        self._send(log_level, lambda destination, timestamp, level: destination.log_text(timestamp, level, name, text))

    def log_metrics(self, data: LogData, log_level: LogLevel | str | int = LogLevel.BATCH) -> None:
        """Logs ``data`` (default level: BATCH); the spelling newer Composer and Lightning users know."""
        self.metric(log_level, data)
