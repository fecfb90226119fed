"""Label smoothing: train against targets shrunk towards the uniform distribution over classes.

:func:`smooth_labels` turns class-index or dense targets into smoothed dense targets; :class:`LabelSmoothing` swaps
them into the batch just before the loss and puts the original targets back just after it.
"""

from __future__ import annotations

from typing import Any

import torch

from composer.algorithms.utils.ported_calls import explain_call
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["LabelSmoothing", "LabelSmoothingHparams", "smooth_labels"]


def _check_alpha(alpha: Any) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(
            f"LabelSmoothing alpha={alpha!r} must be a number in [0, 1]: 0 leaves the targets as they are, 1 makes "
            "them uniform. A typical value is alpha=0.1."
        )


def smooth_labels(logits: torch.Tensor, targets: torch.Tensor, alpha: float) -> torch.Tensor:
    """Shrinks targets towards a uniform distribution to counteract label noise (Szegedy et al. 2016).

    Returns ``(1 - alpha) * one_hot(targets) + alpha / C`` for ``C`` classes: every class keeps at least ``alpha / C``
    of the probability mass, so the model is never pushed towards infinitely confident logits. ``targets`` may be
    class indices or already dense (one-hot, mixed); dense targets are smoothed the same way. Each smoothed row sums
    to one whenever the input row does. The loss must accept dense targets, as
    :func:`~composer.models.loss.soft_cross_entropy` does.

    Introduced in `Rethinking the Inception Architecture for Computer Vision <https://arxiv.org/abs/1512.00567>`_.

    Args:
        logits: Output of the model, shape ``(N, C, d1, ..., dn)``; only its shape, dtype and device are used.
        targets: Class indices, an integer tensor of shape ``(N, d1, ..., dn)`` with values in ``[0, C)``, or dense
            targets, a floating tensor of the logits' shape.
        alpha: Strength of the smoothing, in ``[0, 1]``: 0 returns one-hot targets, 1 the uniform distribution.

    Returns:
        torch.Tensor: Dense smoothed targets of the logits' shape, float32 (float64 if the logits are float64);
        dense targets keep their dtype.

    Raises:
        ValueError: If ``alpha`` is outside ``[0, 1]`` or the shapes of ``logits`` and ``targets`` do not match.

    Example:
        >>> logits = torch.zeros(2, 4)
        >>> smooth_labels(logits, torch.tensor([0, 3]), alpha=0.2)
        tensor([[0.8500, 0.0500, 0.0500, 0.0500],
                [0.0500, 0.0500, 0.0500, 0.8500]])
        >>> smooth_labels(logits, torch.tensor([[0.5, 0.5, 0.0, 0.0]] * 2), alpha=0.2)[0]
        tensor([0.4500, 0.4500, 0.0500, 0.0500])
    """
    _check_alpha(alpha)
    if not isinstance(logits, torch.Tensor) or logits.ndim < 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"smooth_labels logits must be a tensor of shape (N, C, ...) with at least 2 dimensions, got {shape}. "
            "To fix, pass the model's logits with the class dimension at dim 1."
        )
    num_classes = logits.shape[1]
    index_shape = (logits.shape[0], *logits.shape[2:])
    if targets.is_floating_point():
        if targets.shape != logits.shape:
            raise ValueError(
                f"smooth_labels got dense (floating) targets of shape {tuple(targets.shape)} for logits of shape "
                f"{tuple(logits.shape)}; dense targets must have the logits' shape, and class-index targets must be "
                f"an integer tensor of shape {index_shape}."
            )
        # (1 - alpha) * targets + alpha / C in one pass: a step of size alpha from the targets towards 1 / C.
        return torch.lerp(targets, targets.new_tensor(1.0 / num_classes), alpha)
    if tuple(targets.shape) != index_shape:
        raise ValueError(
            f"smooth_labels got class-index targets of shape {tuple(targets.shape)} for logits of shape "
            f"{tuple(logits.shape)}; expected an integer tensor of shape {index_shape} (or dense floating targets "
            f"of shape {tuple(logits.shape)})."
        )
    dtype = torch.promote_types(logits.dtype, torch.float32)
    # Every entry starts at alpha / C; the target class then gets (1 - alpha) + alpha / C. Shapes: (N, C, d1, ...).
    smoothed = torch.full(logits.shape, alpha / num_classes, dtype=dtype, device=logits.device)
    return smoothed.scatter_(1, targets.unsqueeze(1).to(logits.device), 1.0 - alpha + alpha / num_classes)


def _explain_smoothing(kwargs: dict[str, Any]) -> str | None:
    if "smoothing" not in kwargs:
        return None
    value = kwargs["smoothing"]
    return (
        f"LabelSmoothing() got an unexpected keyword argument 'smoothing'. This signature names it alpha (the weight "
        f"of the uniform distribution, as v0.32.1's smoothing): LabelSmoothing(alpha={value!r})."
    )


class LabelSmoothing(Algorithm):
    """Shrinks targets towards a uniform distribution to counteract label noise as in Szegedy et al..

    The training targets become ``(1 - alpha) * one_hot(targets) + alpha / C``, with ``C`` read from the model's
    outputs (see :func:`smooth_labels`). Runs on ``Event.BEFORE_LOSS``, where it replaces the targets of the
    ``(inputs, targets)`` batch with the smoothed ones, and on ``Event.AFTER_LOSS``, where it puts the original
    targets back (so metrics and later algorithms see them). The model's loss must accept dense targets, as
    :class:`~composer.models.ComposerClassifier`'s default loss does. Evaluation is not affected.

    It composes with MixUp and CutMix in either order: they mix the targets at ``AFTER_FORWARD``, before this runs,
    so it smooths the mixed targets; mixing and smoothing are linear maps of the targets and commute.

    Introduced in `Rethinking the Inception Architecture for Computer Vision <https://arxiv.org/abs/1512.00567>`_.

    Args:
        alpha: Strength of the label smoothing, in [0, 1]. alpha=0 means no label smoothing, and alpha=1 means
            maximal smoothing (targets are ignored).

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
        ...     algorithms=[LabelSmoothing(alpha=0.1)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    @explain_call(lambda kwargs: _explain_smoothing(kwargs))
    def __init__(self, alpha: float) -> None:
        _check_alpha(alpha)
        self.alpha = alpha
        self._original_targets: Any = None

    def match(self, event: Event, state: State) -> bool:
        """Runs just before the loss (smooth) and just after it (restore)."""
        return event in (Event.BEFORE_LOSS, Event.AFTER_LOSS)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Swaps smoothed targets into the batch before the loss and the original ones back after it."""
        inputs, targets = state.batch_pair
        if event == Event.BEFORE_LOSS:
            self._original_targets = targets
            state.batch_pair = (inputs, smooth_labels(state.outputs, targets, self.alpha))
        elif self._original_targets is not None:
            state.batch_pair = (inputs, self._original_targets)
            self._original_targets = None


LabelSmoothingHparams = hparams_for(LabelSmoothing)
"""See :class:`LabelSmoothing`; the fields are its arguments (YAML key ``label_smoothing``)."""
