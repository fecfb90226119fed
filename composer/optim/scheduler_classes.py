"""MosaicML Composer v0.32.1's scheduler classes, with its argument names and defaults, on the scheduler functions.

Each class holds its arguments (``t_warmup``, ``t_max``, ``alpha_i``, ``alpha_f``, ``scale_warmup``, ...) and is
called like the scheduler functions, ``scheduler(state, ssr=1.0)``, returning the learning-rate multiplier, so the
Trainer's ``schedulers=`` and :func:`~composer.optim.scheduler.to_lambda_lr` take an instance as they take a function.
Times follow the functions' rule (:mod:`composer.optim.scheduler_functions`): ``'dur'`` is a fraction of
``max_duration``, epochs count in batches when the epoch length is known, and times are not rounded to whole
batches (v0.32.1 rounded them down).

**Warmups and the scale schedule ratio (where v0.32.1 differs from the functions).** The functions scale every time
but ``'dur'`` by ``ssr``, warmups included. v0.32.1's warmup classes leave the warmup unscaled by default
(``scale_warmup=False``) while the rest of the schedule stretches; these classes do the same, and scale the warmup
too with ``scale_warmup=True``, which is the functions' behaviour. A warmup given in ``'dur'`` follows
``max_duration`` either way. With ``ssr=1`` the two agree.

Example:
    >>> import torch
    >>> from composer.core.state import State
    >>> state = State(torch.nn.Linear(1, 1), max_duration="1000ba")
    >>> scheduler = CosineAnnealingWithWarmupScheduler(t_warmup="100ba", alpha_f=0.1)
    >>> for _ in range(50):
    ...     state.timer.on_batch_complete()
    >>> scheduler(state)  # halfway through the warmup
    0.5
    >>> scheduler(state, ssr=2.0)  # the warmup stays 100 batches (scale_warmup=False)
    0.5
    >>> CosineAnnealingWithWarmupScheduler(t_warmup="100ba", scale_warmup=True)(state, ssr=2.0)  # 50 of 200
    0.25
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch.optim.lr_scheduler import LambdaLR

from composer.core.time import Time
from composer.optim.scheduler import to_lambda_lr
from composer.optim.scheduler_functions import (
    constant_scheduler,
    cosine_annealing_scheduler,
    cosine_annealing_warm_restarts_scheduler,
    elapsed,
    linear_scheduler,
    multi_step_scheduler,
    parse_time,
    polynomial_scheduler,
    resolve_times,
    step_scheduler,
)

if TYPE_CHECKING:
    from composer.core.state import State

__all__ = [
    "ConstantScheduler",
    "ConstantWithWarmupScheduler",
    "CosineAnnealingScheduler",
    "CosineAnnealingWarmRestartsScheduler",
    "CosineAnnealingWithWarmupScheduler",
    "ExponentialScheduler",
    "LinearScheduler",
    "LinearWithWarmupScheduler",
    "MultiStepScheduler",
    "MultiStepWithWarmupScheduler",
    "PolynomialScheduler",
    "PolynomialWithWarmupScheduler",
    "StepScheduler",
    "compile_composer_scheduler",
]

TimeArg = str | Time[Any]


def _check_factor(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number >= 0 (a learning-rate multiplier).")


class _Scheduler:
    """Stores the constructor's arguments (after checking them) and shows them in ``repr``."""

    def _check(self, **arguments: Any) -> None:
        """Checks the times and multipliers among ``arguments`` and records their names for ``repr``."""
        for name, value in arguments.items():
            if name in ("t_warmup", "t_max", "t_0", "decay_period", "step_size"):
                parse_time(value, name)
            elif name.startswith("alpha"):
                _check_factor(name, value)
        self._arguments = tuple(arguments)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._arguments)
        return f"{type(self).__name__}({shown})"


class StepScheduler(_Scheduler):
    """Multiplies by ``gamma`` every ``step_size``: ``gamma ** floor(t / step_size)``.

    Args:
        step_size: Time between two decays.
        gamma: The factor applied at each step.
    """

    def __init__(self, step_size: TimeArg, gamma: float = 0.1) -> None:
        self._check(step_size=step_size, gamma=gamma)
        self.step_size = step_size
        self.gamma = gamma

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return step_scheduler(state, ssr=ssr, step_size=self.step_size, gamma=self.gamma)


class MultiStepScheduler(_Scheduler):
    """Multiplies by ``gamma`` at each milestone: ``gamma ** (milestones passed)``.

    Args:
        milestones: The times of the decays.
        gamma: The factor applied at each milestone.
    """

    def __init__(self, milestones: Sequence[TimeArg], gamma: float = 0.1) -> None:
        self._check(milestones=list(milestones), gamma=gamma)
        self.milestones = list(milestones)
        self.gamma = gamma

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return multi_step_scheduler(state, ssr=ssr, milestones=self.milestones, gamma=self.gamma)


class ConstantScheduler(_Scheduler):
    """``alpha`` until ``t_max``, then 1.

    Args:
        alpha: The multiplier.
        t_max: How long it applies.
    """

    def __init__(self, alpha: float = 1.0, t_max: TimeArg = "1dur") -> None:
        self._check(alpha=alpha, t_max=t_max)
        self.alpha = alpha
        self.t_max = t_max

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return constant_scheduler(state, ssr=ssr, factor=self.alpha, total_time=self.t_max)


class LinearScheduler(_Scheduler):
    """From ``alpha_i`` to ``alpha_f`` in a straight line over ``t_max``, then ``alpha_f``.

    Args:
        alpha_i: The multiplier at the start.
        alpha_f: The multiplier at ``t_max`` and after.
        t_max: How long the line lasts.
    """

    def __init__(self, alpha_i: float = 1.0, alpha_f: float = 0.0, t_max: TimeArg = "1dur") -> None:
        self._check(alpha_i=alpha_i, alpha_f=alpha_f, t_max=t_max)
        self.alpha_i = alpha_i
        self.alpha_f = alpha_f
        self.t_max = t_max

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return linear_scheduler(
            state, ssr=ssr, start_factor=self.alpha_i, end_factor=self.alpha_f, total_time=self.t_max
        )


class ExponentialScheduler(_Scheduler):
    """Multiplies by ``gamma`` every ``decay_period``, continuously: ``gamma ** (t / decay_period)``.

    Args:
        gamma: The factor per decay period.
        decay_period: The period.
    """

    def __init__(self, gamma: float, decay_period: TimeArg = "1ep") -> None:
        self._check(gamma=gamma, decay_period=decay_period)
        self.gamma = gamma
        self.decay_period = decay_period

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        (period,), unit = resolve_times(state, ssr, {"decay_period": self.decay_period})
        if period <= 0:
            raise ValueError(f"decay_period={self.decay_period!r} must be longer than zero.")
        return float(self.gamma ** (elapsed(state, unit) / period))


class CosineAnnealingScheduler(_Scheduler):
    """The decreasing half of a cosine from 1 to ``alpha_f`` over ``t_max``.

    Args:
        t_max: How long the decay lasts.
        alpha_f: The multiplier at ``t_max`` and after.
    """

    def __init__(self, t_max: TimeArg = "1dur", alpha_f: float = 0.0) -> None:
        self._check(t_max=t_max, alpha_f=alpha_f)
        self.t_max = t_max
        self.alpha_f = alpha_f

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return cosine_annealing_scheduler(state, ssr=ssr, t_max=self.t_max, min_factor=self.alpha_f)


class CosineAnnealingWarmRestartsScheduler(_Scheduler):
    """Cosine decays to ``alpha_f`` that restart at 1; the first lasts ``t_0``, each next ``t_mult`` times longer.

    Args:
        t_0: The first cycle's length.
        t_mult: The factor by which each cycle is longer than the previous one.
        alpha_f: The multiplier at the end of each cycle.
    """

    def __init__(self, t_0: TimeArg, t_mult: float = 1.0, alpha_f: float = 0.0) -> None:
        self._check(t_0=t_0, t_mult=t_mult, alpha_f=alpha_f)
        self.t_0 = t_0
        self.t_mult = t_mult
        self.alpha_f = alpha_f

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return cosine_annealing_warm_restarts_scheduler(
            state, ssr=ssr, t_0=self.t_0, t_mult=self.t_mult, min_factor=self.alpha_f
        )


class PolynomialScheduler(_Scheduler):
    """``alpha_f + (1 - alpha_f) * (1 - t / t_max) ** power``, then ``alpha_f``.

    Args:
        power: The power.
        t_max: How long the decay lasts.
        alpha_f: The multiplier at ``t_max`` and after.
    """

    def __init__(self, power: float, t_max: TimeArg = "1dur", alpha_f: float = 0.0) -> None:
        self._check(power=power, t_max=t_max, alpha_f=alpha_f)
        self.power = power
        self.t_max = t_max
        self.alpha_f = alpha_f

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule."""
        return polynomial_scheduler(state, ssr=ssr, t_max=self.t_max, power=self.power, min_factor=self.alpha_f)


# ----- with a warmup ------------------------------------------------------------------------------------------------


class _WarmupScheduler(_Scheduler):
    """A linear warmup from 0 to ``_peak`` over ``t_warmup`` (scaled by ``ssr`` only with ``scale_warmup``), then
    :meth:`_after`."""

    t_warmup: TimeArg
    scale_warmup: bool
    _peak = 1.0

    def _after(self, state: State, ssr: float, now: float, warmup: float) -> float:
        raise NotImplementedError

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """Returns the multiplier at ``state``'s time; ``ssr`` stretches the schedule (the warmup only with
        ``scale_warmup=True``)."""
        (warmup,), unit = resolve_times(state, ssr if self.scale_warmup else 1.0, {"t_warmup": self.t_warmup})
        now = elapsed(state, unit)
        if now < warmup:
            return self._peak * now / warmup
        return self._after(state, ssr, now, warmup)

    def _fraction(self, state: State, ssr: float, now: float, warmup: float, t_max: TimeArg) -> float:
        """``min(1, (t - t_warmup) / (t_max - t_warmup))``, or 0 when ``t_max <= t_warmup`` (as v0.32.1)."""
        (total,), unit = resolve_times(state, ssr, {"t_max": t_max})
        (check,), warmup_unit = resolve_times(state, ssr if self.scale_warmup else 1.0, {"t_warmup": self.t_warmup})
        if unit != warmup_unit:
            raise ValueError(
                f"t_warmup={self.t_warmup!r} and t_max={t_max!r} resolve to different units "
                f"({warmup_unit.value!r} and {unit.value!r}); give them in one unit."
            )
        del check
        return min(1.0, (now - warmup) / (total - warmup)) if total > warmup else 0.0


class LinearWithWarmupScheduler(_WarmupScheduler):
    """A linear warmup to ``alpha_i``, then a straight line to ``alpha_f`` at ``t_max``.

    Args:
        t_warmup: The warmup's length; by default not scaled by ``ssr`` (see the module docstring).
        alpha_i: The multiplier at the end of the warmup.
        alpha_f: The multiplier at ``t_max`` and after.
        t_max: The schedule's length, warmup included.
        scale_warmup: Scale the warmup by ``ssr`` too.
    """

    def __init__(
        self,
        t_warmup: TimeArg,
        alpha_i: float = 1.0,
        alpha_f: float = 0.0,
        t_max: TimeArg = "1dur",
        scale_warmup: bool = False,
    ) -> None:
        self._check(t_warmup=t_warmup, alpha_i=alpha_i, alpha_f=alpha_f, t_max=t_max, scale_warmup=scale_warmup)
        self.t_warmup = t_warmup
        self.alpha_i = alpha_i
        self.alpha_f = alpha_f
        self.t_max = t_max
        self.scale_warmup = scale_warmup
        self._peak = alpha_i

    def _after(self, state: State, ssr: float, now: float, warmup: float) -> float:
        tau = self._fraction(state, ssr, now, warmup, self.t_max)
        return float(self.alpha_i + (self.alpha_f - self.alpha_i) * tau)


class ConstantWithWarmupScheduler(LinearWithWarmupScheduler):
    """A linear warmup to ``alpha``, which then stays.

    Args:
        t_warmup: The warmup's length; by default not scaled by ``ssr`` (see the module docstring).
        alpha: The multiplier after the warmup.
        t_max: The schedule's length.
        scale_warmup: Scale the warmup by ``ssr`` too.
    """

    def __init__(
        self, t_warmup: TimeArg, alpha: float = 1.0, t_max: TimeArg = "1dur", scale_warmup: bool = False
    ) -> None:
        super().__init__(t_warmup, alpha_i=alpha, alpha_f=alpha, t_max=t_max, scale_warmup=scale_warmup)
        self._check(t_warmup=t_warmup, alpha=alpha, t_max=t_max, scale_warmup=scale_warmup)
        self.t_warmup = t_warmup
        self.alpha = alpha
        self.t_max = t_max
        self.scale_warmup = scale_warmup


class CosineAnnealingWithWarmupScheduler(_WarmupScheduler):
    """A linear warmup to 1, then the decreasing half of a cosine to ``alpha_f`` at ``t_max``.

    Args:
        t_warmup: The warmup's length; by default not scaled by ``ssr`` (see the module docstring).
        t_max: The schedule's length, warmup included.
        alpha_f: The multiplier at ``t_max`` and after.
        scale_warmup: Scale the warmup by ``ssr`` too.
    """

    def __init__(
        self, t_warmup: TimeArg, t_max: TimeArg = "1dur", alpha_f: float = 0.0, scale_warmup: bool = False
    ) -> None:
        self._check(t_warmup=t_warmup, t_max=t_max, alpha_f=alpha_f, scale_warmup=scale_warmup)
        self.t_warmup = t_warmup
        self.t_max = t_max
        self.alpha_f = alpha_f
        self.scale_warmup = scale_warmup

    def _after(self, state: State, ssr: float, now: float, warmup: float) -> float:
        tau = self._fraction(state, ssr, now, warmup, self.t_max)
        return self.alpha_f + (1.0 - self.alpha_f) * (1.0 + math.cos(math.pi * tau)) / 2.0


class PolynomialWithWarmupScheduler(_WarmupScheduler):
    """A linear warmup to 1, then ``alpha_f + (1 - alpha_f) * (1 - tau) ** power`` to ``alpha_f`` at ``t_max``.

    Args:
        t_warmup: The warmup's length; by default not scaled by ``ssr`` (see the module docstring).
        power: The power.
        t_max: The schedule's length, warmup included.
        alpha_f: The multiplier at ``t_max`` and after.
        scale_warmup: Scale the warmup by ``ssr`` too.
    """

    def __init__(
        self,
        t_warmup: TimeArg,
        power: float = 2.0,
        t_max: TimeArg = "1dur",
        alpha_f: float = 0.0,
        scale_warmup: bool = False,
    ) -> None:
        self._check(t_warmup=t_warmup, power=power, t_max=t_max, alpha_f=alpha_f, scale_warmup=scale_warmup)
        self.t_warmup = t_warmup
        self.power = power
        self.t_max = t_max
        self.alpha_f = alpha_f
        self.scale_warmup = scale_warmup

    def _after(self, state: State, ssr: float, now: float, warmup: float) -> float:
        tau = self._fraction(state, ssr, now, warmup, self.t_max)
        return float(self.alpha_f + (1.0 - self.alpha_f) * (1.0 - tau) ** self.power)


class MultiStepWithWarmupScheduler(_WarmupScheduler):
    """A linear warmup to 1, then ``gamma ** (milestones passed)``, milestones counted from the start of training.

    As in v0.32.1, the warmup rises to 1 even when a milestone falls inside it (the function
    :func:`~composer.optim.scheduler_functions.multi_step_with_warmup_scheduler` rises to the multi-step value).

    Args:
        t_warmup: The warmup's length; by default not scaled by ``ssr`` (see the module docstring).
        milestones: The times of the decays (scaled by ``ssr``).
        gamma: The factor applied at each milestone.
        scale_warmup: Scale the warmup by ``ssr`` too.
    """

    def __init__(
        self, t_warmup: TimeArg, milestones: Sequence[TimeArg], gamma: float = 0.1, scale_warmup: bool = False
    ) -> None:
        self._check(t_warmup=t_warmup, milestones=list(milestones), gamma=gamma, scale_warmup=scale_warmup)
        self.t_warmup = t_warmup
        self.milestones = list(milestones)
        self.gamma = gamma
        self.scale_warmup = scale_warmup

    def _after(self, state: State, ssr: float, now: float, warmup: float) -> float:
        return multi_step_scheduler(state, ssr=ssr, milestones=self.milestones, gamma=self.gamma)


def compile_composer_scheduler(scheduler: Any, state: State, ssr: float = 1.0) -> LambdaLR:
    """v0.32.1's name for :func:`~composer.optim.scheduler.to_lambda_lr`: a scheduler as a torch ``LambdaLR``.

    Args:
        scheduler: A scheduler class instance or function (or a sequence of them).
        state: The training state, with exactly one optimizer.
        ssr: The scale schedule ratio.

    Returns:
        LambdaLR: The torch scheduler; step it after every batch.
    """
    return to_lambda_lr(scheduler, state, ssr=ssr)
