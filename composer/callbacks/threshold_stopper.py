"""Stops training once a logged metric reaches a target value."""

from __future__ import annotations

from composer.callbacks.metric_stopper import MetricStopper
from composer.core.hparams import hparams_for
from composer.core.state import State
from composer.core.time import Timestamp

__all__ = ["ThresholdStopper", "ThresholdStopperHparams"]


class ThresholdStopper(MetricStopper):
    """Stops training as soon as ``monitor`` reaches ``threshold`` (``>=`` for ``mode='max'``, ``<=`` for ``'min'``).

    Use it to train "until 95% accuracy" or "until the loss is below 0.1". The current batch or epoch finishes,
    its evaluation and checkpoint run, and ``fit`` returns.

    Args:
        monitor (str): The logged name, e.g. ``'metrics/eval/Accuracy'``; checked at the start of ``fit``.
        threshold (float): The target value.
        mode (str, optional): ``'min'`` or ``'max'``; default: ``'min'`` for names that read as a loss or error.

    Example:
        >>> import torch
        >>> from composer import ComposerClassifier, Trainer
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> model = ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="10ep",
        ...                   optimizers=torch.optim.SGD(model.parameters(), lr=0.1), progress_bar=False,
        ...                   callbacks=[ThresholdStopper("loss/train", threshold=100.0)])
        >>> trainer.fit()
        >>> int(trainer.state.timer.batch)  # the first loss is below 100: stop after the first batch
        1
        >>> trainer.close()
    """

    def __init__(self, monitor: str, threshold: float, mode: str | None = None) -> None:
        super().__init__(monitor, mode)
        self.threshold = float(threshold)

    def should_stop(self, state: State, timestamp: Timestamp, value: float) -> str | None:
        del state
        reached = value >= self.threshold if self.mode == "max" else value <= self.threshold
        if not reached:
            return None
        sign = ">=" if self.mode == "max" else "<="
        return f"ThresholdStopper: {self.monitor} = {value:.6g} {sign} {self.threshold:.6g} at batch {int(timestamp.batch)}."


ThresholdStopperHparams = hparams_for(ThresholdStopper)
"""See :class:`ThresholdStopper`; the fields are its arguments (YAML key ``threshold_stopper``)."""
