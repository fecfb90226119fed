"""The Trainer's learning-rate schedulers: composer scheduler functions and torch schedulers, and when they step."""

from __future__ import annotations

from typing import Any

from torch.optim.lr_scheduler import LRScheduler

from composer.core.state import State
from composer.optim.scheduler import to_lambda_lr

__all__ = ["TrainerSchedulers"]


class TrainerSchedulers:
    """Sorts the schedulers given to the Trainer and steps each at the right time.

    Composer scheduler functions ``(state, ssr) -> multiplier`` are multiplied together, compiled into one
    ``LambdaLR`` per optimizer and stepped after every batch (so batch ``n`` trains at the multiplier for time
    ``n``). Torch schedulers step every batch, or every epoch with ``step_every_batch=False``.

    Args:
        state (State): The training state; its ``optimizers`` must be final, and ``schedulers`` is filled in.
        schedulers (Any): None, one scheduler, or a sequence of them.
        ssr (float): The scale schedule ratio handed to composer schedulers.
        step_every_batch (bool): When torch schedulers step.
    """

    def __init__(self, state: State, schedulers: Any, ssr: float, step_every_batch: bool) -> None:
        given = (
            [] if schedulers is None else list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
        )
        torch_schedulers = [s for s in given if isinstance(s, LRScheduler)]
        functions = [s for s in given if not isinstance(s, LRScheduler)]
        for s in functions:
            if not callable(s):
                raise TypeError(
                    f"schedulers must be composer scheduler functions (state, ssr) -> float or torch LRSchedulers; "
                    f"got {type(s).__name__}."
                )
        compiled = (
            [to_lambda_lr(functions, state, ssr=ssr, optimizer=opt) for opt in state.optimizers] if functions else []
        )
        self.per_batch: list[Any] = compiled + (torch_schedulers if step_every_batch else [])
        self.per_epoch: list[Any] = [] if step_every_batch else torch_schedulers
        state.schedulers = torch_schedulers + compiled

    def step_batch(self) -> None:
        """Steps the per-batch schedulers (after the timer counted the batch)."""
        for scheduler in self.per_batch:
            scheduler.step()

    def step_epoch(self) -> None:
        """Steps the per-epoch schedulers (after the timer counted the epoch)."""
        for scheduler in self.per_epoch:
            scheduler.step()
