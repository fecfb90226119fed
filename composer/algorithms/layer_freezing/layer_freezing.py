"""Layer freezing: stop training the earliest layers of a network, more of them as training goes on.

The function :func:`freeze_layers` does the work on any ``nn.Module`` and its optimizers; :class:`LayerFreezing` calls
it at the end of every epoch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["LayerFreezing", "LayerFreezingHparams", "freeze_layers", "freeze_schedule"]


def _check_fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"LayerFreezing {name}={value!r} must be a fraction in [0, 1]; for example {name}=0.5 "
            f"(the defaults are freeze_start=0.5, freeze_level=1.0)."
        )


def freeze_schedule(fraction_done: float, freeze_start: float, freeze_level: float) -> float:
    """The fraction of layers (out of all but the last) to freeze once ``fraction_done`` of training has run.

    Zero until ``freeze_start``, then growing linearly to ``freeze_level`` at the end of training:
    ``freeze_level * (fraction_done - freeze_start) / (1 - freeze_start)``.

    Args:
        fraction_done: The fraction of training completed, in [0, 1] (larger values count as 1).
        freeze_start: The fraction of training to run before freezing begins.
        freeze_level: The fraction of layers frozen at the end of training.

    Returns:
        float: The fraction to freeze, in ``[0, freeze_level]``.

    Example:
        >>> freeze_schedule(0.25, freeze_start=0.5, freeze_level=1.0)
        0.0
        >>> freeze_schedule(0.75, freeze_start=0.5, freeze_level=0.8)
        0.4
    """
    _check_fraction("freeze_start", freeze_start)
    _check_fraction("freeze_level", freeze_level)
    fraction_done = min(max(fraction_done, 0.0), 1.0)
    if fraction_done <= freeze_start:
        return 0.0
    return freeze_level * (fraction_done - freeze_start) / (1.0 - freeze_start)


def _layers(model: torch.nn.Module) -> list[list[torch.nn.Parameter]]:
    """The model's layers in definition order: the parameters each module owns directly, for modules owning some.

    ``named_modules`` walks depth first in the order modules were assigned, which for sequential networks (and
    ResNets, transformers) is input-to-output order. A parameter shared by several modules belongs to the first.
    """
    seen: set[int] = set()
    layers: list[list[torch.nn.Parameter]] = []
    for _, module in model.named_modules():
        params = [p for p in module.parameters(recurse=False) if id(p) not in seen]
        if params:
            seen.update(id(p) for p in params)
            layers.append(params)
    return layers


def freeze_layers(
    model: torch.nn.Module,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None,
    current_epoch: int | float,
    max_epochs: int | float,
    freeze_start: float,
    freeze_level: float,
    logger: Logger | None = None,
) -> torch.nn.Module:
    """Progressively freeze the layers of the network during training, starting with the earlier layers.

    A *layer* is a module that directly owns parameters (a ``Linear``, a ``Conv2d``, a ``BatchNorm2d``, ...), taken
    in the order the model defines them (``model.named_modules()``). With ``L`` layers and
    ``f = current_epoch / max_epochs``, the first ``floor(freeze_schedule(f, freeze_start, freeze_level) * (L - 1))``
    layers are frozen; the last layer is never frozen. Freezing a layer sets ``requires_grad=False`` on its
    parameters, drops their gradients, and removes them (and their optimizer state, such as momentum buffers) from
    every optimizer, so neither the gradient step nor weight decay can change them: from then on they stay bitwise
    identical. Their backward computation is skipped too, which is the speed-up. Freezing only ever grows: layers
    frozen earlier stay frozen. Buffers (batch-norm running statistics) are not parameters and still update in
    training mode.

    This freezing schedule is most similar to FreezeOut (Brock et al. 2017) and Freeze Training (Raghu et al. 2017).

    Args:
        model: The model being trained.
        optimizers: The optimizer(s) training it; frozen parameters are removed from their param groups.
        current_epoch: Epochs completed (may be fractional).
        max_epochs: Epochs the run lasts (may be fractional).
        freeze_start: The fraction of epochs to run before freezing begins, in [0, 1].
        freeze_level: The maximum fraction of layers to freeze, in [0, 1].
        logger: If given, logs ``layer_freezing/layers_frozen`` and ``layer_freezing/percentage_frozen`` per epoch.

    Returns:
        torch.nn.Module: ``model``, changed in place.

    Raises:
        ValueError: If ``freeze_start`` or ``freeze_level`` is outside [0, 1], or ``max_epochs`` is not positive.

    Example:
        >>> from composer.optim import DecoupledSGDW
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        >>> opt = DecoupledSGDW(net.parameters(), lr=0.1, momentum=0.9)
        >>> net = freeze_layers(net, opt, current_epoch=3, max_epochs=4, freeze_start=0.5, freeze_level=1.0)
        >>> [p.requires_grad for p in net.parameters()]  # 3 layers; floor(0.5 * 2) = 1 frozen
        [False, False, True, True, True, True]
        >>> len(opt.param_groups[0]["params"])
        4
    """
    _check_fraction("freeze_start", freeze_start)
    _check_fraction("freeze_level", freeze_level)
    if not max_epochs > 0:
        raise ValueError(f"freeze_layers max_epochs={max_epochs!r} must be positive (the length of the run in epochs).")
    layers = _layers(model)
    fraction = freeze_schedule(current_epoch / max_epochs, freeze_start, freeze_level)
    # The small epsilon keeps float error (0.1 * 20 = 1.9999...) from losing a layer at exact schedule points.
    depth = min(math.floor(fraction * (len(layers) - 1) + 1e-9), max(len(layers) - 1, 0))

    to_freeze = [p for layer in layers[:depth] for p in layer if p.requires_grad]
    for p in to_freeze:
        p.requires_grad_(False)
        p.grad = None  # a stale gradient would still be applied by optimizers that keep the param
    if to_freeze:
        _remove_from_optimizers(optimizers, {id(p) for p in to_freeze})

    if logger is not None:
        frozen = sum(1 for layer in layers if not any(p.requires_grad for p in layer))
        logger.metric_epoch(
            {
                "layer_freezing/layers_frozen": frozen,
                "layer_freezing/percentage_frozen": frozen / len(layers) if layers else 0.0,
            }
        )
    return model


def _remove_from_optimizers(
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None, frozen: set[int]
) -> None:
    if optimizers is None:
        return
    for optimizer in [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else optimizers:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in frozen:
                    optimizer.state.pop(p, None)
            # Empty groups stay, so per-group schedules (LambdaLR's base_lrs) keep lining up.
            group["params"] = [p for p in group["params"] if id(p) not in frozen]


class LayerFreezing(Algorithm):
    """Progressively freeze the layers of the network during training, starting with the earlier layers.

    Freezing starts after the fraction of epochs specified by ``freeze_start`` have run. The fraction of layers frozen
    increases linearly until it reaches ``freeze_level`` at the final epoch. Frozen layers get no gradient and leave
    the optimizers, so they cost no backward compute and their weights stay exactly as they were. See
    :func:`freeze_layers` for what a layer is and the exact rule.

    This freezing schedule is most similar to FreezeOut and Freeze Training. Runs on ``Event.EPOCH_END`` (after the
    epoch counter has advanced). It declares ``find_unused_parameters = True``, since frozen parameters receive no
    gradient under DDP.

    Resuming from a checkpoint saved after layers were frozen is not supported yet: the saved optimizer holds fewer
    parameters than a freshly built one.

    Args:
        freeze_start: The fraction of epochs to run before freezing begins. Default: 0.5.
        freeze_level: The maximum fraction of layers to freeze. Default: 1.0.

    Example:
        >>> from composer import Trainer
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(
        ...     model=model,
        ...     train_dataloader=train_dataloader,
        ...     max_duration="4ep",
        ...     algorithms=[LayerFreezing(freeze_start=0.5, freeze_level=1.0)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
        >>> [p.requires_grad for p in model.parameters()]  # 2 layers: the first freezes, the last never does
        [False, False, True, True]
    """

    def __init__(self, freeze_start: float = 0.5, freeze_level: float = 1.0) -> None:
        _check_fraction("freeze_start", freeze_start)
        _check_fraction("freeze_level", freeze_level)
        self.freeze_start = freeze_start
        self.freeze_level = freeze_level

    @property
    def find_unused_parameters(self) -> bool:
        """True: frozen parameters get no gradient, which DDP must be told to expect."""
        return True

    def match(self, event: Event, state: State) -> bool:
        """Runs at the end of every epoch."""
        return event == Event.EPOCH_END

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Freezes the layers that the schedule says should be frozen by now."""
        current_epoch: float
        max_epochs: float
        try:
            current_epoch, max_epochs = int(state.timer.epoch), state.max_epochs
        except ValueError:  # a budget in samples or tokens has no epoch count; use the fraction of the run instead
            current_epoch, max_epochs = state.get_elapsed_duration().value, 1.0
        freeze_layers(
            state.model,
            state.optimizers,
            current_epoch=current_epoch,
            max_epochs=max_epochs,
            freeze_start=self.freeze_start,
            freeze_level=self.freeze_level,
            logger=logger,
        )


LayerFreezingHparams = hparams_for(LayerFreezing)
"""See :class:`LayerFreezing`; the fields are its arguments (YAML key ``layer_freezing``)."""
