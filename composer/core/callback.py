"""The Callback base class: observes the training loop at every Event without changing it."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from composer.core.serializable import Serializable

if TYPE_CHECKING:
    from composer.core.event import Event
    from composer.core.logging.logger import Logger
    from composer.core.state import State

__all__ = ["Callback"]


class Callback(Serializable, abc.ABC):
    """Base class for callbacks: one no-op method per :class:`~composer.core.event.Event`, named ``event.value``.

    Callbacks observe; they do not change the :class:`~composer.core.state.State` (algorithms do that). The one
    sanctioned exception is ending the run with :meth:`State.stop_training`. Override the methods of the events you
    need, or override :meth:`run_event` to handle every event in one place (the per-event methods are then no longer
    called unless ``run_event`` calls them).

    As in the seed, the class derives from :class:`abc.ABC` to mark it as a base to subclass, yet declares no abstract
    method: every hook has a no-op default, so a subclass that overrides none of them is still instantiable.

    Example:
        >>> from composer import Callback, Event, Trainer
        >>> import torch
        >>> from torch.utils.data import DataLoader
        >>> from composer.core import State
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = DataLoader(SyntheticClassificationDataset(16, shape=8, num_classes=3), batch_size=4)
        >>> eval_dataloader = DataLoader(SyntheticClassificationDataset(8, shape=8, num_classes=3, seed=1), batch_size=4)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> state = State(model=model, max_duration="1ep", steps_per_epoch=4)
        >>> class MyCallback(Callback):
        ...     def epoch_start(self, state, logger):
        ...         print(f"Epoch: {int(state.timer.epoch)}")
        >>> trainer = Trainer(
        ...     model=model,
        ...     train_dataloader=train_dataloader,
        ...     eval_dataloader=eval_dataloader,
        ...     optimizers=optimizer,
        ...     max_duration="1ep",
        ...     callbacks=[MyCallback()],
        ... )
        >>> _ = trainer.engine.run_event(Event.EPOCH_START)
        Epoch: 0
        >>> trainer.engine.close()
    """

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        """Called by the engine at every event; calls the method named ``event.value``.

        Args:
            event (Event): The event.
            state (State): The training state.
            logger (Logger): The logger.
        """
        getattr(self, event.value)(state, logger)

    def init(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.INIT`."""
        del state, logger

    def fit_start(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.FIT_START`."""
        del state, logger

    def epoch_start(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EPOCH_START`."""
        del state, logger

    def after_dataloader(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.AFTER_DATALOADER`."""
        del state, logger

    def batch_start(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BATCH_START`."""
        del state, logger

    def before_train_batch(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BEFORE_TRAIN_BATCH`."""
        del state, logger

    def before_forward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BEFORE_FORWARD`."""
        del state, logger

    def after_forward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.AFTER_FORWARD`."""
        del state, logger

    def before_loss(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BEFORE_LOSS`."""
        del state, logger

    def after_loss(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.AFTER_LOSS`."""
        del state, logger

    def before_backward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BEFORE_BACKWARD`."""
        del state, logger

    def after_backward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.AFTER_BACKWARD`."""
        del state, logger

    def after_train_batch(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.AFTER_TRAIN_BATCH`."""
        del state, logger

    def batch_end(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BATCH_END`; the timer's batch, sample and token counters already count this batch."""
        del state, logger

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.BATCH_CHECKPOINT`."""
        del state, logger

    def epoch_end(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EPOCH_END`; ``timer.epoch`` already counts this epoch."""
        del state, logger

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EPOCH_CHECKPOINT`."""
        del state, logger

    def fit_end(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.FIT_END`."""
        del state, logger

    def eval_start(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_START`."""
        del state, logger

    def eval_batch_start(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_BATCH_START`."""
        del state, logger

    def eval_before_forward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_BEFORE_FORWARD`."""
        del state, logger

    def eval_after_forward(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_AFTER_FORWARD`."""
        del state, logger

    def eval_batch_end(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_BATCH_END`."""
        del state, logger

    def eval_end(self, state: State, logger: Logger) -> None:
        """Called on :attr:`Event.EVAL_END`."""
        del state, logger

    def close(self, state: State, logger: Logger) -> None:
        """Called once when the trainer closes, also after an exception: flush and close what INIT opened."""
        del state, logger

    def post_close(self) -> None:
        """Called after every callback's :meth:`close` succeeded: for work that needs the others' files closed."""
