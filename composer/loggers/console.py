"""Plain-text metrics on the console."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Time, Timestamp
from composer.loggers.log_interval import LogInterval
from composer.loggers.log_value import format_record
from composer.loggers.progress_bar import ProgressBarLogger

__all__ = ["ConsoleLogger", "ConsoleLoggerHparams"]


class ConsoleLogger(LoggerDestination):
    """Prints logged values, one line per call, to standard error (or ``stream``).

    The Trainer adds one with ``log_to_console=True``. When a :class:`ProgressBarLogger` of the same run shows
    progress (its bars or lines are on), evaluation metrics (``metrics/<label>/...``, logged at the end of each
    evaluation) and text at the FIT or EPOCH level are left to it, so that each is printed once; everything else is
    printed here as usual.

    Args:
        log_level (LogLevel | str): The most verbose level printed (default: EPOCH, so per-batch values are not).
        stream (TextIO, optional): Where to print. Default: ``sys.stderr`` (looked up at each print).
        log_interval (str | Time | int): With ``log_level='batch'``, print BATCH values every this many batches.

    Example:
        >>> import io
        >>> from composer.core.time import Timer
        >>> out = io.StringIO()
        >>> console = ConsoleLogger(stream=out)
        >>> console.log_metric(Timer().get_timestamp(), LogLevel.EPOCH, {"metrics/eval/Accuracy": 0.5})
        >>> out.getvalue()
        '[EPOCH][epoch=0 batch=0]: metrics/eval/Accuracy: 0.5000\\n'
    """

    def __init__(
        self,
        log_level: LogLevel | str = LogLevel.EPOCH,
        stream: TextIO | None = None,
        log_interval: str | Time[Any] | int = "1ba",
    ) -> None:
        self._interval = LogInterval(log_level, log_interval)
        self._stream = stream
        self._left_to_progress = False  # a progress display of the same run prints evaluations and text
        self._eval_prefix: str | None = None  # during an evaluation: 'metrics/<label>/'

    @property
    def log_level(self) -> LogLevel:
        """The most verbose level printed."""
        return self._interval.log_level

    def init(self, state: State, logger: Logger) -> None:
        del logger
        self._left_to_progress = any(isinstance(c, ProgressBarLogger) and c.mode != "off" for c in state.callbacks)

    def eval_start(self, state: State, logger: Logger) -> None:
        del logger
        self._eval_prefix = f"metrics/{state.dataloader_label}/"

    def eval_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self._eval_prefix = None

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        return self._interval.will_log(state, log_level)

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        prefix = self._eval_prefix
        if self._left_to_progress and prefix is not None:
            data = {key: value for key, value in data.items() if not key.startswith(prefix)}
            if not data:
                return
        stream = self._stream if self._stream is not None else sys.stderr
        print(format_record(timestamp, log_level, data), file=stream)

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Prints ``[LEVEL][epoch=E batch=B]: name:`` and then the text, each line indented by two spaces."""
        if self._left_to_progress and log_level != LogLevel.BATCH:  # the progress display prints it
            return
        stream = self._stream if self._stream is not None else sys.stderr
        body = "\n".join("  " + line for line in text.splitlines() or [""])
        print(
            f"[{log_level.name}][epoch={int(timestamp.epoch)} batch={int(timestamp.batch)}]: {name}:\n{body}",
            file=stream,
        )


ConsoleLoggerHparams = hparams_for(ConsoleLogger)
"""See :class:`ConsoleLogger`; the fields are its arguments (YAML key ``console``)."""
