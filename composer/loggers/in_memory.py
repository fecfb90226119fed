"""Keeps logged values in memory, for tests, notebooks and callbacks that read metrics back."""

from __future__ import annotations

from typing import Any

from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp

__all__ = ["InMemoryLogger"]


class InMemoryLogger(LoggerDestination):
    """Records every value logged at or below ``log_level``.

    Args:
        log_level (LogLevel | str): The most verbose level kept (default: BATCH, i.e. everything).

    Attributes:
        data (dict): Key -> list of ``(timestamp, log_level, value)``, in logging order.
        most_recent_values (dict): Key -> the latest value.
    """

    def __init__(self, log_level: LogLevel | str = LogLevel.BATCH) -> None:
        self.log_level = LogLevel.parse(log_level)
        self.data: dict[str, list[tuple[Timestamp, LogLevel, Any]]] = {}
        self.most_recent_values: dict[str, Any] = {}

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        del state
        return log_level <= self.log_level

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        for key, value in data.items():
            self.data.setdefault(key, []).append((timestamp, log_level, value))
            self.most_recent_values[key] = value

    def values(self, key: str) -> list[Any]:
        """Every value logged under ``key``, as Python numbers where they are one-element tensors."""
        if key not in self.data:
            raise KeyError(f"Nothing was logged under {key!r}; logged keys: {sorted(self.data)}.")
        return [v.item() if hasattr(v, "item") and v.numel() == 1 else v for _, _, v in self.data[key]]
