"""The Algorithm base class: a two-way callback that may change anything in the training State."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, ClassVar

from composer.core.serializable import Serializable

if TYPE_CHECKING:
    from composer.core.event import Event
    from composer.core.logging.logger import Logger
    from composer.core.state import State

__all__ = ["Algorithm", "evaluated_weights"]


class Algorithm(Serializable, ABC):
    """Base class for speed-up methods that run inside the training loop.

    An algorithm implements :meth:`match` (should it run at this event, in this state?) and :meth:`apply` (change the
    :class:`~composer.core.state.State` in place). The :class:`~composer.core.engine.Engine` calls ``match`` once per
    algorithm at every event and ``apply`` on those that matched. It binds ``event``, ``state`` and ``logger`` by
    parameter name, so an override may list them in any order (or omit the ones it does not need).

    Ordering: at each event the matching algorithms run in the order given to the Trainer; on after-events
    (``AFTER_FORWARD``, ``BATCH_END``, ...) the order is reversed, so undo steps nest. An algorithm that must come
    first (before every other one on before-events, hence last on after-events) sets ``run_first = True``; one that
    must come last sets ``run_last = True``.

    Example:
        >>> from composer import Algorithm, Event, State, Logger
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> class ShortenTraining(Algorithm):
        ...     def match(self, state: State, event: Event, logger: Logger) -> bool:
        ...         return event == Event.FIT_START
        ...     def apply(self, state: State, event: Event, logger: Logger):
        ...         state.max_epochs /= 2  # cut training time in half
        >>> ShortenTraining()
        ShortenTraining()
    """

    run_first: ClassVar[bool] = False
    """Run before all other algorithms (and, by reversal, after them on after-events)."""
    run_last: ClassVar[bool] = False
    """Run after all other algorithms (and, by reversal, before them on after-events)."""

    @property
    def find_unused_parameters(self) -> bool:
        """Whether this algorithm may leave some parameters without gradients (tells DDP to look for them)."""
        return False

    @property
    def backwards_create_graph(self) -> bool:
        """Whether the backward pass must build a graph of the gradients (for higher-order methods)."""
        return False

    def evaluation_weights(self, state: State) -> AbstractContextManager[None]:
        """A context in which ``state.model`` holds the weights this algorithm has evaluation score, if it swaps in
        others than those it trains (EMA's average); checkpoints are written inside it (see :func:`evaluated_weights`).

        Default: the model as it is.

        Args:
            state (State): The training state.

        Returns:
            AbstractContextManager: Entered around the write of a checkpoint.
        """
        del state
        return contextlib.nullcontext()

    @abstractmethod
    def match(self, event: Event, state: State) -> bool:
        """Returns whether this algorithm should run at ``event`` given ``state``.

        Args:
            event (Event): The current event.
            state (State): The current state.

        Returns:
            bool: True if :meth:`apply` should run now.
        """

    @abstractmethod
    def apply(self, event: Event, state: State, logger: Logger) -> int | None:
        """Changes ``state`` in place.

        Args:
            event (Event): The current event.
            state (State): The current state.
            logger (Logger): Where to log the algorithm's own metrics.

        Returns:
            int | None: An optional exit code, stored in the engine's :class:`~composer.core.engine.Trace`.
        """

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


@contextlib.contextmanager
def evaluated_weights(state: State) -> Iterator[None]:
    """Within it, ``state.model`` holds the weights that evaluation scores: every algorithm's
    :meth:`Algorithm.evaluation_weights` is entered, in order, and left in reverse order.

    A checkpoint is written inside it (``composer.utils.checkpoint.save_checkpoint``), so that its model weights are
    the ones evaluation reported, and ``load_weights_only`` loads those; an algorithm that swapped them in keeps the
    weights it trains in its own state, for an exact resumption.

    Args:
        state (State): The training state.

    Example:
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> with evaluated_weights(state):
        ...     weights = state.model.state_dict()  # with EMA in state.algorithms: the average
    """
    with contextlib.ExitStack() as stack:
        for algorithm in state.algorithms:
            stack.enter_context(algorithm.evaluation_weights(state))
        yield
