"""Training speed: samples and tokens per second, seconds per batch, and the time left."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import TimeUnit

__all__ = ["SpeedMonitor", "SpeedMonitorHparams"]


class SpeedMonitor(Callback):
    """Logs how fast training runs, on a clock that stops during evaluation and checkpointing.

    Every batch (BATCH level, at ``BATCH_END``):

    * ``time/batch``: seconds of this batch, from the end of the previous batch (so data loading counts);
    * ``time/data_wait``: the part of ``time/batch`` spent before the batch was ready to train on, from the end of
      the previous batch to this callback's ``AFTER_DATALOADER`` handler: waiting for the loader, moving the batch to
      the device, and the methods (and callbacks listed before this one) that transform it at ``AFTER_DATALOADER``;
    * ``time/data_wait_fraction``: the share of the time waiting for data over the last ``window_size`` batches;
      near 1 a run is data-bound (more loader workers, or a faster input pipeline, would speed it up), near 0 the
      model's step is what takes the time;
    * ``throughput/batches_per_sec``, ``throughput/samples_per_sec`` and, when the data counts tokens,
      ``throughput/tokens_per_sec``: over the last ``window_size`` batches;
    * ``time/train``: training seconds since the run began (carried over by checkpoints);
    * ``time/remaining_estimate``: seconds left, ``time/train x (1 - f) / f`` for the fraction ``f`` of the run done.

    Every epoch (EPOCH level): ``time/epoch`` (training seconds of the epoch) and ``throughput/epoch/samples_per_sec``;
    after every evaluation: ``time/eval``.

    The clock stops at this callback's ``BATCH_END`` and restarts at its ``BATCH_CHECKPOINT`` (and at
    ``EPOCH_CHECKPOINT`` and ``EPOCH_START``), so evaluation never counts, and neither does a checkpoint written by a
    callback that runs before this one at the checkpoint events (the Trainer runs its own checkpoint saver first).
    Reading the clock costs no device synchronisation: on a GPU the measured time of one batch may spill into the
    next, which the window averages out.

    Args:
        window_size (int): Batches averaged for the throughput values.

    Example:
        >>> import torch
        >>> from composer import ComposerClassifier, Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory, batches = InMemoryLogger(), [(torch.randn(4, 8), torch.randint(0, 3, (4,)))] * 2
        >>> trainer = Trainer(model=ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3), train_dataloader=batches,
        ...                   max_duration="2ba", callbacks=[SpeedMonitor(window_size=10)], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("throughput/samples_per_sec")
        [1, 2]
        >>> trainer.close()
    """

    def __init__(self, window_size: int = 100) -> None:
        if not isinstance(window_size, int) or window_size < 1:
            raise ValueError(f"window_size={window_size!r} must be a positive number of batches, e.g. 100.")
        self.window_size = window_size
        self._window: deque[tuple[float, int, int, float]] = deque()
        self._window_sums = [0.0, 0, 0, 0.0]  # seconds, samples, tokens, seconds waiting for data in the window
        self._train_seconds = 0.0  # training clock, finished intervals
        self._mark: float | None = None  # when the current interval began; None when the clock is stopped
        self._samples_at_mark = 0
        self._tokens_at_mark = 0
        self._epoch_train_seconds = 0.0
        self._epoch_samples = 0
        self._eval_started_at = 0.0
        self._data_wait = 0.0  # of the current batch

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        del state
        return [
            "time/batch",
            "time/data_wait",
            "time/data_wait_fraction",
            "throughput/batches_per_sec",
            "throughput/samples_per_sec",
            "throughput/tokens_per_sec",
            "time/train",
            "time/remaining_estimate",
            "time/epoch",
            "throughput/epoch/samples_per_sec",
            "time/eval",
        ]

    def _restart(self, state: State) -> None:
        self._mark = time.perf_counter()
        self._samples_at_mark = state.timer.sample.value
        self._tokens_at_mark = state.timer.token.value

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        self._window.clear()
        self._window_sums = [0.0, 0, 0, 0.0]
        self._epoch_train_seconds = 0.0
        self._epoch_samples = 0  # resumed mid-epoch: only what this fit trains is timed
        self._restart(state)

    def epoch_start(self, state: State, logger: Logger) -> None:
        del logger
        self._epoch_train_seconds = 0.0
        self._epoch_samples = 0
        self._restart(state)

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del state, logger
        mark = self._mark
        self._data_wait = 0.0 if mark is None else time.perf_counter() - mark

    def batch_end(self, state: State, logger: Logger) -> None:
        now = time.perf_counter()
        if self._mark is None:
            self._restart(state)
            return
        timer = state.timer
        samples, tokens = timer.count(TimeUnit.SAMPLE), timer.count(TimeUnit.TOKEN)
        seconds = now - self._mark
        num_samples, num_tokens = samples - self._samples_at_mark, tokens - self._tokens_at_mark
        self._train_seconds += seconds
        self._epoch_train_seconds += seconds
        self._epoch_samples += num_samples
        self._mark = None
        self._samples_at_mark, self._tokens_at_mark = samples, tokens

        data_wait, self._data_wait = self._data_wait, 0.0
        window, sums = self._window, self._window_sums
        window.append((seconds, num_samples, num_tokens, data_wait))
        sums[0] += seconds
        sums[1] += num_samples
        sums[2] += num_tokens
        sums[3] += data_wait
        if len(window) > self.window_size:
            old = window.popleft()
            sums[0] -= old[0]
            sums[1] -= old[1]
            sums[2] -= old[2]
            sums[3] -= old[3]
        logger.metric_batch(lambda: self._batch_values(state, seconds, data_wait))

    def _batch_values(self, state: State, seconds: float, data_wait: float) -> dict[str, float]:
        # Computed only if a destination logs BATCH values now.
        sums = self._window_sums
        window_seconds = max(sums[0], 1e-12)
        values = {
            "time/batch": seconds,
            "time/data_wait": data_wait,
            "time/data_wait_fraction": min(1.0, max(0.0, sums[3] / window_seconds)),
            "throughput/batches_per_sec": len(self._window) / window_seconds,
            "throughput/samples_per_sec": sums[1] / window_seconds,
            "time/train": self._train_seconds,
        }
        if sums[2]:
            values["throughput/tokens_per_sec"] = sums[2] / window_seconds
        fraction = float(state.get_elapsed_duration().value)
        if fraction > 0:
            values["time/remaining_estimate"] = max(0.0, self._train_seconds * (1 - fraction) / fraction)
        return values

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        del state, logger
        # The counters were read at BATCH_END and have not moved since: only the clock restarts.
        self._mark = time.perf_counter()

    def epoch_end(self, state: State, logger: Logger) -> None:
        del state
        seconds = self._epoch_train_seconds
        values = {"time/epoch": seconds}
        if seconds > 0:
            values["throughput/epoch/samples_per_sec"] = self._epoch_samples / seconds
        logger.metric_epoch(values)

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        self._restart(state)

    def eval_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._eval_started_at = time.perf_counter()

    def eval_end(self, state: State, logger: Logger) -> None:
        del state
        logger.metric_epoch({"time/eval": time.perf_counter() - self._eval_started_at})

    def state_dict(self) -> dict[str, Any]:
        return {"train_seconds": self._train_seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._train_seconds = float(state["train_seconds"])


SpeedMonitorHparams = hparams_for(SpeedMonitor)
"""See :class:`SpeedMonitor`; the fields are its arguments (YAML key ``speed_monitor``)."""
