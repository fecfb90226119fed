"""The learning rate of every optimizer parameter group, every batch."""

from __future__ import annotations

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import TimeUnit

__all__ = ["LRMonitor", "LRMonitorHparams"]


def _optimizer_names(state: State) -> list[str]:
    names = [type(optimizer).__name__ for optimizer in state.optimizers]
    # Two optimizers of one class get their position appended, so their keys stay apart.
    return [f"{name}-{i}" if names.count(name) > 1 else name for i, name in enumerate(names)]


class LRMonitor(Callback):
    """Logs ``lr-<OptimizerClass>/group<i>``, the learning rate of each parameter group, every batch (BATCH level).

    It reads the rates at ``AFTER_TRAIN_BATCH``, just before the optimizer step, so the value logged at batch ``n``
    is the rate that batch ``n``'s update uses (the rate a scheduler produced for time ``n``). When the optimizer
    re-runs the batch (SAM's closure), the rate is logged once.

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> from composer.optim import linear_scheduler
        >>> memory = InMemoryLogger()
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   optimizers=torch.optim.SGD(model.parameters(), lr=1.0), schedulers=linear_scheduler,
        ...                   callbacks=[LRMonitor()], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.values("lr-SGD/group0")
        [1.0, 0.75, 0.5, 0.25]
        >>> trainer.close()
    """

    def __init__(self) -> None:
        self._last_batch = -1
        self._names: list[str] = []

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        return [
            f"lr-{name}/group{i}"
            for name, optimizer in zip(_optimizer_names(state), state.optimizers)
            for i in range(len(optimizer.param_groups))
        ]

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        self._last_batch = -1
        self._names = _optimizer_names(state)

    def after_train_batch(self, state: State, logger: Logger) -> None:
        batch = state.timer.count(TimeUnit.BATCH)
        if batch == self._last_batch:
            return
        self._last_batch = batch
        if len(self._names) != len(state.optimizers):
            self._names = _optimizer_names(state)
        names, optimizers = self._names, state.optimizers
        # Built only if a destination logs BATCH values now.
        logger.metric_batch(
            lambda: {
                f"lr-{name}/group{i}": group["lr"]
                for name, optimizer in zip(names, optimizers)
                for i, group in enumerate(optimizer.param_groups)
            }
        )


LRMonitorHparams = hparams_for(LRMonitor)
"""See :class:`LRMonitor`; the fields are its arguments (YAML key ``lr_monitor``)."""
