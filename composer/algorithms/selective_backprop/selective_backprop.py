"""Selective backprop: train each step only on the samples of the batch that the model finds hardest.

:func:`select_using_loss` picks the samples, :func:`should_selective_backprop` says on which batches to do it, and
:class:`SelectiveBackprop` does both inside the training loop.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.precision import Precision
from composer.core.state import State
from composer.models.base import ComposerModel

__all__ = [
    "SelectiveBackprop",
    "SelectiveBackpropHparams",
    "select_using_loss",
    "selection_weights",
    "should_selective_backprop",
]

# Input rank -> the interpolation that downsamples its trailing (spatial) dimensions.
_INTERPOLATION = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _check_fraction(name: str, value: float, *, allow_zero: bool = True) -> None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not ((value >= 0.0 if allow_zero else value > 0.0) and value <= 1.0):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"SelectiveBackprop {name}={value!r} must be in {interval}; for example {name}=0.5.")


def _check_args(start: float, end: float, keep: float, scale_factor: float, interrupt: int) -> None:
    _check_fraction("start", start)
    _check_fraction("end", end)
    if start > end:
        raise ValueError(
            f"SelectiveBackprop start={start!r} must not be after end={end!r}; they bound the part of training "
            "(as fractions of it) in which samples are selected, for example start=0.5, end=0.9."
        )
    _check_fraction("keep", keep, allow_zero=False)
    _check_fraction("scale_factor", scale_factor, allow_zero=False)
    if isinstance(interrupt, bool) or not isinstance(interrupt, int) or interrupt < 0:
        raise ValueError(
            f"SelectiveBackprop interrupt={interrupt!r} must be an integer >= 0: 0 selects on every batch in the "
            "interval, n makes every n-th batch a normal full batch."
        )


def should_selective_backprop(
    current_duration: float,
    batch_idx: int,
    start: float = 0.5,
    end: float = 0.9,
    interrupt: int = 2,
) -> bool:
    """Whether to select samples on this batch: inside ``[start, end)`` of training, except every ``interrupt``-th batch.

    Returns ``start <= current_duration < end and (interrupt == 0 or (batch_idx + 1) % interrupt != 0)``: with
    ``interrupt=2`` selection alternates with normal full batches, with ``interrupt=0`` it runs on every batch of the
    interval, and with ``interrupt=1`` never.

    Args:
        current_duration: The fraction of training done, in [0, 1].
        batch_idx: The index of the batch within its epoch (0-based).
        start: Selection starts at this fraction of training.
        end: Selection stops at this fraction of training.
        interrupt: Every ``interrupt``-th batch is a normal full batch (0: none is).

    Returns:
        bool: True to select samples on this batch.

    Example:
        >>> [should_selective_backprop(0.6, b, start=0.5, end=0.9, interrupt=2) for b in range(4)]
        [True, False, True, False]
        >>> should_selective_backprop(0.95, 0, start=0.5, end=0.9, interrupt=0)
        False
    """
    in_interval = start <= current_duration < end
    return in_interval and (interrupt == 0 or (batch_idx + 1) % interrupt != 0)


def selection_weights(num_samples: int, keep: float) -> torch.Tensor:
    """The sampling weight of each loss rank (smallest loss first): ``((i + 0.5) / num_samples) ** (1 / keep - 1)``.

    Jiang et al. (2019) keep a sample with probability ``F(loss) ** beta``, where ``F`` is the loss's percentile among
    recent losses. With percentiles spread uniformly, ``beta`` keeps ``E[F ** beta] = 1 / (beta + 1)`` of the samples
    on average, so ``beta = 1 / keep - 1`` keeps the fraction ``keep``. Here ``F`` is the midpoint percentile of the
    sample's rank within the batch, ``(i + 0.5) / num_samples``, and the weights are normalised to sum to 1.

    Args:
        num_samples: The batch size.
        keep: The fraction of samples to keep, in (0, 1].

    Returns:
        torch.Tensor: Float64 weights of shape ``(num_samples,)``, increasing with rank and summing to 1.

    Example:
        >>> selection_weights(4, keep=0.5)  # beta = 1: weights proportional to the percentiles 1/8, 3/8, 5/8, 7/8
        tensor([0.0625, 0.1875, 0.3125, 0.4375], dtype=torch.float64)
    """
    percentiles = (torch.arange(num_samples, dtype=torch.float64) + 0.5) / num_samples
    weights = percentiles ** (1.0 / keep - 1.0)
    return weights / weights.sum()


def _per_sample_losses(
    model: Callable[..., Any],
    X: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None,
) -> torch.Tensor:
    # Under DDP, call the wrapped model directly: no gradient sync is needed, and only it has .loss.
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    if isinstance(model, ComposerModel):
        batch = (X, y)
        outputs = model(batch)
        if loss_fn is not None:
            return loss_fn(outputs, y)
        try:
            losses = model.loss(outputs, batch, reduction="none")
        except TypeError as error:
            if "reduction" not in str(error):
                raise
            raise TypeError(
                f"select_using_loss needs per-sample losses, but {type(model).__name__}.loss does not accept "
                f"reduction='none' ({error}). To fix, make the model's loss accept a reduction argument, or pass "
                "loss_fn=lambda outputs, y: F.cross_entropy(outputs, y, reduction='none')."
            ) from error
        if not isinstance(losses, torch.Tensor):
            raise TypeError(
                f"select_using_loss needs one tensor of per-sample losses, but {type(model).__name__}.loss returned a "
                f"{type(losses).__name__}; pass loss_fn returning a tensor of shape (N,)."
            )
        return losses
    if loss_fn is None:
        raise TypeError(
            f"select_using_loss got a {type(model).__name__}, which is not a ComposerModel, and no loss_fn; pass "
            "loss_fn(outputs, y) returning per-sample losses of shape (N,), for example "
            "loss_fn=lambda outputs, y: F.cross_entropy(outputs, y, reduction='none')."
        )
    return loss_fn(model(X), y)


def select_using_loss(
    X: torch.Tensor,
    y: torch.Tensor,
    model: Callable[..., Any],
    keep: float,
    scale_factor: float = 1.0,
    generator: torch.Generator | None = None,
    *,
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keeps ``keep`` of the batch, sampled with probability increasing with each sample's loss (Jiang et al. 2019).

    It ranks the samples by their loss in a forward pass without gradients (on inputs downsampled by
    ``scale_factor``), draws ``keep`` of them from ``generator``, the higher the loss the likelier, and returns
    those samples of the full-size batch in their original order; the method card (``README.md``) gives the steps.

    Losses come from ``loss_fn(outputs, y)`` when given. Otherwise ``model`` must be a
    :class:`~composer.models.ComposerModel`, called on the batch ``(X, y)``, whose loss accepts ``reduction='none'``
    (:class:`~composer.models.ComposerClassifier` does). Losses with extra dimensions ``(N, d1, ...)`` are averaged
    per sample.

    Args:
        X: Inputs, shape ``(N, ...)``.
        y: Targets, shape ``(N, ...)``.
        model: A ComposerModel (called on ``(X, y)``), or any callable ``X -> outputs`` together with ``loss_fn``.
        keep: The fraction of samples to keep, in (0, 1].
        scale_factor: Downsampling of the inputs for the selection pass, in (0, 1]; 1 means none.
        generator: Random generator for the draw. Default: torch's global one.
        loss_fn: ``loss_fn(outputs, y) -> losses`` of shape ``(N,)``; default: the ComposerModel's loss.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: The kept inputs and targets, each with ``n`` samples.

    Raises:
        ValueError: If ``keep`` or ``scale_factor`` is outside (0, 1], or ``scale_factor < 1`` for an input that is
            not 3-, 4- or 5-dimensional.
        TypeError: If no per-sample losses can be computed (see above).

    Example:
        >>> import torch.nn.functional as F
        >>> net = torch.nn.Linear(8, 3)
        >>> X, y = torch.randn(10, 8), torch.randint(0, 3, (10,))
        >>> X_kept, y_kept = select_using_loss(
        ...     X, y, net, keep=0.5, generator=torch.Generator().manual_seed(0),
        ...     loss_fn=lambda out, t: F.cross_entropy(out, t, reduction="none"),
        ... )
        >>> X_kept.shape, y_kept.shape
        (torch.Size([5, 8]), torch.Size([5]))
    """
    _check_fraction("keep", keep, allow_zero=False)
    _check_fraction("scale_factor", scale_factor, allow_zero=False)
    num_samples = X.shape[0]
    num_keep = max(1, math.floor(keep * num_samples + 0.5))
    if num_keep >= num_samples:
        return X, y

    X_small = X
    if scale_factor < 1.0:
        mode = _INTERPOLATION.get(X.ndim)
        if mode is None:
            raise ValueError(
                f"select_using_loss scale_factor={scale_factor} < 1 downsamples (N, C, L), (N, C, H, W) or "
                f"(N, C, D, H, W) inputs, but X has shape {tuple(X.shape)}; use scale_factor=1.0 for these inputs."
            )
        size = [max(1, int(side * scale_factor)) for side in X.shape[2:]]
        X_small = F.interpolate(X, size=size, mode=mode, align_corners=False)

    with torch.no_grad():
        losses = _per_sample_losses(model, X_small, y, loss_fn)
    losses = losses.detach().float()
    if losses.ndim == 0 or losses.shape[0] != num_samples:
        raise ValueError(
            f"select_using_loss needs one loss per sample (shape ({num_samples},)), got shape {tuple(losses.shape)}; "
            "make the loss use reduction='none'."
        )
    losses = losses.reshape(num_samples, -1).mean(dim=1).cpu()  # (N,): per-sample losses

    ranked = torch.argsort(losses, stable=True)  # sample indices from the smallest loss to the largest
    drawn = torch.multinomial(selection_weights(num_samples, keep), num_keep, replacement=False, generator=generator)
    kept = ranked[drawn].sort().values.to(X.device)
    return X[kept], y[kept]


def _autocast(state: State) -> contextlib.AbstractContextManager[Any]:
    """The autocast context the trainer's forward pass runs in, so the selection pass costs what it does."""
    if state.precision == Precision.FP32:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if state.precision == Precision.BF16 else torch.float16
    return torch.autocast(device_type=state.device.type, dtype=dtype)


class SelectiveBackprop(Algorithm):
    """Selectively backpropagate gradients from a subset of each batch (Jiang et al. 2019).

    Selective Backprop (SB) prunes minibatches according to the difficulty of the individual training examples, and
    only computes weight gradients over the pruned subset, reducing iteration time and speeding up training. The
    fraction of the minibatch that is kept for gradient computation is specified by the argument
    ``0 < keep <= 1``.

    To speed up SB's selection forward pass, the argument ``scale_factor`` can be used to spatially downsample input
    image tensors. The full-sized inputs will still be used for the weight gradient computation.

    To preserve convergence, SB can be interrupted with vanilla minibatch gradient steps every ``interrupt`` steps.
    When ``interrupt=0``, SB will be used at every step during the SB interval. When ``interrupt=2``, SB will
    alternate with vanilla minibatch steps.

    Runs on ``Event.AFTER_DATALOADER`` (when :func:`should_selective_backprop` says so, and ``keep < 1``), before
    every other algorithm (``run_first``), so that it sees the batch before augmentations change it. Selection is
    :func:`select_using_loss` with ``state.model`` (its loss must accept ``reduction='none'``), under the run's
    precision, drawing from ``state.rng``. The samples counted by the timer are those the dataloader produced.

    Args:
        start: SB interval start as fraction of training duration.
        end: SB interval end as fraction of training duration.
        keep: Fraction of minibatch to select and keep for gradient computation.
        scale_factor: Scale for downsampling input for selection forward pass.
        interrupt: Interrupt SB with a vanilla minibatch step every ``interrupt`` batches.

    Example:
        >>> from composer.core import Event, Logger
        >>> sb = SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=1.0, interrupt=0)
        >>> import torch
        >>> from composer.core import State
        >>> from composer.models import ComposerClassifier
        >>> state = State(model=ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3), max_duration="1ep")
        >>> state.batch = (torch.randn(8, 8), torch.randint(0, 3, (8,)))
        >>> sb.match(Event.AFTER_DATALOADER, state)
        True
        >>> sb.apply(Event.AFTER_DATALOADER, state, Logger(state))
        >>> state.batch[0].shape
        torch.Size([4, 8])
    """

    run_first = True

    def __init__(self, start: float, end: float, keep: float, scale_factor: float, interrupt: int) -> None:
        _check_args(start, end, keep, scale_factor, interrupt)
        self.start = start
        self.end = end
        self.keep = keep
        self.scale_factor = scale_factor
        self.interrupt = interrupt

    def match(self, event: Event, state: State) -> bool:
        """Runs after the dataloader on the batches :func:`should_selective_backprop` picks, when ``keep < 1``."""
        return (
            event == Event.AFTER_DATALOADER
            and self.keep < 1.0
            and should_selective_backprop(
                state.get_elapsed_duration().value,
                int(state.timer.batch_in_epoch),
                self.start,
                self.end,
                self.interrupt,
            )
        )

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Replaces ``state.batch`` with the samples kept."""
        X, y = state.batch_pair
        with _autocast(state):
            X, y = select_using_loss(X, y, state.model, self.keep, self.scale_factor, generator=state.rng)
        state.batch_pair = (X, y)


SelectiveBackpropHparams = hparams_for(SelectiveBackprop)
"""See :class:`SelectiveBackprop`; the fields are its arguments (YAML key ``selective_backprop``)."""
