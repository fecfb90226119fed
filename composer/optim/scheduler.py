"""Stateless learning-rate schedules: pure functions from the training state to a learning-rate multiplier.

The eleven scheduler functions (:mod:`~composer.optim.scheduler_functions`, re-exported here, with the rules by which
their times and the scale schedule ratio ``ssr`` resolve) keep no counter of their own, so a schedule gives the same
answer after a checkpoint resume or a change of ``max_duration``. This module turns one or several of them into a
:class:`torch.optim.lr_scheduler.LambdaLR` that the trainer steps after every batch (:func:`to_lambda_lr`), and holds
their configs and the ``SCHEDULERS`` registry that recipes name them by.

Example:
    >>> import torch
    >>> from composer.core.state import State
    >>> model = torch.nn.Linear(2, 1)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> state = State(model, max_duration="10ep", steps_per_epoch=100, optimizers=optimizer)
    >>> scheduler = to_lambda_lr(CosineAnnealingWithWarmupLRHparams(warmup_time="1ep").initialize_object(), state)
    >>> optimizer.param_groups[0]["lr"]  # the warmup starts at 0
    0.0
    >>> for _ in range(50):  # the trainer steps the optimizer, advances the timer, then steps the scheduler
    ...     optimizer.step()
    ...     state.timer.on_batch_complete()
    >>> scheduler.step()
    >>> round(optimizer.param_groups[0]["lr"], 6)  # halfway through the warmup
    0.05
"""

from __future__ import annotations

import abc
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from composer.core.hparams import Hparams, hparams_for
from composer.core.state import State  # re-exported: the seed lists State, Time and TimeUnit in this module
from composer.core.time import Time, TimeUnit
from composer.optim.scheduler_functions import (  # argument checks shared with the Hparams below
    check_at_least,
    check_factors,
    check_milestones,
    check_ssr,
    constant_scheduler,
    cosine_annealing_scheduler,
    cosine_annealing_warm_restarts_scheduler,
    cosine_annealing_with_warmup_scheduler,
    exponential_scheduler,
    linear_scheduler,
    linear_with_warmup_scheduler,
    multi_step_scheduler,
    multi_step_with_warmup_scheduler,
    parse_time,
    polynomial_scheduler,
    step_scheduler,
)

__all__ = [
    "SCHEDULERS",
    "ComposerScheduler",
    "ComposerSchedulerFn",
    "ConstantLRHparams",
    "CosineAnnealingLRHparams",
    "CosineAnnealingWarmRestartsHparams",
    "CosineAnnealingWithWarmupLRHparams",
    "ExponentialLRHparams",
    "LinearLRHparams",
    "LinearWithWarmupLRHparams",
    "MultiStepLRHparams",
    "MultiStepWithWarmupLRHparams",
    "PolynomialLRHparams",
    "SchedulerHparams",
    "State",
    "StepLRHparams",
    "Time",
    "TimeUnit",
    "compile",
    "constant_scheduler",
    "cosine_annealing_scheduler",
    "cosine_annealing_warm_restarts_scheduler",
    "cosine_annealing_with_warmup_scheduler",
    "exponential_scheduler",
    "linear_scheduler",
    "linear_with_warmup_scheduler",
    "multi_step_scheduler",
    "multi_step_with_warmup_scheduler",
    "polynomial_scheduler",
    "step_scheduler",
    "to_lambda_lr",
]


class ComposerSchedulerFn(Protocol):
    """Specification for a "stateless" scheduler function.

    A scheduler function is a pure function that returns a multiplier to apply to the optimizer's learning rate, given
    the current trainer state and optionally a scale schedule ratio (SSR). A typical implementation reads
    ``state.timer``, and possibly ``state.max_duration``, to find how far training has progressed. The eleven
    ``*_scheduler`` functions of :mod:`~composer.optim.scheduler_functions`, with their keyword arguments bound (for example by
    ``functools.partial`` or :meth:`SchedulerHparams.initialize_object`), satisfy it; :func:`to_lambda_lr` also accepts
    functions that take ``ssr`` positionally, and functions of the state alone when ``ssr == 1``.

    Example:
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> def halve_after_100_batches(state, *, ssr=1.0):
        ...     return 0.5 if state.timer.batch.value >= 100 * ssr else 1.0
    """

    def __call__(self, state: State, *, ssr: float = 1.0) -> float:
        """Returns the learning-rate multiplier for ``state``'s current time."""
        ...


ComposerScheduler = ComposerSchedulerFn | LRScheduler
"""Either kind of schedule the trainer steps: a scheduler function, or a torch scheduler."""


# ----- compiling into a torch scheduler ----------------------------------------------------------------------------


def _bind_ssr(scheduler: Callable[..., float], ssr: float, name: str) -> Callable[[State], float]:
    """Returns ``scheduler`` as a function of the state alone, passing ``ssr`` the way its signature accepts it."""
    try:
        parameters = list(inspect.signature(scheduler).parameters.values())
    except (TypeError, ValueError):  # no introspectable signature: assume the protocol
        return lambda state: float(scheduler(state, ssr=ssr))
    kinds = {parameter.kind for parameter in parameters}
    names = {parameter.name for parameter in parameters}
    if "ssr" in names or inspect.Parameter.VAR_KEYWORD in kinds:
        return lambda state: float(scheduler(state, ssr=ssr))
    positional = [
        p for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) >= 2 or inspect.Parameter.VAR_POSITIONAL in kinds:
        return lambda state: float(scheduler(state, ssr))
    if len(positional) == 1:
        if ssr != 1.0:
            raise ValueError(
                f"{name} takes only the state, so it cannot apply the scale schedule ratio ssr={ssr!r}. To fix, add "
                "an `ssr` argument to it (`def schedule(state, *, ssr=1.0)`) and scale its times by ssr, or train "
                "with ssr=1.0."
            )
        return lambda state: float(scheduler(state))
    raise ValueError(f"{name} must take the training state as its first argument, e.g. `def schedule(state, *, ssr)`.")


def _single_optimizer(state: State) -> torch.optim.Optimizer:
    optimizers = list(state.optimizers or [])
    if len(optimizers) == 1:
        return optimizers[0]
    if not optimizers:
        raise ValueError("state.optimizers is empty; set it, or pass the optimizer to schedule as optimizer=.")
    raise ValueError(
        f"state.optimizers holds {len(optimizers)} optimizers and a scheduler applies to one; pass the optimizer "
        "to schedule as optimizer=."
    )


def to_lambda_lr(
    scheduler: Callable[..., float] | Sequence[Callable[..., float]],
    state: State,
    ssr: float = 1.0,
    optimizer: torch.optim.Optimizer | None = None,
) -> LambdaLR:
    """Turns scheduler functions into a torch :class:`~torch.optim.lr_scheduler.LambdaLR`.

    Each parameter group's learning rate becomes its initial learning rate times the product of the schedulers'
    multipliers, evaluated on the live ``state.timer`` (LambdaLR's own step counter is ignored, so stepping it twice
    or resuming it from a checkpoint changes nothing). LambdaLR sets the learning rate once at construction, for the
    current time; call ``step()`` after every batch (after ``state.timer.on_batch_complete()``).

    Args:
        scheduler: One scheduler function or a sequence of them; their multipliers multiply. Each takes the state and
            ``ssr`` (as a keyword, or as a second positional argument); a function of the state alone is accepted
            when ``ssr == 1``.
        state: The training state the schedule reads.
        ssr: The scale schedule ratio passed to every scheduler. Default = 1.0.
        optimizer: The optimizer to schedule. Default: the single optimizer in ``state.optimizers``.

    Returns:
        The LambdaLR.

    Raises:
        ValueError: If there is no scheduler, a function of the state alone is given with ``ssr != 1``, or no
            optimizer is given and ``state.optimizers`` does not hold exactly one.

    Example:
        >>> import functools
        >>> import torch
        >>> from composer.core.state import State
        >>> model = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        >>> state = State(model, max_duration="100ba", optimizers=optimizer)
        >>> halve = lambda state: 0.5
        >>> decay = functools.partial(linear_scheduler, end_factor=0.0)
        >>> lr_scheduler = to_lambda_lr([halve, decay], state)
        >>> for _ in range(20):
        ...     optimizer.step()
        ...     state.timer.on_batch_complete()
        >>> lr_scheduler.step()
        >>> optimizer.param_groups[0]["lr"]  # 0.5 * 0.8
        0.4
    """
    check_ssr(ssr)
    functions = [scheduler] if callable(scheduler) else list(scheduler)
    if not functions:
        raise ValueError("scheduler is an empty sequence; pass at least one scheduler function.")
    for i, function in enumerate(functions):
        if not callable(function):
            raise TypeError(f"scheduler[{i}]={function!r} is not callable; pass functions of (state, *, ssr).")
    bound = [_bind_ssr(function, ssr, _describe(function)) for function in functions]
    target = optimizer if optimizer is not None else _single_optimizer(state)

    def multiplier(_: int) -> float:
        product = 1.0
        for function in bound:
            product *= function(state)
        return product

    return LambdaLR(target, multiplier)


def compile(  # the seed's name (composer.optim.scheduler.compile), though it shadows the builtin here
    scheduler: Callable[..., float] | Sequence[Callable[..., float]],
    state: State,
    ssr: float = 1.0,
    optimizer: torch.optim.Optimizer | None = None,
) -> LambdaLR:
    """The seed's name for :func:`to_lambda_lr`: scheduler functions as a torch ``LambdaLR``.

    Args:
        scheduler: One scheduler function or a sequence of them; their multipliers multiply.
        state: The training state the schedule reads.
        ssr: The scale schedule ratio passed to every scheduler.
        optimizer: The optimizer to schedule. Default: the single optimizer in ``state.optimizers``.

    Returns:
        LambdaLR: What :func:`to_lambda_lr` returns.
    """
    return to_lambda_lr(scheduler, state, ssr, optimizer)


def _describe(function: Callable[..., Any]) -> str:
    if isinstance(function, functools.partial):
        return f"The scheduler {getattr(function.func, '__name__', repr(function.func))}"
    return f"The scheduler {getattr(function, '__qualname__', repr(function))}"


# ----- config classes ----------------------------------------------------------------------------------------------


class SchedulerHparams(Hparams, abc.ABC):
    """The base of the scheduler configs: the fields are the keyword arguments of :attr:`scheduler_function`.

    :meth:`initialize_object` returns that function with the fields bound, a :class:`ComposerSchedulerFn`.
    """

    scheduler_function: ClassVar[Callable[..., float]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        target = cls.__dict__.get("target")  # a config derived from its function by hparams_for
        if target is not None:
            cls.scheduler_function = target
            cls.__doc__ = cls.__doc__ or f"Hyperparameters for the :func:`{target.__name__}` scheduler."

    def validate(self) -> None:
        """Checks the arguments that do not depend on the state: times parse, factors and gamma are non-negative."""
        for name, value in self.to_dict().items():
            if name in ("total_time", "t_max", "t_0", "warmup_time", "step_size"):
                parse_time(value, name)
            elif name == "milestones":
                check_milestones(value)
            elif name in ("factor", "start_factor", "end_factor", "min_factor"):
                check_factors(**{name: value})
            elif name == "gamma":
                check_at_least(value, name, 0.0, "use a decay factor such as 0.1")
            elif name == "power":
                check_at_least(value, name, 0.0, "use for example 1.0 for a linear decay")
            elif name == "t_mult" and not value > 0:
                raise ValueError(f"t_mult={value!r} must be a positive number; use 1.0 for cycles of equal length.")

    def initialize_object(self) -> ComposerSchedulerFn:
        """Returns the scheduler function with this config's fields bound: a callable ``(state, *, ssr=1.0)``."""
        return functools.partial(type(self).scheduler_function, **self.to_dict())


ConstantLRHparams = hparams_for(
    constant_scheduler, name="ConstantLRHparams", base=SchedulerHparams, exclude=("state", "ssr")
)
"""Hyperparameters for the :func:`constant_scheduler` scheduler."""
LinearLRHparams = hparams_for(linear_scheduler, name="LinearLRHparams", base=SchedulerHparams, exclude=("state", "ssr"))
"""Hyperparameters for the :func:`linear_scheduler` scheduler."""
ExponentialLRHparams = hparams_for(
    exponential_scheduler, name="ExponentialLRHparams", base=SchedulerHparams, exclude=("state", "ssr")
)
"""Hyperparameters for the :func:`exponential_scheduler` scheduler."""
StepLRHparams = hparams_for(step_scheduler, name="StepLRHparams", base=SchedulerHparams, exclude=("state", "ssr"))
"""Hyperparameters for the :func:`step_scheduler` scheduler."""
MultiStepLRHparams = hparams_for(
    multi_step_scheduler, name="MultiStepLRHparams", base=SchedulerHparams, exclude=("state", "ssr")
)
"""Hyperparameters for the :func:`multi_step_scheduler` scheduler."""
CosineAnnealingLRHparams = hparams_for(
    cosine_annealing_scheduler, name="CosineAnnealingLRHparams", base=SchedulerHparams, exclude=("state", "ssr")
)
"""Hyperparameters for the :func:`cosine_annealing_scheduler` scheduler."""
CosineAnnealingWarmRestartsHparams = hparams_for(
    cosine_annealing_warm_restarts_scheduler,
    name="CosineAnnealingWarmRestartsHparams",
    base=SchedulerHparams,
    exclude=("state", "ssr"),
    first=["t_0", "min_factor", "t_mult"],
    defaults={"t_0": "1dur"},
)
"""Hyperparameters for the :func:`cosine_annealing_warm_restarts_scheduler` scheduler.

The seed's order, and its default of ``t_0``.
"""
PolynomialLRHparams = hparams_for(
    polynomial_scheduler, name="PolynomialLRHparams", base=SchedulerHparams, exclude=("state", "ssr"), first=["power"]
)
"""Hyperparameters for the :func:`polynomial_scheduler` scheduler. The seed's order: ``power`` first."""
MultiStepWithWarmupLRHparams = hparams_for(
    multi_step_with_warmup_scheduler,
    name="MultiStepWithWarmupLRHparams",
    base=SchedulerHparams,
    exclude=("state", "ssr"),
)
"""Hyperparameters for the :func:`multi_step_with_warmup_scheduler` scheduler."""
LinearWithWarmupLRHparams = hparams_for(
    linear_with_warmup_scheduler, name="LinearWithWarmupLRHparams", base=SchedulerHparams, exclude=("state", "ssr")
)
"""Hyperparameters for the :func:`linear_with_warmup_scheduler` scheduler."""
CosineAnnealingWithWarmupLRHparams = hparams_for(
    cosine_annealing_with_warmup_scheduler,
    name="CosineAnnealingWithWarmupLRHparams",
    base=SchedulerHparams,
    exclude=("state", "ssr"),
)
"""Hyperparameters for the :func:`cosine_annealing_with_warmup_scheduler` scheduler."""


SCHEDULERS: dict[str, type[SchedulerHparams]] = {
    "constant": ConstantLRHparams,
    "linear": LinearLRHparams,
    "exponential": ExponentialLRHparams,
    "step": StepLRHparams,
    "multistep": MultiStepLRHparams,
    "cosine_decay": CosineAnnealingLRHparams,
    "cosine_warmrestart": CosineAnnealingWarmRestartsHparams,
    "polynomial": PolynomialLRHparams,
    "multistep_with_warmup": MultiStepWithWarmupLRHparams,
    "linear_decay_with_warmup": LinearWithWarmupLRHparams,
    "cosine_decay_with_warmup": CosineAnnealingWithWarmupLRHparams,
}
"""Config key -> scheduler config class, for YAML files (``schedulers: [{cosine_decay_with_warmup: {...}}]``)."""
