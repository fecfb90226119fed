"""Stops training once a logged metric has stopped improving for a while."""

from __future__ import annotations

from typing import Any

from composer.callbacks.metric_stopper import MetricStopper
from composer.core.hparams import hparams_for
from composer.core.state import State
from composer.core.time import Time, Timestamp, TimeUnit

__all__ = ["EarlyStopper", "EarlyStopperHparams"]


class EarlyStopper(MetricStopper):
    """Stops training when ``monitor`` has not improved on its best value for ``patience``.

    Each new value of the metric is compared with the best so far; one that beats it by more than ``min_delta``
    becomes the new best. When the time since the best value (measured in the unit of ``patience``, on the trainer's
    clock when the value is judged) reaches ``patience``, the callback calls ``state.stop_training``: the current
    batch or epoch finishes, its evaluation and checkpoint run, and ``fit`` returns. The best value and when it was
    reached are saved with checkpoints.

    Args:
        monitor (str): The logged name, e.g. ``'metrics/eval/Accuracy'`` or ``'loss/train'``; checked at the start
            of ``fit``.
        mode (str, optional): ``'min'`` or ``'max'``; default: ``'min'`` for names that read as a loss or error.
        min_delta (float): How much better than the best a value must be to count as an improvement.
        patience (str | Time | int): How long to wait for an improvement: ``'3ep'``, ``'500ba'``, ``'1e5sp'``,
            ``'0.1dur'``; an int means epochs.

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> eval_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(8, 8, 3, seed=1), batch_size=4)
        >>> frozen = torch.optim.SGD(model.parameters(), lr=0.0)  # the accuracy never improves
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, eval_dataloader=eval_dataloader,
        ...                   max_duration="20ep", optimizers=frozen, progress_bar=False,
        ...                   callbacks=[EarlyStopper("metrics/eval/Accuracy", patience="2ep")])
        >>> trainer.fit()
        >>> int(trainer.state.timer.epoch)  # best after epoch 1, no better after epochs 2 and 3
        3
        >>> trainer.close()
    """

    def __init__(
        self,
        monitor: str,
        mode: str | None = None,
        min_delta: float = 0.0,
        patience: str | Time[Any] | int = 1,
    ) -> None:
        super().__init__(monitor, mode)
        if not min_delta >= 0:
            raise ValueError(f"min_delta={min_delta!r} must be a non-negative number (0.0 counts any improvement).")
        try:
            parsed = Time.from_input(patience, default_unit=TimeUnit.EPOCH)
        except (TypeError, ValueError) as error:
            raise ValueError(f"patience={patience!r} is not a time: {error}. For example '3ep' or '500ba'.") from None
        if not parsed.value > 0:
            raise ValueError(f"patience={patience!r} must be positive, for example '3ep' or '500ba'.")
        self.min_delta = float(min_delta)
        self.patience: Time[Any] = parsed
        self.best: float | None = None
        self.best_at: float | None = None  # the clock, in the unit of patience, when best was reached

    def _clock(self, state: State) -> float:
        if self.patience.unit == TimeUnit.DURATION:
            return float(state.get_elapsed_duration().value)
        return float(state.timer.get(self.patience.unit).value)

    def should_stop(self, state: State, timestamp: Timestamp, value: float) -> str | None:
        now = self._clock(state)
        if self.best is None or self.best_at is None or self.better(value, self.best, self.min_delta):
            self.best, self.best_at = value, now
            return None
        if now - self.best_at < self.patience.value:
            return None
        return (
            f"EarlyStopper: {self.monitor} has not improved on its best, {self.best:.6g}, for {self.patience} "
            f"(min_delta={self.min_delta}, mode={self.mode!r}; last value {value:.6g} at batch {int(timestamp.batch)})."
        )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_at": self.best_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_at = state["best"], state["best_at"]


EarlyStopperHparams = hparams_for(EarlyStopper)
"""See :class:`EarlyStopper`; the fields are its arguments (YAML key ``early_stopper``)."""
