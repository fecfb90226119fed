"""Classification metrics that need no ``num_classes`` and accept index or dense targets."""

from __future__ import annotations

import torch
from torchmetrics import Metric

from composer.models.loss import soft_cross_entropy

__all__ = ["Accuracy", "CrossEntropy"]


def _as_class_indices(preds: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted and true classes, shape ``(N, d1, ...)``, from logits ``(N, C, ...)`` and index or dense targets."""
    if preds.ndim < 2:
        raise ValueError(f"Expected predictions of shape (N, C, ...), got shape {tuple(preds.shape)}.")
    if target.shape == preds.shape:  # one-hot or soft targets: the most likely class is the label
        target = target.argmax(dim=1)
    predicted = preds.argmax(dim=1)
    if predicted.shape != target.shape:
        raise ValueError(
            f"Predictions of shape {tuple(preds.shape)} do not match targets of shape {tuple(target.shape)}; "
            f"expected class indices of shape {tuple(predicted.shape)} or dense targets of shape "
            f"{tuple(preds.shape)}."
        )
    return predicted, target


class Accuracy(Metric):
    """The fraction of predictions whose most likely class is the target class.

    Predictions are logits or probabilities of shape ``(N, C, ...)``; the predicted class is their argmax over dim
    1. Targets are class indices ``(N, ...)`` or dense targets of the predictions' shape, whose argmax is taken as
    the true class (so MixUp's or label smoothing's targets work). Counts add up across batches and processes.

    Example:
        >>> metric = Accuracy()
        >>> metric.update(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]))
        >>> metric.update(torch.tensor([[0.0, 3.0]]), torch.tensor([[0.1, 0.9]]))
        >>> metric.compute()
        tensor(0.6667)
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    correct: torch.Tensor
    total: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.add_state("correct", default=torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        """Counts the correct predictions in one batch.

        Args:
            preds: Logits or probabilities, shape ``(N, C, ...)``.
            target: Class indices ``(N, ...)`` or dense targets ``(N, C, ...)``.
        """
        predicted, target = _as_class_indices(preds, target)
        self.correct += (predicted == target).sum()
        self.total += target.numel()

    def compute(self) -> torch.Tensor:
        """Returns correct / total over every batch since the last reset."""
        return self.correct.float() / self.total


class CrossEntropy(Metric):
    """The mean cross-entropy between logits and targets over every sample seen (see :func:`soft_cross_entropy`).

    Targets are class indices (entries equal to ``ignore_index`` are left out) or dense targets of the logits'
    shape. The mean is over samples, not over batches, so batches of different sizes weigh by their size.

    Args:
        ignore_index: An index target with this value is not counted.

    Example:
        >>> metric = CrossEntropy()
        >>> metric.update(torch.zeros(3, 2), torch.tensor([0, 1, 1]))
        >>> metric.compute()  # uniform logits over 2 classes: log(2)
        tensor(0.6931)
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    sum_loss: torch.Tensor
    total: torch.Tensor

    def __init__(self, ignore_index: int = -100) -> None:
        super().__init__()
        self.ignore_index = ignore_index
        self.add_state("sum_loss", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        """Adds the summed loss and the sample count of one batch.

        Args:
            preds: Logits, shape ``(N, C, ...)``.
            target: Class indices ``(N, ...)`` or dense targets ``(N, C, ...)``.
        """
        # Detached: a training metric must not keep every batch's autograd graph alive through its state.
        losses = soft_cross_entropy(preds.detach(), target, ignore_index=self.ignore_index, reduction="none")
        if target.shape == preds.shape:
            counted = losses.numel()
        else:
            counted = int((target != self.ignore_index).sum())
        self.sum_loss += losses.sum().to(self.sum_loss.dtype)
        self.total += counted

    def compute(self) -> torch.Tensor:
        """Returns the summed loss divided by the number of counted samples."""
        return self.sum_loss / self.total
