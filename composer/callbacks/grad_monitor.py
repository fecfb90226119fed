"""Gradient norms, global and per parameter, after unscaling and clipping."""

from __future__ import annotations

import torch

from composer.callbacks.optimizer_monitor import tensor_norms
from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["GradMonitor", "GradMonitorHparams", "grad_norms"]


def grad_norms(model: torch.nn.Module, per_layer: bool = False) -> dict[str, torch.Tensor]:
    """The L2 norm of the model's gradients, as tensors left on the gradients' device.

    Args:
        model (torch.nn.Module): The model; parameters without a gradient (or not requiring one) are skipped.
        per_layer (bool): Also return each parameter's norm.

    Returns:
        dict[str, torch.Tensor]: ``'grad_l2_norm/step'``: sqrt of the sum over parameters of ``||grad||_2^2``;
        with ``per_layer``, ``'layer_grad_l2_norm/<parameter name>'``: ``||grad||_2``. Empty when no parameter has a
        gradient.

    Example:
        >>> layer = torch.nn.Linear(2, 1, bias=False)
        >>> layer.weight.grad = torch.tensor([[3.0, 4.0]])
        >>> {k: v.item() for k, v in grad_norms(layer, per_layer=True).items()}
        {'grad_l2_norm/step': 5.0, 'layer_grad_l2_norm/weight': 5.0}
    """
    named = [(n, p.grad) for n, p in model.named_parameters() if p.requires_grad and p.grad is not None]
    if not named:
        return {}
    # One float32 norm per parameter (a (N,) vector), on the gradients' device; nothing is copied to the host.
    norms = tensor_norms([g for _, g in named])
    values = {"grad_l2_norm/step": torch.linalg.vector_norm(norms)}
    if per_layer:
        values.update({f"layer_grad_l2_norm/{name}": norm for (name, _), norm in zip(named, norms)})
    return values


class GradMonitor(Callback):
    """Logs the global gradient norm every batch (BATCH level), and each parameter's norm if asked.

    It runs at ``AFTER_TRAIN_BATCH``: after the gradients of all microbatches are summed, unscaled (with
    ``precision='amp'``) and clipped (with ``grad_clip_norm``), i.e. the gradients the optimizer step uses. The norms
    are computed only when a destination will log them, and stay on the device until a destination writes them.
    When the optimizer re-runs the batch (SAM's closure), each pass is logged at the same step; the last one is
    the gradient the update applies.

    Args:
        log_layer_grad_norms (bool): Also log ``layer_grad_l2_norm/<parameter name>`` for every parameter.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   callbacks=[GradMonitor()], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("grad_l2_norm/step")
        [0, 1]
        >>> trainer.close()
    """

    def __init__(self, log_layer_grad_norms: bool = False) -> None:
        self.log_layer_grad_norms = log_layer_grad_norms

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        names = ["grad_l2_norm/step"]
        if self.log_layer_grad_norms:
            names += [f"layer_grad_l2_norm/{n}" for n, p in state.model.named_parameters() if p.requires_grad]
        return names

    def after_train_batch(self, state: State, logger: Logger) -> None:
        model, per_layer = state.model, self.log_layer_grad_norms
        logger.metric_batch(lambda: grad_norms(model, per_layer))


GradMonitorHparams = hparams_for(GradMonitor)
"""See :class:`GradMonitor`; the fields are its arguments (YAML key ``grad_monitor``)."""
