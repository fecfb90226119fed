"""Keeps logged values in memory, for tests, notebooks and callbacks that read metrics back."""

from __future__ import annotations

from typing import Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp
from composer.loggers.log_value import to_builtin

__all__ = ["InMemoryLogger", "InMemoryLoggerHparams"]


class InMemoryLogger(LoggerDestination):
    """Records every value logged at or below ``log_level``, as logged (tensors stay tensors until read).

    Args:
        log_level (LogLevel | str): The most verbose level kept (default: BATCH, i.e. everything).

    Attributes:
        data (dict): Key -> list of ``(timestamp, log_level, value)``, in logging order.
        most_recent_values (dict): Key -> the latest value.
        most_recent_timestamps (dict): Key -> the :class:`~composer.core.time.Timestamp` of the latest value.
        images (dict): Name -> list of ``(timestamp, images)`` from :meth:`log_images`.
        texts (dict): Name -> list of ``(timestamp, text)`` from :meth:`log_text`.

    Example:
        >>> from composer import Trainer
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="3ba",
        ...                   loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("loss/train")
        [0, 1, 2]
        >>> all(isinstance(v, float) for v in memory.values("loss/train"))
        True
        >>> trainer.close()
    """

    def __init__(self, log_level: LogLevel | str = LogLevel.BATCH) -> None:
        self.log_level = LogLevel.parse(log_level)
        self.data: dict[str, list[tuple[Timestamp, LogLevel, Any]]] = {}
        self.most_recent_values: dict[str, Any] = {}
        self.most_recent_timestamps: dict[str, Timestamp] = {}
        self.images: dict[str, list[tuple[Timestamp, Any]]] = {}
        self.texts: dict[str, list[tuple[Timestamp, str]]] = {}

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        del state
        return log_level <= self.log_level

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        for key, value in data.items():
            self.data.setdefault(key, []).append((timestamp, log_level, value))
            self.most_recent_values[key] = value
            self.most_recent_timestamps[key] = timestamp

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Keeps ``images`` (a (C, H, W) image or a (N, C, H, W) batch) under ``name``."""
        if log_level <= self.log_level:
            self.images.setdefault(name, []).append((timestamp, images))

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Keeps ``text`` under ``name``."""
        if log_level <= self.log_level:
            self.texts.setdefault(name, []).append((timestamp, text))

    def _records(self, key: str) -> list[tuple[Timestamp, LogLevel, Any]]:
        if key not in self.data:
            raise KeyError(f"Nothing was logged under {key!r}; logged keys: {sorted(self.data)}.")
        return self.data[key]

    def values(self, key: str) -> list[Any]:
        """Every value logged under ``key``, as plain Python (a one-element tensor becomes a number)."""
        return [to_builtin(v) for _, _, v in self._records(key)]

    def steps(self, key: str) -> list[int]:
        """The batch count (``timestamp.batch``) at which each value of ``key`` was logged."""
        return [int(t.batch) for t, _, _ in self._records(key)]

    def get_timeseries(self, key: str) -> dict[str, list[Any]]:
        """The values of ``key`` with every timer counter at which each was logged.

        Returns:
            dict[str, list]: ``{key: values, 'epoch': [...], 'batch': [...], 'batch_in_epoch': [...], 'sample': [...],
            'sample_in_epoch': [...], 'token': [...], 'token_in_epoch': [...]}``, lists of equal length.
        """
        records = self._records(key)
        series: dict[str, list[Any]] = {key: [to_builtin(v) for _, _, v in records]}
        for field in Timestamp._fields:
            series[field] = [int(getattr(t, field)) for t, _, _ in records]
        return series


InMemoryLoggerHparams = hparams_for(InMemoryLogger)
"""See :class:`InMemoryLogger`; the fields are its arguments (YAML key ``in_memory``)."""
