"""Exponential moving average (EMA) of the model weights, used for evaluation and kept at the end.

Training updates the weights as usual; alongside, EMA keeps ``ema = smoothing * ema + (1 - smoothing) * w`` after
every update interval, and evaluation runs on the averaged weights, which are usually less noisy and sometimes
generalize better (Polyak and Juditsky 1992; used by e.g. Tan and Le 2019, https://arxiv.org/abs/1905.11946).
:func:`compute_ema` is the update; :class:`EMA` runs it in the Trainer, swaps the averaged weights in for evaluation
and for checkpoints, and leaves them in the model at the end of ``fit``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch

from composer.algorithms.composition import check_composition
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit

__all__ = ["EMA", "EMAHparams", "compute_ema", "smoothing_from_half_life"]

# The half life used when neither half_life nor smoothing is given.
_DEFAULT_HALF_LIFE = "1000ba"


def _check_smoothing(smoothing: float) -> None:
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing <= 1.0:
        raise ValueError(
            f"EMA smoothing={smoothing!r} must be in [0, 1]: the weight kept by the old average at each update "
            "(e.g. 0.99); 0 copies the model, 1 never updates."
        )


def smoothing_from_half_life(half_life: float, update_interval: float = 1.0) -> float:
    """The per-update smoothing whose weights halve every ``half_life``: ``2 ** (-update_interval / half_life)``.

    Args:
        half_life: Time for a snapshot's weight in the average to halve, positive (same unit as the interval).
        update_interval: Time between updates. Default: 1.

    Returns:
        float: The smoothing factor, in ``(0, 1)``.

    Example:
        >>> round(smoothing_from_half_life(10), 4)
        0.933
        >>> round(smoothing_from_half_life(10) ** 10, 6)  # ten updates halve a snapshot's weight
        0.5
    """
    if not half_life > 0:
        raise ValueError(f"half_life={half_life!r} must be positive, e.g. '1000ba'.")
    if not update_interval > 0:
        raise ValueError(f"update_interval={update_interval!r} must be positive, e.g. '1ba'.")
    return math.exp(-math.log(2.0) * update_interval / half_life)


def _named_tensors(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    yield from model.named_parameters()
    yield from model.named_buffers()


def compute_ema(
    model: torch.nn.Module,
    ema_model: torch.nn.Module | MutableMapping[str, torch.Tensor],
    smoothing: float = 0.99,
) -> None:
    """Moves the weights of ``ema_model`` towards those of ``model``: ``ema = smoothing * ema + (1 - smoothing) * w``.

    Every parameter and floating-point buffer (batch-norm statistics) is averaged; integer buffers (batch counts)
    are copied. The update happens in place. A snapshot's weight halves every ``-log(2) / log(smoothing)`` updates
    (see :func:`smoothing_from_half_life`).

    Args:
        model: The model with the latest weights.
        ema_model: A module with the same parameter and buffer names, or a mapping from those names to tensors (as
            :class:`EMA` keeps it).
        smoothing: The weight of the old average, in [0, 1]. Default: 0.99.

    Example:
        >>> model, ema_model = torch.nn.Linear(1, 1, bias=False), torch.nn.Linear(1, 1, bias=False)
        >>> _ = model.weight.data.fill_(1.0), ema_model.weight.data.fill_(0.0)
        >>> compute_ema(model, ema_model, smoothing=0.9)
        >>> ema_model.weight
        Parameter containing:
        tensor([[0.1000]], requires_grad=True)
    """
    _check_smoothing(smoothing)
    targets = dict(_named_tensors(ema_model)) if isinstance(ema_model, torch.nn.Module) else ema_model
    with torch.no_grad():
        for name, source in _named_tensors(model):
            target = targets.get(name)
            if target is None:
                raise ValueError(
                    f"compute_ema: ema_model has no tensor named {name!r}; it must have the same parameters and "
                    "buffers as model (a deepcopy of it, or the mapping EMA keeps)."
                )
            if target.device != source.device and not isinstance(ema_model, torch.nn.Module):
                target = ema_model[name] = target.to(source.device)
            if source.is_floating_point():
                target.mul_(smoothing).add_(source.detach(), alpha=1.0 - smoothing)
            else:
                target.copy_(source)


def _copy_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in _named_tensors(model)}


def _exchange_weights(model: torch.nn.Module, held: MutableMapping[str, torch.Tensor]) -> None:
    """Puts ``held`` into ``model`` and the model's weights into ``held``, tensor by tensor (one extra at a time)."""
    with torch.no_grad():
        for name, t in _named_tensors(model):
            kept = t.detach().clone()
            t.copy_(held[name])
            held[name] = kept


def _parse_time(name: str, value: str, units: tuple[TimeUnit, ...]) -> Time[Any]:
    time = Time.from_input(value)
    if time.unit not in units:
        raise ValueError(
            f"EMA {name}={value!r} must be in one of the units {[u.value for u in units]} (for example '100ba')."
        )
    return time


def _resolve(
    half_life: str | None, smoothing: float | None, ema_start: str, update_interval: str | None
) -> tuple[float, Time[Any], Time[Any]]:
    """Checks the arguments; returns the per-update smoothing, the update interval and the start time."""
    counts = (TimeUnit.BATCH, TimeUnit.EPOCH)
    if half_life is not None and smoothing is not None:
        raise ValueError(
            f"EMA got half_life={half_life!r} and smoothing={smoothing!r}; give at most one of them (the other "
            "stays None): half_life='1000ba', or smoothing=0.999."
        )
    if half_life is None and smoothing is None:
        half_life = _DEFAULT_HALF_LIFE
    start = _parse_time("ema_start", ema_start, (*counts, TimeUnit.DURATION))
    if start.unit == TimeUnit.DURATION and not 0.0 <= start.value <= 1.0:
        raise ValueError(f"EMA ema_start={ema_start!r} is a fraction of the run and must be in [0, 1].")
    if half_life is not None:
        half = _parse_time("half_life", half_life, counts)
        if half.value <= 0:
            raise ValueError(f"EMA half_life={half_life!r} must be positive, e.g. '1000ba'.")
        interval = _parse_time("update_interval", update_interval or f"1{half.unit.value}", counts)
        if interval.unit != half.unit:
            raise ValueError(
                f"EMA update_interval={update_interval!r} and half_life={half_life!r} must use the same unit."
            )
    else:
        assert smoothing is not None
        _check_smoothing(smoothing)
        interval = _parse_time("update_interval", update_interval or "1ba", counts)
    if interval.value < 1:
        raise ValueError(f"EMA update_interval={update_interval!r} must be at least 1, e.g. '1ba'.")
    if half_life is not None:
        smoothing = smoothing_from_half_life(half.value, interval.value)
    assert smoothing is not None
    return float(smoothing), interval, start


class EMA(Algorithm):
    """Keeps an exponential moving average of the weights, evaluates with it, and ends ``fit`` with it.

    After every ``update_interval`` (at ``Event.BATCH_END`` for batches, ``Event.EPOCH_END`` for epochs), from
    ``ema_start`` on, the averaged weights move towards the model's: ``ema = smoothing * ema + (1 - smoothing) * w``
    (:func:`compute_ema`); the first update copies the model. Parameters and floating-point buffers are averaged.

    Once there is an average, evaluation, the end of ``fit`` and every checkpoint use it, while training goes on
    with the training weights (a run with EMA trains exactly like one without); the method card (``README.md``) says
    at which event each swap happens. EMA cannot be combined with :class:`~composer.algorithms.swa.SWA`: the Trainer
    refuses the pair.

    Args:
        half_life: Time for a snapshot's weight in the average to halve, in ``'ba'`` or ``'ep'``; the smoothing per
            update is ``2 ** (-update_interval / half_life)``. Give this or ``smoothing``, not both. Default: None,
            which means ``'1000ba'`` unless ``smoothing`` is given. Keep it under half of the run (the Trainer warns
            at ``FIT_START`` otherwise): a longer one leaves the average close to the untrained weights.
        smoothing: The weight of the old average at each update, in [0, 1], instead of ``half_life``. Default: None.
        ema_start: When averaging starts: ``'0.0dur'`` (a fraction of the run), ``'100ba'`` or ``'2ep'``.
            Default: ``'0.0dur'``.
        update_interval: Time between updates, in the unit of ``half_life``. Default: one batch or epoch (the unit
            of ``half_life``; one batch with ``smoothing``).

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> ema = EMA(half_life="2ba")  # short against the run (8 batches here)
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> eval_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(8, 8, 3, seed=1), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, eval_dataloader=eval_dataloader,
        ...                   max_duration="2ep", algorithms=[ema], progress_bar=False)
        >>> trainer.fit()  # evaluates with the averaged weights, and ends with them in the model
        >>> all(torch.equal(model.state_dict()[k], v) for k, v in ema.ema_weights.items())
        True
        >>> sorted(ema.training_weights) == sorted(model.state_dict())  # the weights training goes on from
        True
    """

    def __init__(
        self,
        half_life: str | None = None,
        smoothing: float | None = None,
        ema_start: str = "0.0dur",
        update_interval: str | None = None,
    ) -> None:
        self._smoothing, self._interval, self._start = _resolve(half_life, smoothing, ema_start, update_interval)
        self.half_life = half_life
        self.smoothing = smoothing
        self.ema_start = ema_start
        self.update_interval = update_interval
        self._update_event = Event.BATCH_END if self._interval.unit == TimeUnit.BATCH else Event.EPOCH_END
        # The set of weights that is not in the model (None before ema_start): the average while training, the
        # training weights while the average is in the model.
        self._held: dict[str, torch.Tensor] | None = None
        self._average_in_model = False
        self._for_eval = False  # the average was swapped in for one evaluation
        self._model: torch.nn.Module | None = None

    @property
    def ema_weights(self) -> dict[str, torch.Tensor] | None:
        """The averaged parameters and buffers (name -> tensor), or None before ``ema_start``.

        While the average is in the model (after ``fit``), these are the model's own tensors (detached).
        """
        return self._weights(average=True)

    @property
    def training_weights(self) -> dict[str, torch.Tensor] | None:
        """The weights training updates (name -> tensor), or None before ``ema_start`` (they are the model's then).

        While training, these are the model's own tensors (detached); after ``fit``, the copy EMA holds.
        """
        return self._weights(average=False)

    def _weights(self, average: bool) -> dict[str, torch.Tensor] | None:
        if self._held is None:
            return None
        if average != self._average_in_model:
            return self._held
        assert self._model is not None
        return {name: t.detach() for name, t in _named_tensors(self._model)}

    @property
    def update_smoothing(self) -> float:
        """The smoothing applied at each update."""
        return self._smoothing

    @property
    def effective_half_life(self) -> tuple[float, TimeUnit]:
        """The time for a snapshot's weight in the average to halve, as ``(value, unit)`` in ``'ba'`` or ``'ep'``.

        It is ``half_life`` when that was given, else derived from ``smoothing`` (infinite for a smoothing of 1).

        Example:
            >>> EMA(smoothing=0.5, update_interval="2ba").effective_half_life
            (2.0, <TimeUnit.BATCH: 'ba'>)
        """
        if self.smoothing is None:  # half_life given, or the default one
            half = Time.from_input(self.half_life or _DEFAULT_HALF_LIFE)
            return float(half.value), half.unit
        interval = float(self._interval.value)
        if self._smoothing >= 1.0:
            return math.inf, self._interval.unit
        if self._smoothing <= 0.0:
            return 0.0, self._interval.unit
        return interval * math.log(0.5) / math.log(self._smoothing), self._interval.unit

    def _started(self, state: State) -> bool:
        start = self._start
        now = state.get_elapsed_duration() if start.unit == TimeUnit.DURATION else state.timer.get(start.unit)
        return bool(now.value >= start.value)

    def match(self, event: Event, state: State) -> bool:
        """INIT, each update, and the swaps: around evaluation, at the end of ``fit``, back at the next start."""
        if self._held is None:
            return event == Event.INIT or (event == self._update_event and self._update_due(state))
        if self._average_in_model:
            return event == Event.FIT_START or (event == Event.EVAL_END and self._for_eval)
        return event in (Event.INIT, Event.EVAL_START, Event.FIT_END) or (
            event == self._update_event and self._update_due(state)
        )

    def _update_due(self, state: State) -> bool:
        return self._started(state) and state.timer.get(self._interval.unit).value % self._interval.value == 0

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Checks compatibility (INIT), updates the average, or swaps the two sets of weights."""
        self._model = state.model
        if event == Event.INIT:
            check_composition(state.algorithms)  # the Trainer checks first; this covers an Engine run on its own
        elif event in (Event.EVAL_START, Event.EVAL_END, Event.FIT_START, Event.FIT_END):
            self._swap(state.model)
            self._for_eval = event == Event.EVAL_START
        elif self._held is None:
            self._held = _copy_weights(state.model)
        else:
            compute_ema(state.model, self._held, self._smoothing)

    def _swap(self, model: torch.nn.Module) -> None:
        assert self._held is not None
        _exchange_weights(model, self._held)
        self._average_in_model = not self._average_in_model

    @contextlib.contextmanager
    def evaluation_weights(self, state: State) -> Iterator[None]:
        """The average in the model while a checkpoint is written (the training weights go into the state dict)."""
        swap = self._held is not None and not self._average_in_model
        if swap:
            self._model = state.model
            self._swap(state.model)
        try:
            yield
        finally:
            if swap:
                self._swap(state.model)

    def state_dict(self) -> dict[str, Any]:
        """The set of weights that is not in the model (name -> tensor; both empty before ``ema_start``).

        ``ema_weights`` holds the average while the training weights are in the model; ``training_weights`` holds
        the training weights while the average is (in every checkpoint, and after ``fit``).
        """
        held = dict(self._held or {})
        if self._average_in_model:
            return {"ema_weights": {}, "training_weights": held}
        return {"ema_weights": held, "training_weights": {}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the weights held; with ``training_weights``, the model's weights just loaded are the average."""
        training = dict(state.get("training_weights") or {})
        self._average_in_model = bool(training)
        self._held = training or dict(state["ema_weights"]) or None
        self._for_eval = False


EMAHparams = hparams_for(EMA)
"""See :class:`EMA`; the fields are its arguments (YAML key ``ema``)."""
