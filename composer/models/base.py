"""ComposerModel: the interface between a torch model and the trainer."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from composer.core.data_spec import Batch

if TYPE_CHECKING:  # torchmetrics is imported by the models that build metrics, not by the Trainer's import
    from torchmetrics import Metric

__all__ = ["ComposerModel"]


class ComposerModel(torch.nn.Module, abc.ABC):
    """A :class:`torch.nn.Module` that knows how to run on a whole batch, compute its loss, and report metrics.

    The trainer calls :meth:`forward` with the whole batch (inputs and targets together) and hands the outputs to
    :meth:`loss`. During evaluation it calls :meth:`eval_forward`, then :meth:`update_metric` once per metric from
    :meth:`get_metrics`. Subclass it and implement :meth:`forward` and :meth:`loss`; override :meth:`get_metrics`
    and :meth:`update_metric` to report metrics. :class:`~composer.models.ComposerClassifier` does all of this for
    an image classifier.

    Example:
        >>> import torch.nn.functional as F
        >>> class Regressor(ComposerModel):
        ...     def __init__(self) -> None:
        ...         super().__init__()
        ...         self.linear = torch.nn.Linear(3, 1)
        ...     def forward(self, batch):
        ...         inputs, _ = batch
        ...         return self.linear(inputs).squeeze(1)
        ...     def loss(self, outputs, batch):
        ...         return F.mse_loss(outputs, self.targets(batch))
        >>> model = Regressor()
        >>> batch = (torch.randn(4, 3), torch.randn(4))
        >>> model.loss(model(batch), batch).shape
        torch.Size([])
        >>> model.targets(batch) is batch[1]
        True
        >>> model.get_metrics(is_train=False)
        {}
    """

    @abc.abstractmethod
    def forward(self, batch: Batch) -> Any:
        """Computes the model's outputs for a whole batch (inputs and targets together).

        Args:
            batch: A batch as yielded by the dataloader (after device transforms).

        Returns:
            Whatever :meth:`loss` and the metrics expect, usually the logits.
        """

    @abc.abstractmethod
    def loss(self, outputs: Any, batch: Batch, *args: Any, **kwargs: Any) -> torch.Tensor | Sequence[torch.Tensor]:
        """Computes the loss from the outputs of :meth:`forward` and the batch.

        Args:
            outputs: What :meth:`forward` returned for ``batch``.
            batch: The batch the outputs were computed from.
            *args: Extra positional arguments, for subclasses.
            **kwargs: Extra keyword arguments, for subclasses (for example ``reduction``).

        Returns:
            The loss, or several losses, each of which the trainer backpropagates.
        """

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        """Returns the metrics to compute, by name: training metrics if ``is_train``, else evaluation metrics.

        Return new metric objects on every call: the trainer keeps its own copies. Default: no metrics.

        Args:
            is_train: Whether the metrics are for training (True) or evaluation (False).
        """
        del is_train
        return {}

    def eval_forward(self, batch: Batch, outputs: Any | None = None) -> Any:
        """Returns the outputs the evaluation metrics are updated with.

        Default: ``outputs`` if the trainer already has them (training metrics reuse the training forward pass),
        else ``self(batch)``. Override it when evaluation needs a different pass (generation, test-time
        augmentation).

        Args:
            batch: The batch.
            outputs: Outputs already computed for this batch, if any.
        """
        return outputs if outputs is not None else self(batch)

    def update_metric(self, batch: Batch, outputs: Any, metric: Metric) -> None:
        """Updates ``metric`` with one batch's outputs, typically ``metric.update(outputs, self.targets(batch))``.

        Args:
            batch: The batch.
            outputs: What :meth:`eval_forward` returned for ``batch``.
            metric: One of the metrics from :meth:`get_metrics`.

        Raises:
            NotImplementedError: Always, unless a subclass overrides it. A model that returns metrics from
                :meth:`get_metrics` must say how to update them.
        """
        raise NotImplementedError(
            f"{type(self).__name__} returns metrics from get_metrics() but does not implement update_metric(batch, "
            f"outputs, metric), so the trainer cannot update {type(metric).__name__}. To fix, override "
            f"update_metric, for example: metric.update(outputs, self.targets(batch))."
        )

    def targets(self, batch: Batch) -> Any:
        """Returns the targets in ``batch``: the second item of an ``(inputs, targets)`` pair, or ``batch['labels']``.

        Override it for other batch layouts.

        Args:
            batch: The batch.

        Raises:
            ValueError: If the batch is neither a pair nor a mapping with ``'labels'``.
        """
        if isinstance(batch, Mapping) and "labels" in batch:
            return batch["labels"]
        if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) == 2:
            return batch[1]
        raise ValueError(
            f"Cannot find the targets in a batch of type {type(batch).__name__}: expected an (inputs, targets) "
            f"pair or a mapping with a 'labels' key. To fix, override {type(self).__name__}.targets(batch)."
        )
