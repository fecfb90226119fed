"""Stops a run the moment its loss stops being a finite number, before the bad step reaches the weights."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from composer.core.callback import Callback
from composer.core.hparams import Hparams, hparams
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["NaNMonitor", "NaNMonitorHparams", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (raised by :class:`NaNMonitor`)."""


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
    synchronisation per microbatch.

    Example:
        >>> import torch
        >>> from composer import Trainer
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
            f"optimizer step, so the weights are {weights}. To fix: lower the "
            "learning rate, clip gradients (grad_clip_norm), use precision='bf16' or 'fp32' instead of 'amp', or "
            "inspect this batch's inputs."
        )


@hparams
class NaNMonitorHparams(Hparams):
    """Config for :class:`NaNMonitor` (YAML key ``nan_monitor``)."""

    def initialize_object(self) -> NaNMonitor:
        return NaNMonitor()
