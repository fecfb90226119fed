"""Stops a run whose loss stops being a finite number: at the bad microbatch (:class:`NaNMonitor`, one device sync
each), or without a device sync per batch (:class:`DeferredNaNMonitor`, what the Trainer runs by default)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import TimeUnit

__all__ = ["DeferredNaNMonitor", "NaNMonitor", "NaNMonitorHparams", "NonFiniteLossError"]

# DeferredNaNMonitor keeps one loss per batch on the device; every this many it stacks them into one tensor (one
# kernel, no read), so that a long epoch holds a few large tensors rather than many small ones.
_FOLD_EVERY = 256

_TO_FIX = (
    "To fix: lower the learning rate, clip gradients (grad_clip_norm), use precision='bf16' or 'fp32' instead of "
    "'amp', or inspect this batch's inputs."
)


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (raised by :class:`NaNMonitor`, and by the Trainer by default)."""


def _tensors(loss: Any) -> Iterator[torch.Tensor]:
    if isinstance(loss, torch.Tensor):
        yield loss
    elif isinstance(loss, Mapping):
        for value in loss.values():
            yield from _tensors(value)
    elif isinstance(loss, (list, tuple)):
        for value in loss:
            yield from _tensors(value)


class NaNMonitor(Callback):
    """Raises :class:`NonFiniteLossError` at ``AFTER_LOSS`` when the loss holds a NaN or an infinity.

    The check runs on every microbatch right after the loss is computed, before the backward pass and the optimizer
    step, so the weights (and the optimizer state) are left as the last good batch made them; the error names the
    batch, so the run can be resumed from a checkpoint and the batch inspected. Checking costs one device
    synchronisation per microbatch. Without it, the Trainer checks by default (``check_finite=True``) with a
    :class:`DeferredNaNMonitor`, which costs no sync per batch but stops later; passing a NaNMonitor replaces that.

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   optimizers=torch.optim.SGD(model.parameters(), lr=float("inf")),
        ...                   callbacks=[NaNMonitor()], progress_bar=False)
        >>> try:
        ...     trainer.fit()
        ... except NonFiniteLossError as error:
        ...     print(error)
        The training loss is nan at batch 1 (epoch 0, batch 1 of the epoch, microbatch 0); training stopped before
        the optimizer step, so the weights are those after batch 0. ...
    """

    def __init__(self) -> None:
        self._microbatch = 0

    def before_train_batch(self, state: State, logger: Logger) -> None:
        del state, logger
        self._microbatch = 0

    def after_loss(self, state: State, logger: Logger) -> None:
        del logger
        microbatch = self._microbatch
        self._microbatch += 1
        tensors = list(_tensors(state.loss))
        if not tensors:
            return
        # One device-to-host copy for all parts of the loss.
        finite = torch.stack([torch.isfinite(t.detach()).all() for t in tensors]).all()
        if bool(finite):
            return
        bad = next(t for t in tensors if not bool(torch.isfinite(t.detach()).all()))
        value = bad.detach().flatten()[~torch.isfinite(bad.detach().flatten())][0].item()
        timer = state.timer
        batch = timer.batch.value
        weights = f"those after batch {batch - 1}" if batch else "the initial ones"
        raise NonFiniteLossError(
            f"The training loss is {value} at batch {batch} (epoch {timer.epoch.value}, batch "
            f"{timer.batch_in_epoch.value} of the epoch, microbatch {microbatch}); training stopped before the "
            f"optimizer step, so the weights are {weights}. {_TO_FIX}"
        )


class DeferredNaNMonitor(Callback):
    """Raises :class:`NonFiniteLossError`, naming the batch, when a batch's training loss was NaN or infinite,
    without a device sync per batch: the Trainer's default check (``check_finite=True``).

    Each batch's loss stays on the device, unread (at ``BATCH_END``: the batch's loss, summed over its microbatches,
    is already detached from the graph, so keeping it costs no device work). The losses are read together, once,
    where the host waits for the device anyway: at each epoch's end, at the end of ``fit``, and before any
    :class:`~composer.callbacks.CheckpointSaver` writes (it calls :meth:`check`), so no checkpoint is written after a
    non-finite loss. The run stops at the first of those points after the bad batch, having trained on since, most
    likely on weights that are no longer finite; :class:`NaNMonitor` stops at the bad microbatch itself, before its
    optimizer step, for one sync per microbatch.

    Example:
        >>> monitor = DeferredNaNMonitor()
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> state.loss = torch.tensor(float("inf"))
        >>> state.timer.on_batch_complete()  # at BATCH_END, batch 0 is complete
        >>> monitor.batch_end(state, logger=None)  # kept on the device, unread
        >>> monitor.check(state, "by hand")
        Traceback (most recent call last):
        ...
        composer.callbacks.nan_monitor.NonFiniteLossError: The training loss was inf at batch 0 (epoch 0, batch 0 ...
    """

    def __init__(self) -> None:
        # The losses not yet read (stacked into chunks every _FOLD_EVERY), the batch of each, and where each epoch
        # starts: (index of its first loss, epoch, its first batch).
        self._values: list[torch.Tensor] = []
        self._chunks: list[torch.Tensor] = []
        self._batches: array[int] = array("q")
        self._epochs: list[tuple[int, int, int]] = []

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        timer = state.timer  # a resumed run may start in the middle of an epoch
        self._epochs.append((len(self._batches), timer.epoch.value, timer.batch.value - timer.batch_in_epoch.value))

    def epoch_start(self, state: State, logger: Logger) -> None:
        del logger
        self._epochs.append((len(self._batches), state.timer.epoch.value, state.timer.batch.value))

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        loss = state.loss
        if isinstance(loss, torch.Tensor) and loss.dim() == 0:
            value = loss.detach() if loss.requires_grad else loss
        else:
            tensors = list(_tensors(loss))
            if not tensors:
                return
            value = torch.stack([t.detach().float().sum() for t in tensors]).sum()  # not finite if a part is not
        self._values.append(value)
        self._batches.append(state.timer.count(TimeUnit.BATCH) - 1)  # the batch just completed
        if len(self._values) >= _FOLD_EVERY:
            self._chunks.append(torch.stack(self._values))
            self._values = []

    def epoch_end(self, state: State, logger: Logger) -> None:
        del logger
        self.check(state, "at the end of the epoch")

    def fit_end(self, state: State, logger: Logger) -> None:
        del logger
        self.check(state, "at the end of fit")

    def check(self, state: State, when: str = "before a checkpoint is written") -> None:
        """Reads the losses recorded since the last check and raises if one was not finite.

        One device-to-host read, whatever the number of batches since the last check; nothing to do when no batch
        has ended since.

        Args:
            state (State): The training state (for the current time, in the message).
            when (str): Where the check runs, for the message.

        Raises:
            NonFiniteLossError: Naming the first batch whose loss was NaN or infinite.
        """
        if not self._batches:
            return
        values = torch.cat([*self._chunks, torch.stack(self._values)] if self._values else self._chunks)
        finite = torch.isfinite(values)
        ok = bool(finite.all())  # the one read: the host waits for the device here
        batches, epochs = self._batches, self._epochs
        self._values, self._chunks, self._batches = [], [], array("q")
        self._epochs = [(0, epoch, first) for _, epoch, first in epochs[-1:]]  # the current epoch goes on
        if ok:
            return
        index = int((~finite).nonzero()[0, 0])
        value = values[index].item()
        batch = batches[index]
        timer = state.timer  # for a monitor driven by hand, without fit's events: the current epoch
        unmarked = (0, timer.epoch.value, timer.batch.value - timer.batch_in_epoch.value)
        _, epoch, first = next((mark for mark in reversed(epochs) if mark[0] <= index), unmarked)
        now = timer.batch.value
        raise NonFiniteLossError(
            f"The training loss was {value} at batch {batch} (epoch {epoch}, batch {batch - first} of the epoch); "
            f"found {when}, after batch {now - 1}: the loss is read from the device only where training waits for it "
            f"anyway (epoch ends, checkpoints, the end of fit), so {now - 1 - batch} more batch(es) trained after it, "
            f"and the weights are most likely no longer finite. No checkpoint was written after batch {batch}: resume "
            f"from the newest one to inspect it. {_TO_FIX} To stop at the bad batch itself, before its optimizer step, "
            "pass callbacks=[NaNMonitor()] (one device sync per microbatch); to handle non-finite losses yourself, "
            "pass check_finite=False to the Trainer."
        )


NaNMonitorHparams = hparams_for(NaNMonitor)
"""See :class:`NaNMonitor`; the fields are its arguments (YAML key ``nan_monitor``)."""
