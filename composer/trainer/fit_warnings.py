"""Warnings at the start of a run for settings that train without error but give a wrong result.

The Trainer calls :func:`warn_before_fit` once per run, after ``Event.FIT_START`` (so that what algorithms set at
``FIT_START`` is seen), for:

* a torch scheduler stepped every batch whose period (``T_max``, ``step_size``, the last of ``milestones``,
  ``total_iters``) is under a quarter of the run's batches: the usual sign of a period counted in epochs
  (``CosineAnnealingLR(opt, T_max=3)`` for a 3-epoch run cycles the learning rate every 3 batches);
* an :class:`~composer.algorithms.EMA` whose half life is over half the run: the average still holds mostly the
  first, untrained weights at the end, and evaluation (which runs on it) stays near chance;
* a checkpoint loaded at or past ``max_duration``: ``fit`` would return at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from torch.optim.lr_scheduler import LRScheduler

from composer.core.state import State
from composer.core.time import TimeUnit
from composer.trainer.checkpointing import Checkpointing

__all__ = [
    "ema_half_life_problems",
    "loaded_past_duration",
    "run_length",
    "scheduler_period_problems",
    "warn_before_fit",
]

# A torch scheduler's attributes that hold its period, in steps.
_PERIOD_ATTRIBUTES = ("T_max", "step_size", "total_iters", "milestones")


def warn_before_fit(state: State, per_batch_schedulers: Sequence[Any], checkpointing: Checkpointing) -> None:
    """Issues a ``UserWarning`` for each problem found (see the module docstring).

    Args:
        state (State): The training state, after ``FIT_START``.
        per_batch_schedulers (Sequence): The schedulers stepped after every batch.
        checkpointing (Checkpointing): The Trainer's checkpoint settings (what was loaded).
    """
    problems = scheduler_period_problems(state, per_batch_schedulers) + ema_half_life_problems(state)
    past = loaded_past_duration(state, checkpointing)
    if past is not None:
        problems.append(past)
    for problem in problems:
        warnings.warn(problem, UserWarning, stacklevel=4)  # the user's fit(): through _fit_loop and fit


def run_length(state: State, unit: TimeUnit) -> float | None:
    """``max_duration`` in batches or epochs (None when the batches per epoch are unknown, or for samples/tokens).

    Example:
        >>> import torch
        >>> state = State(model=torch.nn.Linear(2, 2), max_duration="3ep", steps_per_epoch=45)
        >>> run_length(state, TimeUnit.BATCH), run_length(state, TimeUnit.EPOCH)
        (135, 3)
    """
    duration = state.max_duration
    if duration.unit == unit:
        return duration.value
    per_epoch = state.steps_per_epoch
    if per_epoch is None:
        return None
    if duration.unit == TimeUnit.EPOCH and unit == TimeUnit.BATCH:
        return duration.value * per_epoch
    if duration.unit == TimeUnit.BATCH and unit == TimeUnit.EPOCH:
        return duration.value / per_epoch
    return None


def _period(scheduler: Any) -> tuple[str, float] | None:
    for name in _PERIOD_ATTRIBUTES:
        value = getattr(scheduler, name, None)
        if name == "milestones" and value:
            return name, max(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return name, value
    return None


def scheduler_period_problems(state: State, per_batch_schedulers: Sequence[Any]) -> list[str]:
    """One message per torch scheduler stepped every batch whose period is under a quarter of the run's batches.

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
        >>> state = State(model=torch.nn.Linear(2, 2), max_duration="3ep", steps_per_epoch=45)
        >>> problem = scheduler_period_problems(state, [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)])
        >>> print(problem[0])
        CosineAnnealingLR(T_max=3) steps after every batch, so T_max counts batches: 3 of this run's 135 (3 epochs). ...
    """
    batches = run_length(state, TimeUnit.BATCH)
    if batches is None:
        return []
    problems = []
    for scheduler in per_batch_schedulers:
        period = _period(scheduler) if isinstance(scheduler, LRScheduler) else None
        if period is None or period[1] * 4 >= batches:
            continue
        name, value = period
        shown = f"{name}={value:g}" if name != "milestones" else f"milestones up to {value:g}"
        epochs = run_length(state, TimeUnit.EPOCH)
        in_epochs = f" ({epochs:g} epochs)" if epochs is not None else ""
        problems.append(
            f"{type(scheduler).__name__}({shown}) steps after every batch, so {name} counts batches: {value:g} of "
            f"this run's {batches:g}{in_epochs}. Its schedule is over (or repeats) within the first quarter of "
            f"the run. If {name} counts epochs, pass step_schedulers_every_batch=False to step torch schedulers "
            f"once per epoch; if it counts batches on purpose (a short warmup), ignore this warning."
        )
    return problems


def ema_half_life_problems(state: State) -> list[str]:
    """One message per EMA in ``state.algorithms`` whose half life is over half the run.

    Example:
        >>> import torch
        >>> from composer.algorithms import EMA
        >>> state = State(model=torch.nn.Linear(2, 2), max_duration="3ep", steps_per_epoch=45, algorithms=[EMA()])
        >>> print(ema_half_life_problems(state)[0])
        EMA's half life of 1000 batches is over half of this run's 135 batches (the default half_life='1000ba'): ...
    """
    from composer.algorithms.ema import EMA

    problems = []
    for algorithm in state.algorithms:
        if not isinstance(algorithm, EMA):
            continue
        half_life, unit = algorithm.effective_half_life
        length = run_length(state, unit)
        if length is None or half_life * 2 <= length:
            continue
        noun = "batches" if unit == TimeUnit.BATCH else "epochs"
        if algorithm.smoothing is not None:
            given = f"smoothing={algorithm.smoothing}"
        elif algorithm.half_life is None:
            given = f"the default half_life='{half_life:g}{unit.value}'"
        else:
            given = f"half_life={algorithm.half_life!r}"
        suggestion = f"{max(1, int(length // 5))}{unit.value}"
        problems.append(
            f"EMA's half life of {half_life:g} {noun} is over half of this run's {length:g} {noun} ({given}): the "
            "average will still weigh the first, barely trained weights heavily at the end, and evaluation runs on "
            f"it. Choose a half life of at most about a fifth of the run, e.g. EMA(half_life={suggestion!r})."
        )
    return problems


def loaded_past_duration(state: State, checkpointing: Checkpointing) -> str | None:
    """A message when the loaded checkpoint's time is already past ``max_duration`` (or at it, for ``load_path``).

    An ``autoresume`` relaunch of a run that ended exactly at ``max_duration`` is the normal way a finished run is
    re-run, and gets no message.
    """
    if checkpointing.loaded_path is None or (checkpointing.load_weights_only and not checkpointing.autoresume):
        return None
    duration = state.max_duration
    done = state.timer.get(duration.unit)
    if done.value < duration.value or (done.value == duration.value and checkpointing.autoresume):
        return None
    timer = state.timer
    where = "past" if done.value > duration.value else "at"
    return (
        f"The checkpoint loaded from {checkpointing.loaded_path} is at {done} (epoch {timer.epoch.value}, batch "
        f"{timer.batch.value}), {where} max_duration={duration}: fit() has nothing left to train and returns at "
        f"once. To train on, pass a max_duration beyond {done}, or call fit(duration=...) for that much more; to "
        "start a new run from its weights, pass load_weights_only=True."
    )
