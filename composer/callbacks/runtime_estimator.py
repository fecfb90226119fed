"""The time left in the whole run, evaluation included, learned from the measured batch and evaluation times."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit

__all__ = ["RuntimeEstimator", "RuntimeEstimatorHparams", "estimate_remaining_seconds", "remaining_schedule"]


def _multiples(k: int, low: int, high: int) -> int:
    # How many multiples of k lie in [low, high].
    return max(0, high // k - (low - 1) // k) if high >= low else 0


def remaining_schedule(
    *,
    batch: int,
    epoch: int,
    batch_in_epoch: int,
    max_duration: Time[Any],
    steps_per_epoch: int | None,
    elapsed_fraction: float,
    eval_intervals: Mapping[str, Time[int]],
) -> tuple[float, dict[str, int]] | None:
    """The batches left to train and the evaluations left to run, seen from just after a batch (its ``BATCH_END``).

    The Trainer evaluates an evaluator with an interval of ``k`` batches after every batch whose count is a multiple of
    ``k`` (the evaluation of the batch just completed is still to come), and one of ``k`` epochs at the end of every
    epoch whose count is a multiple of ``k``; an epoch also ends when the run ends inside it.

    Args:
        batch (int): Batches completed (``timer.batch``, this batch included).
        epoch (int): Epochs completed (``timer.epoch``; the current one is not).
        batch_in_epoch (int): Batches completed in the current epoch.
        max_duration (Time): The run's length (``state.max_duration``).
        steps_per_epoch (int, optional): Batches per epoch, when known.
        elapsed_fraction (float): The fraction of the run done (``state.get_elapsed_duration()``): the estimate for a
            duration in samples or tokens, or in epochs of unknown length.
        eval_intervals (Mapping[str, Time[int]]): Each evaluator's label and interval (batches or epochs).

    Returns:
        tuple[float, dict[str, int]] | None: The batches left (a whole number when the duration is in batches, or in
        epochs of known length) and the evaluations left per label; None when nothing is known yet (no fraction done
        of a duration in samples or tokens).

    Example:
        >>> from composer.core.time import Time
        >>> # 10 epochs of 4 batches; after batch 6 (epoch 1, 2 batches into it); eval every 3 batches and every 2 epochs
        >>> remaining_schedule(batch=6, epoch=1, batch_in_epoch=2, max_duration=Time.from_input("10ep"),
        ...                    steps_per_epoch=4, elapsed_fraction=6 / 40,
        ...                    eval_intervals={"a": Time.from_input("3ba"), "b": Time.from_input("2ep")})
        (34, {'a': 12, 'b': 5})
    """
    unit, total = max_duration.unit, max_duration.value
    batches_left: float | None
    if unit == TimeUnit.BATCH:
        batches_left = max(0, total - batch)
    elif unit == TimeUnit.EPOCH and steps_per_epoch:
        batches_left = max(0, (steps_per_epoch - batch_in_epoch) + (total - epoch - 1) * steps_per_epoch)
    elif elapsed_fraction > 0:
        batches_left = max(0.0, batch * (1 - elapsed_fraction) / elapsed_fraction)
    else:
        return None
    # Epoch ends still to come, the current epoch's included.
    if unit == TimeUnit.EPOCH:
        epoch_ends = max(1, total - epoch)
    elif steps_per_epoch:
        in_this_epoch = steps_per_epoch - batch_in_epoch
        epoch_ends = 1 + max(0, math.ceil((batches_left - in_this_epoch) / steps_per_epoch))
    else:
        epoch_ends = 1
    last_batch = batch + math.floor(batches_left)
    evaluations = {}
    for label, interval in eval_intervals.items():
        k = interval.value
        if interval.unit == TimeUnit.BATCH:
            evaluations[label] = _multiples(k, batch, last_batch)
        else:
            evaluations[label] = _multiples(k, epoch + 1, epoch + epoch_ends)
    return batches_left, evaluations


def estimate_remaining_seconds(
    batches_left: float,
    evaluations_left: Mapping[str, int],
    seconds_per_batch: float,
    seconds_per_evaluation: Mapping[str, float],
) -> float:
    """``batches_left x seconds_per_batch + sum over evaluators of evaluations left x seconds per evaluation``.

    Args:
        batches_left (float): Batches still to train.
        evaluations_left (Mapping[str, int]): Evaluations still to run, per evaluator label.
        seconds_per_batch (float): The measured training time of a batch.
        seconds_per_evaluation (Mapping[str, float]): The measured time of one evaluation per label; a label not
            measured yet counts 0.

    Returns:
        float: The estimate, in seconds.

    Example:
        >>> estimate_remaining_seconds(34, {"a": 12, "b": 5}, 0.5, {"a": 2.0})
        41.0
    """
    evaluation = sum(n * seconds_per_evaluation.get(label, 0.0) for label, n in evaluations_left.items())
    return batches_left * seconds_per_batch + evaluation


class RuntimeEstimator(Callback):
    """Logs ``time/eta``, the seconds left in the whole run, evaluations included, every batch (BATCH level).

    It measures the time of each training batch (from ``AFTER_TRAIN_BATCH`` to the next, so data loading and
    checkpointing count, and evaluations do not) and of each evaluation, per evaluator, and logs the time left after
    the batch in progress at its ``AFTER_TRAIN_BATCH`` (stamped with the batch's index). The estimate is the mean batch
    time times the batches left, plus each evaluator's mean evaluation time times its evaluations left under the
    Trainer's schedule (:func:`remaining_schedule`); an evaluator that has not run yet counts 0 until it has. The first
    ``skip_batches`` batches of every ``fit`` are not measured (warm-up: allocation, compilation, the dataloader's
    workers starting), so the first estimate is logged at batch ``skip_batches`` (0-based). The measured times are
    saved in checkpoints. The progress bar shows the estimate (``eta=``) when it is logged.

    Args:
        skip_batches (int): Batches at the start of each ``fit`` that are not measured.
        time_fn (Callable[[], float]): The clock, in seconds (default: :func:`time.monotonic`); tests pass a fake.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   callbacks=[RuntimeEstimator(skip_batches=1)], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("time/eta"), memory.values("time/eta")[-1]
        ([1, 2, 3], 0.0)
        >>> trainer.close()
    """

    def __init__(self, skip_batches: int = 1, time_fn: Callable[[], float] = time.monotonic) -> None:
        if isinstance(skip_batches, bool) or not isinstance(skip_batches, int) or skip_batches < 0:
            raise ValueError(f"skip_batches={skip_batches!r} must be a whole number of batches, 0 or more (e.g. 1).")
        self.skip_batches = skip_batches
        self._time_fn = time_fn
        self._batch_seconds = 0.0  # measured batches: total time and count
        self._batches = 0
        self._eval_seconds: dict[str, list[float]] = {}  # label -> [total seconds, evaluations]
        self._in_fit = False
        self._seen_in_fit = 0
        self._last_mark = 0.0
        self._eval_since_mark = 0.0  # evaluation time since the last mark
        self._last_batch = -1
        self._eval_started = 0.0

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        del state
        return ["time/eta"]

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._in_fit = True
        self._seen_in_fit = 0
        self._last_batch = -1
        self._eval_since_mark = 0.0
        self._last_mark = self._time_fn()

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self._in_fit = False

    def after_train_batch(self, state: State, logger: Logger) -> None:
        # Measured and logged here, before the optimizer step and BATCH_END, so that the progress bar (which draws at
        # BATCH_END, before the callbacks run there) has the estimate of the batch it draws.
        batch = state.timer.batch.value
        if batch == self._last_batch:  # SAM's second pass
            return
        self._last_batch = batch
        now = self._time_fn()
        seconds = now - self._last_mark - self._eval_since_mark
        self._last_mark, self._eval_since_mark = now, 0.0
        self._seen_in_fit += 1
        if self._seen_in_fit > self.skip_batches:
            self._batch_seconds += seconds
            self._batches += 1
        if self._batches:
            logger.metric_batch(lambda: self._eta(state))

    def eval_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._eval_started = self._time_fn()

    def eval_end(self, state: State, logger: Logger) -> None:
        del logger
        if not self._in_fit:  # Trainer.eval() outside fit is no part of the run's schedule
            return
        seconds = self._time_fn() - self._eval_started
        self._eval_since_mark += seconds
        total = self._eval_seconds.setdefault(str(state.dataloader_label), [0.0, 0.0])
        total[0] += seconds
        total[1] += 1

    def _eta(self, state: State) -> dict[str, float]:
        timer = state.timer
        schedule = remaining_schedule(  # as of the end of the batch in progress
            batch=timer.batch.value + 1,
            epoch=timer.epoch.value,
            batch_in_epoch=timer.batch_in_epoch.value + 1,
            max_duration=state.max_duration,
            steps_per_epoch=state.steps_per_epoch,
            elapsed_fraction=float(state.get_elapsed_duration().value),
            eval_intervals=_intervals(state.evaluators),
        )
        if schedule is None:
            return {}
        per_evaluation = {label: total / count for label, (total, count) in self._eval_seconds.items() if count}
        seconds = estimate_remaining_seconds(*schedule, self._batch_seconds / self._batches, per_evaluation)
        return {"time/eta": seconds}

    def state_dict(self) -> dict[str, Any]:
        return {
            "batch_seconds": self._batch_seconds,
            "batches": self._batches,
            "eval_seconds": {label: list(values) for label, values in self._eval_seconds.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._batch_seconds = float(state["batch_seconds"])
        self._batches = int(state["batches"])
        self._eval_seconds = {str(k): [float(v[0]), float(v[1])] for k, v in state["eval_seconds"].items()}


def _intervals(evaluators: Sequence[Any]) -> dict[str, Time[int]]:
    return {str(e.label): e.eval_interval for e in evaluators}


RuntimeEstimatorHparams = hparams_for(RuntimeEstimator)
"""See :class:`RuntimeEstimator`; the fields are its arguments (YAML key ``runtime_estimator``)."""
