"""The base of callbacks that stop training on the value of a logged metric."""

from __future__ import annotations

import math
from typing import Any

from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp

__all__ = ["MetricStopper", "infer_mode", "known_metric_names"]

_MODES = ("min", "max")
# A name containing one of these is better when lower.
_LOWER_IS_BETTER = ("loss", "error", "perplexity", "crossentropy", "time/", "memory/")


def infer_mode(name: str) -> str:
    """``'min'`` for a name that reads as a loss, error or cost, else ``'max'``.

    Args:
        name: A logged name, such as ``'loss/train'`` or ``'metrics/eval/Accuracy'``.

    Returns:
        str: ``'min'`` when lower is better, ``'max'`` when higher is.

    Example:
        >>> infer_mode("loss/train"), infer_mode("metrics/eval/CrossEntropy"), infer_mode("metrics/eval/Accuracy")
        ('min', 'min', 'max')
    """
    lowered = name.lower()
    return "min" if any(word in lowered for word in _LOWER_IS_BETTER) else "max"


def known_metric_names(state: State) -> list[str]:
    """The names that will be logged during training, as far as they can be known before it starts.

    They are ``loss/train``, ``metrics/<label>/<name>`` for every evaluator and each metric it computes, and the
    names that callbacks declare through a ``metric_names(state)`` method (the monitors in this package do).

    Args:
        state: The training state, whose evaluators and callbacks are read.

    Returns:
        list[str]: The names, in that order.
    """
    names = ["loss/train"]
    get_metrics = getattr(state.model, "get_metrics", None)
    eval_metrics: list[str] = list(get_metrics(is_train=False)) if callable(get_metrics) else []
    for evaluator in state.evaluators:
        chosen = evaluator.metric_names if evaluator.metric_names is not None else eval_metrics
        names += [f"metrics/{evaluator.label}/{name}" for name in chosen]
    for callback in state.callbacks:
        declared = getattr(callback, "metric_names", None)
        if callable(declared):
            names += list(declared(state))
    return list(dict.fromkeys(names))


class MetricStopper(LoggerDestination):
    """Watches one logged metric and calls :meth:`State.stop_training` when :meth:`should_stop` says so.

    It is a logger destination: it receives every logged value (at ``INIT`` it adds itself to the logger's
    destinations when it was passed as a plain callback) and keeps those of ``monitor``. It judges them at the
    ``BATCH_CHECKPOINT`` and ``EPOCH_CHECKPOINT`` events, which come after everything logged for the batch or the
    epoch (the loss, the evaluations, the other callbacks' values), and stopping takes effect there. At
    ``FIT_START`` it checks that ``monitor`` is a name training will log (see :func:`known_metric_names`), so a typo
    fails before the first batch.

    Args:
        monitor (str): The logged name, for example ``'metrics/eval/Accuracy'`` or ``'loss/train'``.
        mode (str, optional): ``'min'`` (lower is better) or ``'max'``; default: :func:`infer_mode`.
    """

    def __init__(self, monitor: str, mode: str | None = None) -> None:
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor={monitor!r} must be the name of a logged metric, e.g. 'metrics/eval/Accuracy'.")
        if mode is None:
            mode = infer_mode(monitor)
        if mode not in _MODES:
            raise ValueError(f"mode={mode!r} is not supported; expected one of {list(_MODES)} (or None to infer).")
        self.monitor = monitor
        self.mode = mode
        self._pending: list[tuple[Timestamp, Any]] = []

    def better(self, value: float, reference: float, margin: float = 0.0) -> bool:
        """Whether ``value`` beats ``reference`` by more than ``margin`` in this stopper's direction."""
        return value < reference - margin if self.mode == "min" else value > reference + margin

    def should_stop(self, state: State, timestamp: Timestamp, value: float) -> str | None:
        """Judges one new value of the metric; returns why training should stop, or None to go on."""
        raise NotImplementedError(f"{type(self).__name__} must implement should_stop(state, timestamp, value).")

    def init(self, state: State, logger: Logger) -> None:
        del state
        if self not in logger.destinations:
            logger.destinations.append(self)

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        known = known_metric_names(state)
        if self.monitor not in known:
            raise ValueError(
                f"{type(self).__name__}(monitor={self.monitor!r}): no such metric is logged in this run. The names "
                f"known before training are {known}. Check the spelling, the evaluator's label and its metric names; "
                "a custom callback that logs other names can list them in a metric_names(state) method."
            )
        self._pending.clear()

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        del log_level
        if self.monitor in data:
            self._pending.append((timestamp, data[self.monitor]))

    def _judge(self, state: State) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        for timestamp, raw in pending:
            value = float(raw.item() if hasattr(raw, "item") else raw)
            if math.isnan(value):
                continue  # a NaN is never an improvement, nor past a threshold
            reason = self.should_stop(state, timestamp, value)
            if reason is not None:
                state.stop_training(reason)
                return

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        self._judge(state)

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        self._judge(state)
