"""A loss function as a metric: v0.32.1's ``LossMetric``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torchmetrics import Metric

__all__ = ["LossMetric"]


class LossMetric(Metric):
    """The mean over batches of ``loss_function(preds, targets)``, summed across processes.

    Args:
        loss_function: A loss returning a scalar tensor, such as ``torch.nn.MSELoss()``.
        dist_sync_on_step: Synchronise the state across processes at every update (torchmetrics' option).

    Example:
        >>> metric = LossMetric(torch.nn.L1Loss())
        >>> metric.update(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0]))  # 0.5
        >>> metric.update(torch.tensor([3.0]), torch.tensor([1.0]))  # 2.0
        >>> metric.compute()
        tensor(1.2500)
    """

    is_differentiable = False
    full_state_update = False

    sum_loss: torch.Tensor
    total_batches: torch.Tensor

    def __init__(self, loss_function: Callable[..., torch.Tensor], dist_sync_on_step: bool = False) -> None:
        super().__init__(dist_sync_on_step=dist_sync_on_step)
        self.loss_function = loss_function
        self.add_state("sum_loss", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total_batches", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, targets: torch.Tensor) -> None:
        """Adds the loss of one batch.

        Args:
            preds: What the loss function takes first.
            targets: What it takes second.
        """
        self.sum_loss += self.loss_function(preds.detach(), targets).to(self.sum_loss.dtype)
        self.total_batches += 1

    def compute(self) -> torch.Tensor:
        """Returns the summed loss divided by the number of batches."""
        return self.sum_loss / self.total_batches
