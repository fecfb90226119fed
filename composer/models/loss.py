"""Losses that accept both class-index targets and dense (one-hot or soft) targets."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["soft_cross_entropy"]

_REDUCTIONS = ("mean", "sum", "none")


def soft_cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy between logits and targets given either as class indices or as a distribution over classes.

    Use it wherever targets may stop being plain indices: label smoothing, MixUp and CutMix turn index targets into
    dense ones, and the same loss function keeps working. The kind of target is read from its shape:

    * class indices, shape ``(N, d1, ...)`` for input ``(N, C, d1, ...)``: exactly :func:`torch.nn.functional.cross_entropy`;
    * dense targets (one-hot, smoothed or mixed), the input's shape ``(N, C, d1, ...)``: the per-element loss is
      ``-(weight * target * log_softmax(input, dim=1)).sum(dim=1)``, then reduced.

    Args:
        input: Logits, shape ``(N, C, d1, ...)``.
        target: Class indices, shape ``(N, d1, ...)``, or a distribution over classes, shape ``(N, C, d1, ...)``.
        weight: Per-class weights, shape ``(C,)``. Default: all ones.
        ignore_index: An index target with this value adds no loss (index targets only).
        reduction: ``'mean'`` (over the per-element losses; for index targets, over the non-ignored ones),
            ``'sum'`` or ``'none'`` (shape ``(N, d1, ...)``).

    Returns:
        torch.Tensor: The loss: a scalar for ``'mean'`` and ``'sum'``, shape ``(N, d1, ...)`` for ``'none'``.

    Raises:
        ValueError: If ``reduction`` is unknown or the shapes of ``input`` and ``target`` do not match.

    Example:
        >>> logits = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
        >>> indices = torch.tensor([0, 1])
        >>> one_hot = torch.nn.functional.one_hot(indices, 2).float()
        >>> torch.allclose(soft_cross_entropy(logits, indices), soft_cross_entropy(logits, one_hot))
        True
        >>> soft_cross_entropy(logits, torch.tensor([[0.5, 0.5], [0.5, 0.5]]), reduction="none")
        tensor([1.1269, 0.8133])
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"Unknown reduction {reduction!r} for soft_cross_entropy; expected one of {list(_REDUCTIONS)}."
        )
    if input.ndim < 2:
        raise ValueError(
            f"soft_cross_entropy expects input logits of shape (N, C, ...), got shape {tuple(input.shape)}. "
            f"To fix, add a batch dimension (input.unsqueeze(0))."
        )
    if input.ndim == 2 and target.ndim == 1 and target.shape[0] == input.shape[0] and not target.is_floating_point():
        return F.cross_entropy(input, target, weight=weight, ignore_index=ignore_index, reduction=reduction)
    index_shape = (input.shape[0], *input.shape[2:])
    if tuple(target.shape) == index_shape and not target.is_floating_point():
        return F.cross_entropy(input, target, weight=weight, ignore_index=ignore_index, reduction=reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"soft_cross_entropy got input of shape {tuple(input.shape)} and target of shape {tuple(target.shape)}; "
            f"the target must be integer class indices of shape {index_shape} or a distribution over classes of "
            f"the input's shape {tuple(input.shape)}."
        )

    log_probs = F.log_softmax(input, dim=1)
    target = target.to(log_probs.dtype)
    if weight is not None:
        # (C,) -> (1, C, 1, ...) so that it broadcasts over the batch and any extra dimensions.
        target = target * weight.to(log_probs.dtype).view(1, -1, *([1] * (input.ndim - 2)))
    losses = -(target * log_probs).sum(dim=1)  # (N, d1, ...)
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses
