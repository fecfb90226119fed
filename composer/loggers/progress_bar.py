"""A tqdm progress bar for training and evaluation."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp

__all__ = ["ProgressBarLogger"]


def _scalar(value: Any) -> Any:
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "numel", lambda: 0)() == 1:
        return item()
    return value


class ProgressBarLogger(LoggerDestination):
    """Shows a tqdm bar per training epoch and per evaluation, with the latest loss and metrics.

    The bar is written to ``stream`` (standard error by default). With ``enabled=None`` it shows only when that
    stream is a terminal, so scripts, notebooks' captured output and doctests print nothing per batch.

    Args:
        enabled (bool | None): Force the bar on or off; None decides by whether ``stream`` is a terminal.
        stream (TextIO, optional): Where to draw. Default: ``sys.stderr``.
        refresh_seconds (float): The loss shown is refreshed at most this often (reading a GPU loss syncs).
    """

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None, refresh_seconds: float = 0.5) -> None:
        self._stream = stream
        self._enabled = enabled
        self.refresh_seconds = refresh_seconds
        self._bar: Any = None
        self._eval_bar: Any = None
        self._latest: dict[str, Any] = {}
        self._last_refresh = 0.0

    @property
    def stream(self) -> TextIO:
        """The stream the bars are drawn on."""
        return self._stream if self._stream is not None else sys.stderr

    @property
    def enabled(self) -> bool:
        """Whether bars are drawn."""
        if self._enabled is None:
            return bool(getattr(self.stream, "isatty", lambda: False)())
        return self._enabled

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        del timestamp, log_level
        self._latest.update(data)

    def _new_bar(self, total: int | None, desc: str, position: int) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=total, desc=desc, position=position, leave=position == 0, file=self.stream, dynamic_ncols=True
        )

    def epoch_start(self, state: State, logger: Logger) -> None:
        del logger
        if not self.enabled:
            return
        total = state.steps_per_epoch
        if total is not None and state.max_duration.unit.value == "ba":
            total = min(total, state.max_duration.value - state.timer.batch.value + state.timer.batch_in_epoch.value)
        self._bar = self._new_bar(total, f"Epoch {state.epoch}", 0)

    def batch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._bar is None:
            return
        self._bar.update(1)
        now = time.monotonic()
        if now - self._last_refresh >= self.refresh_seconds and "loss/train" in self._latest:
            self._last_refresh = now
            self._bar.set_postfix({"loss": f"{_scalar(self._latest['loss/train']):.4f}"}, refresh=False)

    def epoch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def eval_start(self, state: State, logger: Logger) -> None:
        del logger
        if not self.enabled:
            return
        try:
            total: int | None = len(state.dataloader)  # type: ignore[arg-type]
        except TypeError:
            total = None
        self._eval_bar = self._new_bar(total, f"Eval {state.dataloader_label}", 1 if self._bar is not None else 0)

    def eval_batch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._eval_bar is not None:
            self._eval_bar.update(1)

    def eval_end(self, state: State, logger: Logger) -> None:
        del logger
        if self._eval_bar is None:
            return
        prefix = f"metrics/{state.dataloader_label}/"
        shown = {k.removeprefix(prefix): f"{_scalar(v):.4f}" for k, v in self._latest.items() if k.startswith(prefix)}
        self._eval_bar.set_postfix(shown, refresh=True)
        self._eval_bar.close()
        self._eval_bar = None

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        for bar in (self._eval_bar, self._bar):
            if bar is not None:
                bar.close()
        self._bar = self._eval_bar = None
