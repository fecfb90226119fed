"""NoOpModel: train a one-parameter stand-in instead of the model, to time everything but the network.

The stand-in (:class:`NoOpModelClass`) reads the targets of each batch and returns outputs of the shape and type the
model's own loss and metrics expect, scaled by its single parameter so the optimizer has something to step. The
data pipeline, the Trainer's loop, the loss, the metrics and the other algorithms run as they would; the network
costs nearly nothing. The throughput of a run with it is therefore the ceiling the data pipeline and the Trainer put
on that run: a model cannot train faster than this. :func:`no_op_model` builds the stand-in and :class:`NoOpModel`
swaps it in at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.data_spec import Batch
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.models.base import ComposerModel

if TYPE_CHECKING:
    from torchmetrics import Metric  # imported by the model when it builds its metrics

__all__ = ["NoOpModel", "NoOpModelClass", "NoOpModelHparams", "no_op_model"]


def _infer_num_classes(model: nn.Module) -> int | None:
    num_classes = getattr(model, "num_classes", None)
    if num_classes is None:
        num_classes = getattr(getattr(model, "config", None), "vocab_size", None)
    return num_classes if isinstance(num_classes, int) and not isinstance(num_classes, bool) else None


class NoOpModelClass(ComposerModel):
    """A one-parameter stand-in for ``model``: outputs from the targets, ``model``'s loss and metrics.

    :meth:`forward` reads the batch's targets with ``model.targets`` and returns, times the parameter ``weights``
    (initially 1.5):

    * ``one_hot(targets, num_classes)`` for integer targets when the number of classes is known (a classifier's
      logits ``(N, C)``, a language model's ``(B, S, V)``; negative "ignore" labels such as -100 count as class 0);
    * the targets themselves, as floats, otherwise (dense or soft targets, regression, unknown class count).

    :meth:`loss`, :meth:`get_metrics`, :meth:`update_metric` and :meth:`targets` are ``model``'s, so the run computes
    what it would with the real model, on outputs of the same shape. ``model``'s parameters are not part of this
    module (its state dict holds only ``weights``).

    Args:
        model: The model it stands in for.
        num_classes: Classes of integer targets; None: ``model.num_classes``, else ``model.config.vocab_size``,
            else outputs are the targets themselves.

    Example:
        >>> from composer.models import ComposerClassifier
        >>> original = ComposerClassifier(torch.nn.Linear(4, 3), num_classes=3)
        >>> stand_in = NoOpModelClass(original)
        >>> batch = (torch.randn(2, 4), torch.tensor([2, 0]))
        >>> stand_in(batch)
        tensor([[0.0000, 0.0000, 1.5000],
                [1.5000, 0.0000, 0.0000]], grad_fn=<MulBackward0>)
        >>> [name for name, _ in stand_in.named_parameters()], stand_in.loss(stand_in(batch), batch).shape
        (['weights'], torch.Size([]))
    """

    def __init__(self, model: ComposerModel, num_classes: int | None = None) -> None:
        super().__init__()
        if not isinstance(model, ComposerModel):
            raise TypeError(
                f"NoOpModelClass stands in for a ComposerModel (it uses its loss and metrics), got "
                f"{type(model).__name__}. Wrap a torch module with composer.models.ComposerClassifier first."
            )
        if num_classes is None:
            num_classes = _infer_num_classes(model)
        elif isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"num_classes={num_classes!r} must be a positive int, or None to infer it from the model.")
        self.num_classes = num_classes
        self.weights = nn.Parameter(torch.tensor([1.5]))
        # Bound methods, not the module: the original's parameters stay out of this model (and of the optimizer).
        self._loss = model.loss
        self._targets = model.targets
        self._get_metrics = model.get_metrics
        self._update_metric = model.update_metric
        self.original_class = type(model).__name__

    def forward(self, batch: Batch) -> torch.Tensor:
        """Outputs shaped like the model's, built from the batch's targets and scaled by ``weights``."""
        targets = torch.as_tensor(self._targets(batch))
        weights = self.weights.to(targets.device)
        if targets.is_floating_point() or self.num_classes is None:
            return targets.to(weights.dtype) * weights
        return F.one_hot(targets.clamp(min=0), self.num_classes).to(weights.dtype) * weights

    def loss(self, outputs: Any, batch: Batch, *args: Any, **kwargs: Any) -> torch.Tensor | Sequence[torch.Tensor]:
        """The original model's loss on these outputs."""
        return self._loss(outputs, batch, *args, **kwargs)

    def targets(self, batch: Batch) -> Any:
        """The original model's targets of ``batch``."""
        return self._targets(batch)

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        """The original model's metrics."""
        metrics: dict[str, Metric] = self._get_metrics(is_train=is_train)
        return metrics

    def update_metric(self, batch: Batch, outputs: Any, metric: Metric) -> None:
        """Updates ``metric`` as the original model would."""
        self._update_metric(batch, outputs, metric)

    def extra_repr(self) -> str:
        return f"stands in for {self.original_class}, num_classes={self.num_classes}"


def no_op_model(model: ComposerModel, num_classes: int | None = None) -> NoOpModelClass:
    """Returns a one-parameter :class:`NoOpModelClass` that stands in for ``model`` (``model`` is not changed).

    Train it in place of ``model`` to measure how fast the data pipeline and the training loop go on their own.

    Args:
        model: The model to stand in for.
        num_classes: See :class:`NoOpModelClass`.

    Returns:
        NoOpModelClass: The stand-in.

    Example:
        >>> from composer.models import GPT, GPTConfig
        >>> stand_in = no_op_model(GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8)))
        >>> batch = {"input_ids": torch.randint(0, 256, (2, 5))}
        >>> stand_in(batch).shape, sum(p.numel() for p in stand_in.parameters())  # (B, S, vocab_size), 1
        (torch.Size([2, 5, 256]), 1)
    """
    return NoOpModelClass(model, num_classes)


class NoOpModel(Algorithm):
    """Replaces the model by a one-parameter stand-in at ``Event.INIT``, to time the data pipeline and the Trainer.

    The Trainer then trains :class:`NoOpModelClass` (the optimizer gets its one parameter; the loss and metrics are
    the model's own), so its throughput is the ceiling that the data pipeline and the loop put on the run. The
    model passed to the Trainer is left as it is, and untrained. Model-surgery methods listed after it find
    nothing to change (the stand-in has no layers; they warn); listed before it, they change the original model,
    which is then not used.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import ComposerClassifier
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = ComposerClassifier(torch.nn.Linear(4, 3), num_classes=3)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 3, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep", algorithms=[NoOpModel()],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> type(trainer.state.model).__name__, [p.numel() for p in trainer.state.optimizers[0].param_groups[0]["params"]]
        ('NoOpModelClass', [1])
    """

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Puts the stand-in in ``state.model``; the Trainer trains it from then on."""
        if not isinstance(state.model, NoOpModelClass):
            state.model = no_op_model(state.model)  # type: ignore[arg-type]  # the Trainer's model is a ComposerModel


NoOpModelHparams = hparams_for(NoOpModel)
"""See :class:`NoOpModel`; the fields are its arguments (YAML key ``no_op_model``)."""
