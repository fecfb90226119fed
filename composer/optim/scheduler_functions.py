"""The eleven scheduler functions: pure functions from the training state to a learning-rate multiplier.

Each scheduler function reads ``state.timer`` (and ``state.max_duration`` for times in ``'dur'``) and returns the
factor by which to multiply every parameter group's initial learning rate. It keeps no counter of its own, so it gives
the same answer after a checkpoint resume or a change of ``max_duration``. :func:`~composer.optim.scheduler.to_lambda_lr` turns one or several of them
into a :class:`torch.optim.lr_scheduler.LambdaLR` that the trainer steps after every batch.

**Times.** Every time argument takes a time string (``'10ba'``, ``'2ep'``, ``'0.5dur'``) or a
:class:`~composer.core.time.Time`. Times are resolved as floats (no rounding) against the run:

* ``'dur'`` is a fraction of ``state.max_duration``;
* every other time is multiplied by the scale schedule ratio ``ssr``;
* when ``state.steps_per_epoch`` is known, epochs (and a ``'dur'`` of an epoch budget) become batches and are
  compared with ``state.timer.batch``, so schedules move every batch; otherwise a time is compared with the timer's
  counter of its own unit. Times that one scheduler compares with each other (a warmup and a total time, say) must
  end up in one unit.

**The scale schedule ratio (ssr).** The multiplier at time ``t`` with ``ssr=1`` equals the multiplier at time
``t * s`` with ``ssr=s``, warmups and ``'dur'`` times included. The trainer has already multiplied
``state.max_duration`` by ``s``, so ``'dur'`` times follow it without being scaled a second time, while every other
time is multiplied by ``s`` here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from composer.core.time import Time, TimeUnit

if TYPE_CHECKING:
    from composer.core.state import State

__all__ = [
    "check_at_least",
    "check_factors",
    "check_milestones",
    "check_ssr",
    "constant_scheduler",
    "cosine_annealing_scheduler",
    "cosine_annealing_warm_restarts_scheduler",
    "cosine_annealing_with_warmup_scheduler",
    "elapsed",
    "exponential_scheduler",
    "linear_scheduler",
    "linear_with_warmup_scheduler",
    "multi_step_scheduler",
    "multi_step_with_warmup_scheduler",
    "parse_time",
    "polynomial_scheduler",
    "resolve_times",
    "step_scheduler",
]


# ----- argument checks and time resolution -------------------------------------------------------------------------

_TIME_HINT = "pass a time string such as '10ba', '2ep' or '0.5dur', or a Time"


def parse_time(value: str | Time[Any], name: str) -> Time[Any]:
    """``value`` as a :class:`Time`, or an error naming the argument ``name`` and the forms accepted.

    Args:
        value: A time string (``'10ba'``, ``'2ep'``, ``'0.5dur'``) or a Time.
        name: The argument's name, for the message.

    Returns:
        Time: The time.
    """
    if isinstance(value, Time):
        return value
    if isinstance(value, str):
        try:
            return Time.from_timestring(value)
        except ValueError as error:
            raise ValueError(f"{name}={value!r} is not a valid time: {error} To fix, {_TIME_HINT}.") from None
    raise TypeError(f"{name}={value!r} ({type(value).__name__}) is not a time; {_TIME_HINT}.")


def check_ssr(ssr: float) -> None:
    """Raises ValueError unless the scale schedule ratio ``ssr`` is a positive finite number."""
    if not (isinstance(ssr, (int, float)) and math.isfinite(ssr) and ssr > 0):
        raise ValueError(f"ssr={ssr!r} must be a positive number (1.0 leaves the schedule unscaled).")


def check_at_least(value: float, name: str, low: float, hint: str) -> None:
    """Raises ValueError naming ``name``, with ``hint``, unless ``value`` is a finite number >= ``low``."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= low):
        raise ValueError(f"{name}={value!r} must be a finite number >= {low}; {hint}.")


def check_factors(**factors: float) -> None:
    """Raises ValueError unless every learning-rate multiplier (by keyword name) is a finite number >= 0."""
    for name, value in factors.items():
        check_at_least(value, name, 0.0, "a learning-rate multiplier cannot be negative")


def check_milestones(milestones: Sequence[str | Time[Any]]) -> list[Time[Any]]:
    """``milestones`` as Times; ValueError unless it is a non-empty list of time strings or Times."""
    if isinstance(milestones, (str, Time)) or not isinstance(milestones, Sequence) or len(milestones) == 0:
        raise ValueError(
            f"milestones={milestones!r} must be a non-empty list of times, for example ['30ep', '60ep', '90ep']."
        )
    return [parse_time(milestone, f"milestones[{i}]") for i, milestone in enumerate(milestones)]


def resolve_times(state: State, ssr: float, times: dict[str, str | Time[Any]]) -> tuple[list[float], TimeUnit]:
    """Converts the named times to floats in one unit (see the module docstring): the schedulers' shared time rule.

    Args:
        state: The training state (``max_duration`` for ``'dur'`` times, ``steps_per_epoch`` for epochs).
        ssr: The scale schedule ratio; every time but ``'dur'`` is multiplied by it.
        times: Each argument's name, mapped to its time string or :class:`Time`.

    Returns:
        tuple[list[float], TimeUnit]: The times, in the order given, and the unit they are in.

    Raises:
        ValueError: If a time does not parse, or the times end up in different units.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> resolve_times(state, 2.0, {"warmup_time": "1ep", "t_max": "1dur"})
        ([200.0, 1000.0], <TimeUnit.BATCH: 'ba'>)
    """
    check_ssr(ssr)
    steps_per_epoch = state.steps_per_epoch
    budget = state.max_duration
    values: list[float] = []
    units: dict[str, TimeUnit] = {}
    for name, raw in times.items():
        time = parse_time(raw, name)
        if time.unit == TimeUnit.DURATION:
            # max_duration is already scaled by ssr: a fraction of it is not scaled again.
            amount, unit = float(time.value) * float(budget.value), budget.unit
        else:
            amount, unit = float(time.value) * ssr, time.unit
        if unit == TimeUnit.EPOCH and steps_per_epoch is not None:
            amount, unit = amount * steps_per_epoch, TimeUnit.BATCH
        values.append(amount)
        units[name] = unit
    distinct = set(units.values())
    if len(distinct) > 1:
        described = ", ".join(f"{name}={times[name]!r} -> {unit.value!r}" for name, unit in units.items())
        raise ValueError(
            f"These times resolve to different units ({described}) and cannot be compared. To fix, give them in one "
            "unit, or use epochs and batches with a state whose steps_per_epoch is known (a sized train_dataloader "
            "or an explicit steps_per_epoch)."
        )
    return values, distinct.pop() if distinct else TimeUnit.BATCH


def elapsed(state: State, unit: TimeUnit) -> float:
    """The training time so far in ``unit``, from ``state.timer``, as a float (what schedulers compare times with).

    Args:
        state: The training state.
        unit: The unit (not ``'dur'``).

    Returns:
        float: The timer's count in that unit.
    """
    return float(state.timer.get(unit).value)


def _check_positive_time(amount: float, name: str, raw: str | Time[Any]) -> None:
    if amount <= 0:
        raise ValueError(f"{name}={raw!r} resolves to a length of 0; it must be longer than zero, e.g. '1ba'.")


def _check_warmup(warmup: float, total: float, warmup_time: str | Time[Any], total_name: str, total_time: Any) -> None:
    if warmup > total:
        raise ValueError(
            f"warmup_time={warmup_time!r} ({warmup:g}) is longer than {total_name}={total_time!r} ({total:g}); "
            f"shorten warmup_time or lengthen {total_name}."
        )


def _cosine(tau: float, min_factor: float) -> float:
    return min_factor + (1.0 - min_factor) * (1.0 + math.cos(math.pi * tau)) / 2.0


def _clip(fraction: float) -> float:
    return min(1.0, max(0.0, fraction))


# ----- the scheduler functions -------------------------------------------------------------------------------------


def constant_scheduler(
    state: State, *, ssr: float = 1.0, factor: float = 1.0, total_time: str | Time[Any] = "1dur"
) -> float:
    """Maintains a fixed learning rate.

    Returns ``factor`` while ``t < total_time`` and 1.0 afterwards.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        factor (float): Factor. Default = 1.0.
        total_time (str or Time): Total time. Default = '1dur'.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> constant_scheduler(state, factor=0.5, total_time="2ep")
        0.5
    """
    check_factors(factor=factor)
    (total,), unit = resolve_times(state, ssr, {"total_time": total_time})
    return factor if elapsed(state, unit) < total else 1.0


def linear_scheduler(
    state: State,
    *,
    ssr: float = 1.0,
    start_factor: float = 1.0,
    end_factor: float = 0.0,
    total_time: str | Time[Any] = "1dur",
) -> float:
    """Adjusts the learning rate linearly.

    Returns ``start_factor + (end_factor - start_factor) * min(1, t / total_time)``: a straight line from
    ``start_factor`` at the start to ``end_factor`` at ``total_time``, then ``end_factor``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        start_factor (float): Start factor. Default = 1.0.
        end_factor (float): End factor. Default = 0.0.
        total_time (str or Time): Total time. Default = '1dur'.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="100ba")
        >>> for _ in range(25):
        ...     state.timer.on_batch_complete()
        >>> linear_scheduler(state, start_factor=1.0, end_factor=0.2)
        0.8
    """
    check_factors(start_factor=start_factor, end_factor=end_factor)
    (total,), unit = resolve_times(state, ssr, {"total_time": total_time})
    fraction = min(1.0, elapsed(state, unit) / total) if total > 0 else 1.0
    return start_factor + (end_factor - start_factor) * fraction


def exponential_scheduler(state: State, *, ssr: float = 1.0, gamma: float) -> float:
    """Decays the learning rate exponentially.

    Returns ``gamma ** (epochs / ssr)``: ``gamma`` is the decay per epoch. When ``state.steps_per_epoch`` is known
    the epoch count is fractional (``batches / steps_per_epoch``), so the decay is continuous from batch to batch;
    otherwise it uses whole epochs (``state.timer.epoch``).

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        gamma (float): Gamma, the multiplicative decay per epoch.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> for _ in range(150):
        ...     state.timer.on_batch_complete()
        >>> round(exponential_scheduler(state, gamma=0.25), 6)  # 0.25 ** 1.5
        0.125
    """
    check_at_least(gamma, "gamma", 0.0, "use a decay per epoch such as 0.9")
    check_ssr(ssr)
    steps_per_epoch = state.steps_per_epoch
    if steps_per_epoch is not None:
        epochs = elapsed(state, TimeUnit.BATCH) / steps_per_epoch
    else:
        epochs = elapsed(state, TimeUnit.EPOCH)
    return float(gamma ** (epochs / ssr))


def step_scheduler(state: State, *, ssr: float = 1.0, step_size: str | Time[Any], gamma: float = 0.1) -> float:
    """Decays the learning rate discretely at fixed intervals.

    Returns ``gamma ** floor(t / step_size)``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        step_size (str or Time): Time between two decays.
        gamma (float): Gamma. Default = 0.1.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="100ba")
        >>> for _ in range(25):
        ...     state.timer.on_batch_complete()
        >>> step_scheduler(state, step_size="10ba", gamma=0.5)
        0.25
    """
    check_at_least(gamma, "gamma", 0.0, "use a decay factor such as 0.1")
    (size,), unit = resolve_times(state, ssr, {"step_size": step_size})
    _check_positive_time(size, "step_size", step_size)
    return float(gamma ** math.floor(elapsed(state, unit) / size))


def _multi_step(state: State, ssr: float, milestones: Sequence[str | Time[Any]], gamma: float) -> tuple[float, float]:
    """The multi-step multiplier now, and the elapsed time it was computed at."""
    check_at_least(gamma, "gamma", 0.0, "use a decay factor such as 0.1")
    parsed = check_milestones(milestones)
    points, unit = resolve_times(state, ssr, {f"milestones[{i}]": m for i, m in enumerate(parsed)})
    now = elapsed(state, unit)
    return float(gamma ** sum(1 for point in points if now >= point)), now


def multi_step_scheduler(
    state: State, *, ssr: float = 1.0, milestones: Sequence[str | Time[Any]], gamma: float = 0.1
) -> float:
    """Decays the learning rate discretely at fixed milestones.

    Returns ``gamma ** (number of milestones reached)``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        milestones (list of str or Time): Milestones.
        gamma (float): Gamma. Default = 0.1.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> for _ in range(500):
        ...     state.timer.on_batch_complete()
        >>> round(multi_step_scheduler(state, milestones=["3ep", "5ep", "8ep"]), 6)
        0.01
    """
    return _multi_step(state, ssr, milestones, gamma)[0]


def cosine_annealing_scheduler(
    state: State, *, ssr: float = 1.0, t_max: str | Time[Any] = "1dur", min_factor: float = 0.0
) -> float:
    """Decays the learning rate according to the decreasing part of a cosine curve.

    Returns ``min_factor + (1 - min_factor) * (1 + cos(pi * tau)) / 2`` with ``tau = clip(t / t_max, 0, 1)``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        t_max (str or Time): Total time. Default = '1dur'.
        min_factor (float): Minimum factor. Default = 0.0.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> for _ in range(500):
        ...     state.timer.on_batch_complete()
        >>> round(cosine_annealing_scheduler(state), 6)
        0.5
    """
    check_factors(min_factor=min_factor)
    (total,), unit = resolve_times(state, ssr, {"t_max": t_max})
    tau = _clip(elapsed(state, unit) / total) if total > 0 else 1.0
    return _cosine(tau, min_factor)


def _restart_position(now: float, t_0: float, t_mult: float) -> float:
    """The fraction of the current cycle done at ``now``; cycle k lasts ``t_0 * t_mult ** k``."""
    if t_mult == 1.0:
        return (now % t_0) / t_0

    def start(k: int) -> float:
        return t_0 * (t_mult**k - 1.0) / (t_mult - 1.0)

    if t_mult < 1.0 and now >= t_0 / (1.0 - t_mult):
        return 1.0  # shrinking cycles add up to t_0 / (1 - t_mult); past that point the schedule stays at its end
    k = max(0, math.floor(math.log1p(now * (t_mult - 1.0) / t_0) / math.log(t_mult)))
    # The logarithm can be off by one at a cycle boundary; settle it exactly.
    while start(k + 1) <= now:
        k += 1
    while k > 0 and start(k) > now:
        k -= 1
    return _clip((now - start(k)) / (t_0 * t_mult**k))


def cosine_annealing_warm_restarts_scheduler(
    state: State, *, ssr: float = 1.0, t_0: str | Time[Any], t_mult: float = 1.0, min_factor: float = 0.0
) -> float:
    """Cyclically decays the learning rate according to the decreasing part of a cosine curve.

    The first cycle lasts ``t_0`` and each later one ``t_mult`` times the previous one (lengths are not rounded).
    Within a cycle the multiplier is ``min_factor + (1 - min_factor) * (1 + cos(pi * tau)) / 2``, with ``tau`` the
    fraction of the cycle done; it jumps back to 1 at every restart. With ``t_mult < 1`` the cycles shrink towards a
    finite total length ``t_0 / (1 - t_mult)``, after which the multiplier stays at ``min_factor``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        t_0 (str or Time): The first cycle's duration.
        t_mult (float): The multiplier for subsequent cycles' durations. Default = 1.0.
        min_factor (float): Minimum factor. Default = 0.0.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="100ba")
        >>> for _ in range(40):
        ...     state.timer.on_batch_complete()
        >>> round(cosine_annealing_warm_restarts_scheduler(state, t_0="30ba"), 6)  # a third into the second cycle
        0.75
    """
    check_factors(min_factor=min_factor)
    if not (isinstance(t_mult, (int, float)) and math.isfinite(t_mult) and t_mult > 0):
        raise ValueError(f"t_mult={t_mult!r} must be a positive number; use 1.0 for cycles of equal length.")
    (first,), unit = resolve_times(state, ssr, {"t_0": t_0})
    _check_positive_time(first, "t_0", t_0)
    return _cosine(_restart_position(elapsed(state, unit), first, float(t_mult)), min_factor)


def polynomial_scheduler(
    state: State, *, ssr: float = 1.0, t_max: str | Time[Any] = "1dur", power: float, min_factor: float = 0.0
) -> float:
    """Sets the learning rate to be exponentially proportional to the percentage of training time left.

    Returns ``min_factor + (1 - min_factor) * (1 - tau) ** power`` with ``tau = clip(t / t_max, 0, 1)``, so the
    multiplier stays at ``min_factor`` after ``t_max``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        t_max (str or Time): Total time. Default = '1dur'.
        power (float): Power.
        min_factor (float): Minimum factor. Default = 0.0.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="100ba")
        >>> for _ in range(10):
        ...     state.timer.on_batch_complete()
        >>> round(polynomial_scheduler(state, power=2.0, min_factor=0.5), 6)  # 0.5 + 0.5 * 0.9 ** 2
        0.905
    """
    check_factors(min_factor=min_factor)
    check_at_least(power, "power", 0.0, "use for example 1.0 for a linear decay or 2.0 for a quadratic one")
    (total,), unit = resolve_times(state, ssr, {"t_max": t_max})
    tau = _clip(elapsed(state, unit) / total) if total > 0 else 1.0
    return float(min_factor + (1.0 - min_factor) * (1.0 - tau) ** power)


def multi_step_with_warmup_scheduler(
    state: State,
    *,
    ssr: float = 1.0,
    warmup_time: str | Time[Any],
    milestones: Sequence[str | Time[Any]],
    gamma: float = 0.1,
) -> float:
    """Decays the learning rate discretely at fixed milestones, with a linear warmup.

    During ``warmup_time`` the multiplier rises linearly from 0 to the multi-step value at the end of the warmup
    (1.0 unless a milestone falls inside the warmup); afterwards it is :func:`multi_step_scheduler`'s value, with
    milestones measured from the start of training.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        warmup_time (str or Time): Warmup time.
        milestones (list of str or Time): Milestones.
        gamma (float): Gamma. Default = 0.1.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="10ep", steps_per_epoch=100)
        >>> for _ in range(50):
        ...     state.timer.on_batch_complete()
        >>> multi_step_with_warmup_scheduler(state, warmup_time="1ep", milestones=["5ep"])
        0.5
    """
    check_at_least(gamma, "gamma", 0.0, "use a decay factor such as 0.1")
    parsed = check_milestones(milestones)
    times: dict[str, str | Time[Any]] = {"warmup_time": warmup_time}
    times.update({f"milestones[{i}]": m for i, m in enumerate(parsed)})
    (warmup, *points), unit = resolve_times(state, ssr, times)
    now = elapsed(state, unit)
    if now < warmup:
        peak = gamma ** sum(1 for point in points if warmup >= point)
        return float(peak * now / warmup)
    return float(gamma ** sum(1 for point in points if now >= point))


def linear_with_warmup_scheduler(
    state: State,
    *,
    ssr: float = 1.0,
    warmup_time: str | Time[Any],
    start_factor: float = 1.0,
    end_factor: float = 0.0,
    total_time: str | Time[Any] = "1dur",
) -> float:
    """Adjusts the learning rate linearly, with a linear warmup.

    During ``warmup_time`` the multiplier rises linearly from 0 to ``start_factor``; from there it moves linearly to
    ``end_factor`` at ``total_time`` (measured from the start of training) and stays there.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        warmup_time (str or Time): Warmup time.
        start_factor (float): Start factor. Default = 1.0.
        end_factor (float): End factor. Default = 0.0.
        total_time (str or Time): Total time. Default = '1dur'.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="110ba")
        >>> for _ in range(60):
        ...     state.timer.on_batch_complete()
        >>> linear_with_warmup_scheduler(state, warmup_time="10ba", start_factor=1.0, end_factor=0.0)
        0.5
    """
    check_factors(start_factor=start_factor, end_factor=end_factor)
    (warmup, total), unit = resolve_times(state, ssr, {"warmup_time": warmup_time, "total_time": total_time})
    _check_warmup(warmup, total, warmup_time, "total_time", total_time)
    now = elapsed(state, unit)
    if now < warmup:
        return start_factor * now / warmup
    fraction = min(1.0, (now - warmup) / (total - warmup)) if total > warmup else 1.0
    return start_factor + (end_factor - start_factor) * fraction


def cosine_annealing_with_warmup_scheduler(
    state: State,
    *,
    ssr: float = 1.0,
    warmup_time: str | Time[Any],
    t_max: str | Time[Any] = "1dur",
    min_factor: float = 0.0,
) -> float:
    """Decays the learning rate according to the decreasing part of a cosine curve, with a linear warmup.

    During ``warmup_time`` the multiplier rises linearly from 0 to 1; then it follows the cosine of
    :func:`cosine_annealing_scheduler` with ``tau = clip((t - warmup_time) / (t_max - warmup_time), 0, 1)``.

    Args:
        state (State): The current Composer Trainer state.
        ssr (float): The scale schedule ratio (see the module docstring). Default = 1.0.
        warmup_time (str or Time): Warmup time.
        t_max (str or Time): Total time. Default = '1dur'.
        min_factor (float): Minimum factor. Default = 0.0.

    Returns:
        float: The multiplier of each parameter group's initial learning rate at the current time of ``state``.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(torch.nn.Linear(1, 1), max_duration="11ep", steps_per_epoch=100)
        >>> for _ in range(600):
        ...     state.timer.on_batch_complete()
        >>> round(cosine_annealing_with_warmup_scheduler(state, warmup_time="1ep"), 6)
        0.5
    """
    check_factors(min_factor=min_factor)
    (warmup, total), unit = resolve_times(state, ssr, {"warmup_time": warmup_time, "t_max": t_max})
    _check_warmup(warmup, total, warmup_time, "t_max", t_max)
    now = elapsed(state, unit)
    if now < warmup:
        return now / warmup
    tau = _clip((now - warmup) / (total - warmup)) if total > warmup else 1.0
    return _cosine(tau, min_factor)
