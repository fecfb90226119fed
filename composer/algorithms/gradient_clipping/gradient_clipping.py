"""Gradient clipping: bound the gradients before the optimizer step, by global norm, by value, or adaptively.

:func:`apply_gradient_clipping` does the work on any parameters; :class:`GradientClipping` calls it at
``AFTER_TRAIN_BATCH``, after the Trainer has unscaled the gradients of a mixed-precision run. The Trainer's own
``grad_clip_norm`` is the ``'norm'`` case of the same function.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["CLIPPING_TYPES", "GradientClipping", "GradientClippingHparams", "apply_gradient_clipping"]

CLIPPING_TYPES = ("norm", "value", "adaptive")
"""The valid ``clipping_type`` values."""

# Adaptive clipping measures each unit's gradient against max(weight norm, _AGC_EPS), so that units whose weights
# are zero (fresh biases) may still move (Brock et al. 2021 use 1e-3).
_AGC_EPS = 1e-3
# Guards the division by a gradient norm of zero (that unit is then within bounds anyway).
_NORM_FLOOR = 1e-6


def _check_args(clipping_type: str, clipping_threshold: float) -> None:
    if clipping_type not in CLIPPING_TYPES:
        raise ValueError(
            f"clipping_type={clipping_type!r} is not a gradient clipping method; use one of {list(CLIPPING_TYPES)}."
        )
    if isinstance(clipping_threshold, bool) or not isinstance(clipping_threshold, (int, float)):
        raise TypeError(f"clipping_threshold={clipping_threshold!r} must be a number, for example 1.0.")
    if not clipping_threshold > 0:
        raise ValueError(
            f"clipping_threshold={clipping_threshold!r} must be positive (the largest allowed norm, value or ratio); "
            "for example clipping_threshold=1.0 (norm) or 0.01 (adaptive)."
        )


def _unitwise_norm(tensor: torch.Tensor) -> torch.Tensor:
    """The L2 norm of each output unit: over all dims but the first for weights, over everything for vectors.

    Shapes: a (out, in, kh, kw) conv weight gives (out, 1, 1, 1); a (d,) bias gives a 0-d tensor.
    """
    dims = None if tensor.ndim <= 1 else tuple(range(1, tensor.ndim))
    norm: torch.Tensor = torch.linalg.vector_norm(tensor, dim=dims, keepdim=dims is not None)
    return norm


def _clip_adaptive(parameters: list[torch.Tensor], clipping_threshold: float) -> None:
    for p in parameters:
        assert p.grad is not None
        weight_norm = _unitwise_norm(p.detach()).clamp(min=_AGC_EPS)
        grad_norm = _unitwise_norm(p.grad)
        max_norm = weight_norm * clipping_threshold
        scale = torch.where(grad_norm > max_norm, max_norm / grad_norm.clamp(min=_NORM_FLOOR), 1.0)
        p.grad.mul_(scale.to(p.grad.dtype))


def apply_gradient_clipping(
    parameters: torch.nn.Module | torch.Tensor | Iterable[torch.Tensor],
    clipping_type: str,
    clipping_threshold: float,
) -> None:
    """Clips the gradients of ``parameters`` in place.

    * ``'norm'``: rescales all gradients together so their global L2 norm is at most ``clipping_threshold``; the
      same as :func:`torch.nn.utils.clip_grad_norm_` (which this calls): ``g *= min(1, threshold / (norm + 1e-6))``.
    * ``'value'``: clamps every gradient element to ``[-clipping_threshold, clipping_threshold]``.
    * ``'adaptive'``: adaptive gradient clipping (AGC, Brock et al. 2021, https://arxiv.org/abs/2102.06171): for
      each unit (an output row of a weight, or a whole bias vector), if ``||g|| > threshold * max(||w||, 1e-3)``
      then ``g *= threshold * max(||w||, 1e-3) / ||g||``. Typical thresholds are 0.01 to 0.16.

    Parameters without a gradient are skipped. Call it after the backward pass (and after unscaling, with a gradient
    scaler) and before the optimizer step.

    Args:
        parameters: A module (its parameters are used), one tensor, or an iterable of tensors.
        clipping_type: ``'norm'``, ``'value'`` or ``'adaptive'``.
        clipping_threshold: The largest allowed global norm, element magnitude, or gradient-to-weight norm ratio.

    Raises:
        ValueError: If ``clipping_type`` is unknown or ``clipping_threshold`` is not positive.

    Example:
        >>> layer = torch.nn.Linear(2, 1, bias=False)
        >>> layer.weight.grad = torch.tensor([[3.0, 4.0]])  # norm 5
        >>> apply_gradient_clipping(layer, "norm", 1.0)
        >>> layer.weight.grad
        tensor([[0.6000, 0.8000]])
        >>> apply_gradient_clipping(layer, "value", 0.7)
        >>> layer.weight.grad
        tensor([[0.6000, 0.7000]])
    """
    _check_args(clipping_type, clipping_threshold)
    params: list[torch.Tensor]
    if isinstance(parameters, torch.nn.Module):
        params = list(parameters.parameters())
    elif isinstance(parameters, torch.Tensor):
        params = [parameters]
    else:
        params = list(parameters)
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return
    if clipping_type == "norm":
        torch.nn.utils.clip_grad_norm_(with_grad, max_norm=clipping_threshold)
    elif clipping_type == "value":
        torch.nn.utils.clip_grad_value_(with_grad, clip_value=clipping_threshold)
    else:
        with torch.no_grad():
            _clip_adaptive(with_grad, clipping_threshold)


class GradientClipping(Algorithm):
    """Clips the gradients of every batch before the optimizer step: by global norm, by value, or adaptively.

    Runs on ``Event.AFTER_TRAIN_BATCH``, when the gradients of the whole batch (all microbatches) are ready and, with
    ``precision='amp'``, already unscaled. See :func:`apply_gradient_clipping` for the three methods. ``'norm'`` is
    what the Trainer's ``grad_clip_norm`` does; use one or the other, not both. With SAM the clipping applies to the
    gradients of both passes.

    Args:
        clipping_type: ``'norm'``, ``'value'`` or ``'adaptive'``.
        clipping_threshold: The largest allowed global norm, element magnitude, or gradient-to-weight norm ratio.

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
        ...     max_duration="1ep",
        ...     algorithms=[GradientClipping(clipping_type="adaptive", clipping_threshold=0.05)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    def __init__(self, clipping_type: str, clipping_threshold: float) -> None:
        _check_args(clipping_type, clipping_threshold)
        self.clipping_type = clipping_type
        self.clipping_threshold = clipping_threshold

    def match(self, event: Event, state: State) -> bool:
        """Runs once the batch's gradients are complete."""
        return event == Event.AFTER_TRAIN_BATCH

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Clips the model's gradients in place."""
        apply_gradient_clipping(state.model, self.clipping_type, self.clipping_threshold)


GradientClippingHparams = hparams_for(GradientClipping)
"""See :class:`GradientClipping`; the fields are its arguments (YAML key ``gradient_clipping``)."""
