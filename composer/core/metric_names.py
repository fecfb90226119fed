"""Evaluation metrics by name, looked up also under the names MosaicML Composer v0.32.1 gave them.

v0.32.1 named a classifier's accuracy after torchmetrics' class, ``MulticlassAccuracy``, and its language-model
metrics ``LanguageCrossEntropy``, ``LanguagePerplexity`` and ``MaskedAccuracy``. This library logs and reports
``Accuracy``, ``CrossEntropy``, ``Perplexity`` and ``TokenAccuracy``; ``state.eval_metrics[label]`` answers the old
names too (a lookup alias only: iterating, logging and checkpoints see this library's names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["METRIC_ALIASES", "EvalMetrics", "MetricsByName"]

METRIC_ALIASES: dict[str, str] = {
    "MulticlassAccuracy": "Accuracy",
    "LanguageCrossEntropy": "CrossEntropy",
    "LanguagePerplexity": "Perplexity",
    "MaskedAccuracy": "TokenAccuracy",
}
"""v0.32.1's metric name -> the name this library gives the same metric."""


class MetricsByName(dict[str, Any]):
    """One evaluator's metrics by name; ``[v0.32.1 name]`` finds the metric under this library's name.

    Example:
        >>> metrics = MetricsByName({"Accuracy": 0.9})
        >>> metrics["MulticlassAccuracy"], list(metrics)
        (0.9, ['Accuracy'])
    """

    def __missing__(self, key: str) -> Any:
        name = METRIC_ALIASES.get(key)
        if name is not None and name in self:
            return self[name]
        also = f" ({key!r} is v0.32.1's name for {name!r})" if name is not None else ""
        raise KeyError(f"{key!r}: no such metric{also}; the metrics are {sorted(self)}")


class EvalMetrics(dict[str, MetricsByName]):
    """``state.eval_metrics``: evaluator label -> :class:`MetricsByName`; a plain mapping stored in it is wrapped.

    Example:
        >>> eval_metrics = EvalMetrics()
        >>> eval_metrics["eval"] = {"Accuracy": 0.5}
        >>> eval_metrics["eval"]["MulticlassAccuracy"]
        0.5
    """

    def __setitem__(self, label: str, metrics: Mapping[str, Any]) -> None:
        super().__setitem__(label, metrics if isinstance(metrics, MetricsByName) else MetricsByName(metrics))
