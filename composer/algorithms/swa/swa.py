"""Stochastic weight averaging (Izmailov et al. 2018, https://arxiv.org/abs/1803.05407).

Near the end of training, SWA keeps the running mean of the weights at the end of every epoch, and at the end of
the run replaces the model's weights by that mean (recomputing the batch-norm statistics for it); the weights it
trained are kept for a later ``fit`` and in checkpoints. Optionally the
learning rate anneals to a constant ``swa_lr`` while averaging, so the snapshots explore a wide, flat region.

The pure functions: :func:`update_swa_weights` (the running mean), :func:`swa_annealed_lr` (the cosine anneal) and
:func:`update_bn_statistics` (batch-norm statistics for new weights). :class:`SWA` runs them in the Trainer.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["SWA", "SWAHparams", "swa_annealed_lr", "update_bn_statistics", "update_swa_weights"]


def _check_args(swa_start: float, anneal_epochs: int, swa_lr: float | None) -> None:
    if isinstance(swa_start, bool) or not isinstance(swa_start, (int, float)) or not 0.0 <= swa_start <= 1.0:
        raise ValueError(
            f"SWA swa_start={swa_start!r} must be a fraction of the run in [0, 1]; e.g. 0.8 averages over the last "
            "20% of training."
        )
    if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int) or anneal_epochs < 0:
        raise ValueError(
            f"SWA anneal_epochs={anneal_epochs!r} must be a non-negative integer number of epochs (0 switches to "
            "swa_lr at once)."
        )
    if swa_lr is not None and (isinstance(swa_lr, bool) or not isinstance(swa_lr, (int, float)) or not swa_lr > 0):
        raise ValueError(
            f"SWA swa_lr={swa_lr!r} must be a positive learning rate, or None to leave the schedule alone."
        )


def update_swa_weights(
    swa_weights: dict[str, torch.Tensor] | None, model: torch.nn.Module, num_averaged: int
) -> dict[str, torch.Tensor]:
    """Adds the model's current parameters to the running mean of ``num_averaged`` earlier snapshots.

    ``mean_{n+1} = mean_n + (w - mean_n) / (n + 1)``; with ``num_averaged == 0`` (or ``swa_weights=None``) the mean
    starts as a copy of the weights. Only parameters are averaged: buffers such as batch-norm statistics are
    recomputed for the averaged weights instead (:func:`update_bn_statistics`).

    Args:
        swa_weights: Parameter name -> running mean (updated in place), or None to start.
        model: The model whose current parameters join the mean.
        num_averaged: How many snapshots ``swa_weights`` already averages.

    Returns:
        dict[str, Tensor]: The running mean (``swa_weights`` itself, when given).

    Example:
        >>> layer = torch.nn.Linear(1, 1, bias=False)
        >>> means = None
        >>> for n, w in enumerate([1.0, 2.0, 6.0]):
        ...     _ = layer.weight.data.fill_(w)
        ...     means = update_swa_weights(means, layer, num_averaged=n)
        >>> means["weight"]
        tensor([[3.]])
    """
    if num_averaged < 0:
        raise ValueError(f"num_averaged={num_averaged!r} must be the number of snapshots averaged so far (>= 0).")
    if swa_weights is None or num_averaged == 0:
        return {name: p.detach().clone() for name, p in model.named_parameters()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            mean = swa_weights.get(name)
            if mean is None:
                raise ValueError(
                    f"update_swa_weights: the model has a parameter {name!r} that the running mean does not; "
                    "the model changed since averaging began. Start a new mean (num_averaged=0)."
                )
            if mean.device != p.device:
                mean = swa_weights[name] = mean.to(p.device)
            mean.add_(p.detach() - mean, alpha=1.0 / (num_averaged + 1))
    return swa_weights


def swa_annealed_lr(start_lr: float, swa_lr: float, progress: float) -> float:
    """The learning rate a fraction ``progress`` of the way through a cosine anneal from ``start_lr`` to ``swa_lr``.

    ``swa_lr + (start_lr - swa_lr) * (1 + cos(pi * progress)) / 2``, with ``progress`` clipped to [0, 1].

    Args:
        start_lr: The learning rate when the anneal starts.
        swa_lr: The learning rate it ends at and keeps while averaging.
        progress: The fraction of the anneal done; clipped to ``[0, 1]``.

    Returns:
        float: The learning rate.

    Example:
        >>> round(swa_annealed_lr(1.0, 0.2, 0.5), 6)  # half way down the cosine
        0.6
    """
    progress = min(max(progress, 0.0), 1.0)
    return swa_lr + (start_lr - swa_lr) * (1.0 + math.cos(math.pi * progress)) / 2.0


def update_bn_statistics(model: torch.nn.Module, batches: Iterable[Any]) -> torch.nn.Module:
    """Recomputes the running statistics of every batch-norm layer of ``model`` over ``batches``.

    Each layer's statistics are reset and re-estimated as the equally weighted mean over the batches (momentum
    ``None``) of the batch statistics, with the model in training mode and without gradients; the layers'
    momentum and the model's mode are restored afterwards. Each item of ``batches`` is passed to ``model`` as is:
    for a :class:`~composer.models.ComposerModel` that is a whole batch, for a plain module an input tensor. A
    model without batch norm is returned at once, without reading ``batches``.

    Args:
        model: The model (changed in place).
        batches: What to run through the model, already on its device.

    Returns:
        torch.nn.Module: ``model``.

    Raises:
        ValueError: If ``model`` has batch norm and ``batches`` is empty.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.BatchNorm1d(1))
        >>> _ = update_bn_statistics(net, [torch.tensor([[0.0], [2.0]]), torch.tensor([[4.0], [6.0]])])
        >>> net[0].running_mean  # the mean over the two batches of the batch means 1 and 5
        tensor([3.])
    """
    norms = [
        m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats
    ]
    if not norms:
        return model
    momenta = [m.momentum for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: every batch counts equally
    model.train()
    seen = 0
    with torch.no_grad():
        for batch in batches:
            model(batch)
            seen += 1
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.train(was_training)
    if seen == 0:
        raise ValueError("update_bn_statistics got no batches; pass the training data to estimate the statistics.")
    return model


def _load_weights(model: torch.nn.Module, weights: Mapping[str, torch.Tensor], buffers: bool = False) -> None:
    tensors = itertools.chain(model.named_parameters(), model.named_buffers() if buffers else ())
    with torch.no_grad():
        for name, t in tensors:
            t.copy_(weights[name])


def _copy_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters and buffers, copied."""
    return {name: t.detach().clone() for name, t in itertools.chain(model.named_parameters(), model.named_buffers())}


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _train_batches(state: State) -> Iterator[Any]:
    """One epoch of the training data (at most ``steps_per_epoch`` batches), on the training device."""
    assert state.train_dataloader is not None
    for batch in itertools.islice(state.train_dataloader, state.steps_per_epoch):
        yield _to_device(batch, state.device)


def _epochs_done(state: State) -> float:
    """Epochs trained so far, fractional when the number of batches per epoch is known."""
    steps = state.steps_per_epoch
    return state.timer.batch.value / steps if steps else float(state.timer.epoch.value)


def _anneal_progress(epochs_since: float, anneal_epochs: int, fraction_since: float, fraction_left: float) -> float:
    """How far the anneal has gone: over ``anneal_epochs`` epochs, or until the end of the run if that is sooner."""
    by_epochs = 1.0 if anneal_epochs == 0 else epochs_since / anneal_epochs
    by_end = 1.0 if fraction_left <= 0 else fraction_since / fraction_left
    return min(1.0, max(0.0, by_epochs, by_end))


def _run_is_over(state: State) -> bool:
    duration = state.max_duration
    return state.stop_requested or state.timer.get(duration.unit).value >= duration.value


class SWA(Algorithm):
    """Apply Stochastic Weight Averaging (Izmailov et al.)

    Stochastic Weight Averaging (SWA) averages model weights sampled at different times near the end of training.
    This leads to better generalization than just using the final trained weights.

    Because this algorithm needs to maintain both the current value of the weights and the average of all of the
    sampled weights, it doubles the model's memory consumption. Note that this does not mean that the total memory
    required doubles, however, since stored activations and the optimizer state are not doubled.

    From ``swa_start`` of the run on, the weights at every ``EPOCH_END`` join the running mean, and with ``swa_lr``
    the learning rate anneals to it; at the end of training the average goes into the model (batch-norm statistics
    recomputed) before the last evaluation and checkpoint, and the training weights are kept to train on in a later
    ``fit`` or a resumed run. The method card (``README.md``) gives the events and the details.

    SWA and :class:`~composer.algorithms.ema.EMA` both decide which weights the model ends with: use one.

    Args:
        swa_start: Fraction of training completed before stochastic weight averaging is applied, in [0, 1].
            Default: 0.8.
        anneal_epochs: Epochs over which the learning rate anneals to ``swa_lr``. Default: 10.
        swa_lr: The final learning rate used for weight averaging, or None to keep the schedule. Default: None.

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ep", optimizers=optimizer,
        ...                   algorithms=[SWA(swa_start=0.5, anneal_epochs=1, swa_lr=0.01)], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.state.algorithms[0].num_averaged  # after epochs 2, 3 and 4
        3
        >>> optimizer.param_groups[0]["lr"]
        0.01
    """

    def __init__(self, swa_start: float = 0.8, anneal_epochs: int = 10, swa_lr: float | None = None) -> None:
        _check_args(swa_start, anneal_epochs, swa_lr)
        self.swa_start = swa_start
        self.anneal_epochs = anneal_epochs
        self.swa_lr = swa_lr
        self._swa_weights: dict[str, torch.Tensor] | None = None
        self._num_averaged = 0
        self._anneal_from: list[float] = []  # each param group's LR when the anneal began
        self._anneal_start: tuple[float, float] | None = None  # (epochs done, fraction of run done) then
        self._training_weights: dict[str, torch.Tensor] | None = None  # while the mean is in the model

    @property
    def num_averaged(self) -> int:
        """How many snapshots the running mean holds."""
        return self._num_averaged

    @property
    def swa_weights(self) -> dict[str, torch.Tensor] | None:
        """The running mean of the parameters (name -> tensor), or None before averaging starts."""
        return self._swa_weights

    @property
    def training_weights(self) -> dict[str, torch.Tensor] | None:
        """The parameters and buffers trained until the mean was put in the model (None while training)."""
        return self._training_weights

    def match(self, event: Event, state: State) -> bool:
        """Past ``swa_start``: every EPOCH_END, and every BATCH_START when annealing the LR; FIT_START after the end."""
        if event == Event.FIT_START:
            return self._training_weights is not None
        ends = event == Event.EPOCH_END or (event == Event.BATCH_END and state.fit_ends_mid_epoch)
        return (ends or (event == Event.BATCH_START and self.swa_lr is not None)) and (
            state.get_elapsed_duration().value >= self.swa_start
        )

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Sets the annealed LR (BATCH_START); adds a snapshot, and at the end swaps in the mean (EPOCH_END); puts
        the trained weights back for a later run (FIT_START)."""
        if event == Event.FIT_START:
            assert self._training_weights is not None
            _load_weights(state.model, self._training_weights, buffers=True)
            self._training_weights = None
            return
        if event == Event.BATCH_START:
            self._anneal_lr(state)
            return
        self._swa_weights = update_swa_weights(self._swa_weights, state.model, self._num_averaged)
        self._num_averaged += 1
        logger.metric_epoch({"swa/num_averaged": self._num_averaged})
        if _run_is_over(state):
            self._training_weights = _copy_weights(state.model)
            _load_weights(state.model, self._swa_weights)
            if state.train_dataloader is not None:
                update_bn_statistics(state.model, _train_batches(state))

    def _anneal_lr(self, state: State) -> None:
        assert self.swa_lr is not None
        groups = [group for optimizer in state.optimizers for group in optimizer.param_groups]
        elapsed = state.get_elapsed_duration().value
        if self._anneal_start is None or len(self._anneal_from) != len(groups):
            self._anneal_start = (_epochs_done(state), elapsed)
            self._anneal_from = [float(group["lr"]) for group in groups]
        start_epochs, start_fraction = self._anneal_start
        progress = _anneal_progress(
            _epochs_done(state) - start_epochs, self.anneal_epochs, elapsed - start_fraction, 1.0 - start_fraction
        )
        for group, start_lr in zip(groups, self._anneal_from):
            group["lr"] = swa_annealed_lr(start_lr, self.swa_lr, progress)

    def state_dict(self) -> dict[str, Any]:
        """The running mean (tensors), the snapshot count, where the LR anneal started, and the trained weights while
        the mean is in the model (``training_weights``, else empty)."""
        return {
            "num_averaged": self._num_averaged,
            "swa_weights": dict(self._swa_weights or {}),
            "anneal_from": list(self._anneal_from),
            "anneal_start": list(self._anneal_start) if self._anneal_start is not None else [],
            "training_weights": dict(self._training_weights or {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` saved."""
        self._num_averaged = int(state["num_averaged"])
        self._swa_weights = dict(state["swa_weights"]) or None
        self._anneal_from = [float(lr) for lr in state.get("anneal_from", [])]
        start = state.get("anneal_start", [])
        self._anneal_start = (float(start[0]), float(start[1])) if start else None
        self._training_weights = dict(state.get("training_weights") or {}) or None


SWAHparams = hparams_for(SWA)
"""See :class:`SWA`; the fields are its arguments (YAML key ``swa``)."""
