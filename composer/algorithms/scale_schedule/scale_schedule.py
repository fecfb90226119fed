"""Scale schedule: train for ``ratio`` times the budget, with the learning-rate schedule stretched to match.

:func:`scale_scheduler` rescales a torch learning-rate scheduler in place. :class:`ScaleSchedule` sets the run's scale
schedule ratio at ``INIT`` (which scales ``max_duration`` and every composer scheduler) and rescales the torch
schedulers given to the Trainer at ``FIT_START``, once.
"""

from __future__ import annotations

import collections
import math
import warnings
from typing import Any

from torch.optim.lr_scheduler import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LRScheduler,
    MultiStepLR,
    StepLR,
)

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["SCALABLE_SCHEDULERS", "ScaleSchedule", "ScaleScheduleHparams", "UnsupportedMethodError", "scale_scheduler"]

SCALABLE_SCHEDULERS = (CosineAnnealingLR, CosineAnnealingWarmRestarts, ExponentialLR, MultiStepLR, StepLR)
"""The torch schedulers :func:`scale_scheduler` can rescale."""

_METHODS = ("epoch", "epochs")


def _check_ratio(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
        raise ValueError(
            f"{name}={value!r} must be a positive, finite number: 0.5 makes the schedule take half as long, 2.0 "
            "twice as long."
        )


class UnsupportedMethodError(NotImplementedError, ValueError):
    """An unsupported ``method``: a NotImplementedError (as the seed documents) that is also a ValueError."""


def _check_method(method: str) -> None:
    if method not in _METHODS:
        raise UnsupportedMethodError(
            f"ScaleSchedule method={method!r} is not supported; only 'epoch' (or its spelling 'epochs') is."
        )


def _scaled_period(name: str, value: int, ssr: float) -> int:
    scaled = int(value * ssr)
    if scaled < 1:
        raise ValueError(
            f"ssr={ssr} makes the scheduler's {name}={value} round down to {scaled}; use a larger ssr or a scheduler "
            "that spans more steps."
        )
    return scaled


def scale_scheduler(scheduler: LRScheduler, ssr: float, orig_max_epochs: int | None = None) -> None:
    """Makes a learning rate schedule take a different number of epochs (in place).

    Periods are multiplied by ``ssr`` and rounded down: ``T_max`` (CosineAnnealingLR), ``T_0`` and the current
    cycle ``T_i`` (CosineAnnealingWarmRestarts), ``step_size`` (StepLR), each milestone (MultiStepLR). ExponentialLR
    gets ``gamma ** (1 / ssr)``, which reaches the same learning rate in ``ssr`` times the steps. Call it before the
    scheduler has stepped (or right after loading its state dict, never twice).

    See :class:`ScaleSchedule` for more information.

    Args:
        scheduler: A learning rate schedule object. Must be one of ``torch.optim.lr_scheduler.CosineAnnealingLR``,
            ``CosineAnnealingWarmRestarts``, ``ExponentialLR``, ``MultiStepLR`` or ``StepLR``.
        ssr: The factor by which to scale the duration of the schedule. E.g., 0.5 makes the schedule take half as
            many epochs and 2.0 makes it take twice as many epochs.
        orig_max_epochs: The current number of epochs spanned by ``scheduler``. When given, it replaces
            CosineAnnealingLR's ``T_max`` before scaling; the other schedulers have no span and ignore it.

    Raises:
        ValueError: If ``scheduler`` is not an instance of one of the above types, ``ssr`` is not positive, or a
            scaled period rounds down to zero.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)
        >>> scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=90)
        >>> scale_scheduler(scheduler, 0.5)
        >>> scheduler.T_max
        45
    """
    _check_ratio("ssr", ssr)
    if not isinstance(scheduler, SCALABLE_SCHEDULERS):
        raise ValueError(
            f"scale_scheduler cannot scale a {type(scheduler).__name__}; scheduler must be one of "
            f"{[cls.__name__ for cls in SCALABLE_SCHEDULERS]}. Use a composer scheduler function instead (they "
            "receive the ratio as ssr), or one of those torch schedulers."
        )
    if orig_max_epochs is not None and (isinstance(orig_max_epochs, bool) or not orig_max_epochs > 0):
        raise ValueError(f"orig_max_epochs={orig_max_epochs!r} must be a positive number of epochs, or None.")
    if isinstance(scheduler, CosineAnnealingLR):
        span = scheduler.T_max if orig_max_epochs is None else orig_max_epochs
        scheduler.T_max = _scaled_period("T_max", span, ssr)
    elif isinstance(scheduler, CosineAnnealingWarmRestarts):
        scheduler.T_0 = _scaled_period("T_0", scheduler.T_0, ssr)
        scheduler.T_i = _scaled_period("T_i", scheduler.T_i, ssr)
        scheduler.T_cur = scheduler.T_cur * ssr  # type: ignore[assignment]  # torch annotates an int; it is a float
    elif isinstance(scheduler, ExponentialLR):
        scheduler.gamma = scheduler.gamma ** (1.0 / ssr)
    elif isinstance(scheduler, MultiStepLR):
        scheduler.milestones = collections.Counter(
            {int(milestone * ssr): count for milestone, count in scheduler.milestones.items()}
        )
    else:
        scheduler.step_size = _scaled_period("step_size", scheduler.step_size, ssr)


def _is_composer_schedule(scheduler: Any) -> bool:
    """Whether ``scheduler`` is a LambdaLR compiled from composer scheduler functions (those already apply ssr)."""
    return isinstance(scheduler, LambdaLR) and all(
        getattr(fn, "__module__", None) == "composer.optim.scheduler" for fn in scheduler.lr_lambdas
    )


class ScaleSchedule(Algorithm):
    """Makes the learning rate schedule take a different number of epochs.

    Training for less time is a strong baseline approach to speeding up training, provided that the training still
    gets through the entire learning rate schedule. E.g., training for half as long often yields little accuracy
    degradation, provided that the learning rate schedule is rescaled to take half as long as well. In contrast, if
    the schedule is not rescaled, training for half as long would mean simply stopping halfway through the training
    curve, which does not reach nearly as high an accuracy.

    At ``Event.INIT`` it sets ``state.scale_schedule_ratio = ratio``: ``max_duration`` becomes ``ratio`` times the
    duration the Trainer was given, and the composer schedulers (built after ``INIT``) receive ``ssr=ratio``. At
    ``Event.FIT_START`` it rescales the torch schedulers given to the Trainer with :func:`scale_scheduler` (with a
    ratio of 1.0 there is nothing to rescale, and none is checked). Both are idempotent: a second ``fit()`` or a run
    resumed from a checkpoint (whose algorithm state records which schedulers were scaled) does not scale again. The
    ratio replaces the Trainer's ``scale_schedule_ratio``; a different value there is overridden with a warning.

    Args:
        ratio: The factor by which to scale the duration of the schedule. E.g., 0.5 makes the schedule take half as
            many epochs and 2.0 makes it take twice as many epochs.
        method: Currently only ``"epoch"`` (also spelled ``"epochs"``) is supported. Default: ``"epoch"``.

    Raises:
        ValueError: If ``ratio`` is not positive; during apply, if a torch scheduler is not supported by
            :func:`scale_scheduler`, or if the resulting number of epochs after scaling is zero.
        NotImplementedError: If ``method`` is not ``"epoch"`` or ``"epochs"`` (an :class:`UnsupportedMethodError`,
            which is a ValueError too).

    Example:
        >>> from composer import Trainer
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ep",
        ...                   algorithms=[ScaleSchedule(ratio=0.5)], progress_bar=False)
        >>> trainer.state.max_duration
        Time(2, TimeUnit.EPOCH)
    """

    def __init__(self, ratio: float, method: str = "epoch") -> None:
        _check_ratio("ratio", ratio)
        _check_method(method)
        self.ratio = ratio
        self.method = method
        self._scaled: list[int] = []  # positions in state.schedulers already rescaled

    def match(self, event: Event, state: State) -> bool:
        """Runs at INIT (the ratio) and FIT_START (torch schedulers)."""
        return event in (Event.INIT, Event.FIT_START)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Sets the run's scale schedule ratio, or rescales the torch schedulers not rescaled yet."""
        if event == Event.INIT:
            if state.scale_schedule_ratio not in (1.0, self.ratio):
                warnings.warn(
                    f"ScaleSchedule(ratio={self.ratio}) replaces the Trainer's scale_schedule_ratio="
                    f"{state.scale_schedule_ratio}; pass only one of them.",
                    stacklevel=2,
                )
            state.scale_schedule_ratio = self.ratio
            return
        if self.ratio == 1.0:
            return  # nothing to rescale
        for index, scheduler in enumerate(state.schedulers):
            if index not in self._scaled and not _is_composer_schedule(scheduler):
                scale_scheduler(scheduler, self.ratio)
                self._scaled.append(index)

    def state_dict(self) -> dict[str, Any]:
        """The ratio and the positions (in ``state.schedulers``) of the torch schedulers already rescaled."""
        return {"ratio": float(self.ratio), "scaled_schedulers": list(self._scaled)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores which schedulers were rescaled, so a resumed run does not scale them again."""
        self._scaled = [int(i) for i in state.get("scaled_schedulers", [])]


ScaleScheduleHparams = hparams_for(ScaleSchedule)
"""See :class:`ScaleSchedule`; the fields are its arguments (YAML key ``scale_schedule``)."""
