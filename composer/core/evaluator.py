"""Evaluator: a named evaluation set, the metrics to compute on it, and how often to run it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from composer.core.data_spec import Batch, DataSpec, ensure_data_spec
from composer.core.time import Time, TimeUnit

__all__ = ["Evaluator"]

_INTERVAL_UNITS = (TimeUnit.EPOCH, TimeUnit.BATCH)


def _parse_eval_interval(eval_interval: str | int | Time[Any] | None) -> Time[int]:
    if eval_interval is None:
        return Time(1, TimeUnit.EPOCH)
    interval = Time.from_input(eval_interval, default_unit=TimeUnit.EPOCH)
    if interval.unit not in _INTERVAL_UNITS:
        raise ValueError(
            f"Evaluator eval_interval={eval_interval!r} is in {interval.unit.value!r}; expected one of "
            f"{[unit.value for unit in _INTERVAL_UNITS]} (for example '1ep' or '500ba'; an int means epochs)."
        )
    if interval.value <= 0:
        raise ValueError(
            f"Evaluator eval_interval={eval_interval!r} must be positive (for example '1ep' or '500ba'). "
            f"To skip evaluation, leave this evaluator out."
        )
    return interval


class Evaluator:
    """An evaluation set: a label, its data, the names of the metrics to compute on it, and how often to run it.

    Pass evaluators to the trainer to evaluate on several sets, each with its own metrics and interval; the
    trainer logs each metric under the evaluator's label. The trainer checks ``metric_names`` against the model's
    :meth:`~composer.models.ComposerModel.get_metrics`.

    Args:
        label: The name of this evaluation set, used in logged keys (``'eval'``, ``'val_ood'``); not empty.
        dataloader: A :class:`~composer.core.data_spec.DataSpec`, a DataLoader or any iterable of batches; kept as
            a DataSpec.
        metric_names: Names of the model's evaluation metrics to compute. Default: all of them.
        eval_interval: How often to evaluate during training: a time string in epochs or batches (``'2ep'``,
            ``'500ba'``), a :class:`~composer.core.time.Time`, or an int meaning epochs. Default: every epoch.
        subset_num_batches: Evaluate on only this many batches. Default: the whole dataloader.

    Example:
        >>> import torch
        >>> batches = [(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))]
        >>> evaluator = Evaluator(label="eval", dataloader=batches, metric_names=["Accuracy"], eval_interval="100ba")
        >>> evaluator.eval_interval
        Time(100, TimeUnit.BATCH)
        >>> Evaluator(label="eval", dataloader=batches).eval_interval
        Time(1, TimeUnit.EPOCH)
        >>> type(evaluator.dataloader).__name__
        'DataSpec'
    """

    def __init__(
        self,
        *,
        label: str,
        dataloader: DataSpec | Iterable[Batch],
        metric_names: list[str] | None = None,
        eval_interval: str | int | Time[Any] | None = None,
        subset_num_batches: int | None = None,
    ) -> None:
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"Evaluator label must be a non-empty string such as 'eval', got {label!r}.")
        if metric_names is not None:
            if isinstance(metric_names, str) or not all(isinstance(name, str) for name in metric_names):
                raise TypeError(
                    f"Evaluator metric_names must be a list of metric names such as ['Accuracy'], got {metric_names!r}."
                )
            metric_names = list(metric_names)
        if subset_num_batches is not None and (
            isinstance(subset_num_batches, bool) or not isinstance(subset_num_batches, int) or subset_num_batches < 1
        ):
            raise ValueError(
                f"Evaluator subset_num_batches must be a positive int, or None for the whole dataloader; got "
                f"{subset_num_batches!r}."
            )

        self.label = label
        self.dataloader: DataSpec = ensure_data_spec(dataloader)
        self.metric_names: list[str] | None = metric_names
        self.eval_interval: Time[int] = _parse_eval_interval(eval_interval)
        self.subset_num_batches = subset_num_batches

    def __repr__(self) -> str:
        return (
            f"Evaluator(label={self.label!r}, metric_names={self.metric_names!r}, "
            f"eval_interval='{self.eval_interval}', subset_num_batches={self.subset_num_batches!r})"
        )
