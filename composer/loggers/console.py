"""Plain-text metrics on the console."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp

__all__ = ["ConsoleLogger"]


def _format(value: Any) -> str:
    if hasattr(value, "numel") and value.numel() == 1:
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


class ConsoleLogger(LoggerDestination):
    """Prints logged values, one line per call, to standard error (or ``stream``).

    Args:
        log_level (LogLevel | str): The most verbose level printed (default: EPOCH, so per-batch values are not).
        stream (TextIO, optional): Where to print. Default: ``sys.stderr``.

    Example:
        >>> import io
        >>> from composer.core.time import Timer
        >>> out = io.StringIO()
        >>> console = ConsoleLogger(stream=out)
        >>> console.log_metric(Timer().get_timestamp(), LogLevel.EPOCH, {"metrics/eval/Accuracy": 0.5})
        >>> out.getvalue()
        '[EPOCH][epoch=0 batch=0]: metrics/eval/Accuracy: 0.5000\\n'
    """

    def __init__(self, log_level: LogLevel | str = LogLevel.EPOCH, stream: TextIO | None = None) -> None:
        self.log_level = LogLevel.parse(log_level)
        self._stream = stream

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        del state
        return log_level <= self.log_level

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        values = ", ".join(f"{k}: {_format(v)}" for k, v in data.items())
        stream = self._stream if self._stream is not None else sys.stderr
        print(f"[{log_level.name}][epoch={int(timestamp.epoch)} batch={int(timestamp.batch)}]: {values}", file=stream)
