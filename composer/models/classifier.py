"""ComposerClassifier: wraps any classification network that maps inputs to logits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from composer.core.data_spec import Batch
from composer.models.base import ComposerModel
from composer.models.loss import soft_cross_entropy

if TYPE_CHECKING:
    from torchmetrics import Metric

__all__ = ["ComposerClassifier"]


class ComposerClassifier(ComposerModel):
    """A :class:`ComposerModel` for classification: batches are ``(inputs, targets)`` and the module gives logits.

    Wrap any network ``module(inputs) -> logits (N, C, ...)``. The loss is ``loss_fn(logits, targets)``, by default
    :func:`~composer.models.loss.soft_cross_entropy`, so targets may be class indices or dense (one-hot, smoothed,
    mixed) targets. Training reports ``Accuracy``; evaluation reports ``Accuracy`` and ``CrossEntropy``.

    Args:
        module: The network: inputs -> logits.
        num_classes: The number of classes, for algorithms that need it. Default: ``module.num_classes`` if it has
            one, else None.
        loss_fn: ``loss_fn(logits, targets, *args, **kwargs) -> loss``. Default:
            :func:`~composer.models.loss.soft_cross_entropy`.

    Example:
        >>> model = ComposerClassifier(torch.nn.Linear(4, 3), num_classes=3)
        >>> batch = (torch.randn(8, 4), torch.randint(0, 3, (8,)))
        >>> outputs = model(batch)
        >>> outputs.shape, model.loss(outputs, batch).shape
        (torch.Size([8, 3]), torch.Size([]))
        >>> sorted(model.get_metrics(is_train=False))
        ['Accuracy', 'CrossEntropy']
        >>> metric = model.get_metrics(is_train=True)["Accuracy"]
        >>> model.update_metric(batch, outputs, metric)
        >>> 0.0 <= metric.compute().item() <= 1.0
        True
    """

    def __init__(
        self,
        module: torch.nn.Module,
        num_classes: int | None = None,
        loss_fn: Callable[..., torch.Tensor] = soft_cross_entropy,
    ) -> None:
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"ComposerClassifier needs a torch.nn.Module, not {type(module).__name__}.")
        if num_classes is None:
            num_classes = getattr(module, "num_classes", None)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)):
            raise TypeError(f"ComposerClassifier num_classes must be an int or None, got {num_classes!r}.")
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"ComposerClassifier num_classes must be at least 1, got {num_classes}.")
        if not callable(loss_fn):
            raise TypeError(f"ComposerClassifier loss_fn must be callable (logits, targets) -> loss, got {loss_fn!r}.")
        self.module = module
        self.num_classes = num_classes
        self.loss_fn = loss_fn

    def _inputs_and_targets(self, batch: Batch) -> tuple[Any, Any]:
        if type(batch) in (tuple, list) and len(batch) == 2:  # fast path for the usual pair
            return batch[0], batch[1]
        if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) == 2:
            return batch[0], batch[1]
        raise ValueError(
            f"ComposerClassifier expects each batch to be an (inputs, targets) pair, got a {type(batch).__name__}. "
            f"To fix, make the dataset return (input, target) samples, or subclass ComposerModel for other layouts."
        )

    def forward(self, batch: Batch) -> torch.Tensor:
        """Returns ``module(inputs)``, the logits, for an ``(inputs, targets)`` batch."""
        if type(batch) in (tuple, list) and len(batch) == 2:  # per step: the usual pair without a helper call
            inputs = batch[0]
        else:
            inputs, _ = self._inputs_and_targets(batch)
        outputs: torch.Tensor = self.module(inputs)
        return outputs

    def loss(self, outputs: Any, batch: Batch, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Returns ``loss_fn(outputs, targets, *args, **kwargs)``; targets may be indices or dense."""
        targets = batch[1] if type(batch) in (tuple, list) and len(batch) == 2 else self.targets(batch)
        return self.loss_fn(outputs, targets, *args, **kwargs)

    def targets(self, batch: Batch) -> Any:
        """Returns the targets of an ``(inputs, targets)`` batch."""
        _, targets = self._inputs_and_targets(batch)
        return targets

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        """Returns new metrics: ``{'Accuracy'}`` for training, ``{'Accuracy', 'CrossEntropy'}`` for evaluation."""
        from composer.models.metrics import Accuracy, CrossEntropy  # imports torchmetrics: when metrics are built

        if is_train:
            return {"Accuracy": Accuracy()}
        return {"Accuracy": Accuracy(), "CrossEntropy": CrossEntropy()}

    def update_metric(self, batch: Batch, outputs: Any, metric: Metric) -> None:
        """Calls ``metric.update(outputs, targets)``."""
        metric.update(outputs, self.targets(batch))
