"""Gradient, parameter and update norms, per parameter and global, at an interval, for one host sync per log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.utils.interval import parse_interval

__all__ = [
    "OptimizerMonitor",
    "OptimizerMonitorHparams",
    "optimizer_norms",
    "parameter_updates",
    "snapshot_parameters",
    "tensor_norms",
]


def tensor_norms(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The L2 norm of each tensor, computed in float32 by one ``torch._foreach_norm``, without a host sync.

    Args:
        tensors (Sequence[torch.Tensor]): Tensors of any shapes and floating dtypes.

    Returns:
        torch.Tensor: ``(len(tensors),)`` float32 norms on the first tensor's device (empty on the CPU for no tensors).

    Example:
        >>> tensor_norms([torch.tensor([3.0, 4.0]), torch.ones(2, 2, dtype=torch.float16)])
        tensor([5., 2.])
    """
    if not tensors:
        return torch.zeros(0)
    norms = torch._foreach_norm([t.detach() for t in tensors], 2, dtype=torch.float32)
    device = norms[0].device
    return torch.stack([n if n.device == device else n.to(device) for n in norms])


def _trained(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def snapshot_parameters(model: torch.nn.Module) -> list[torch.Tensor]:
    """A detached copy of every parameter that requires a gradient, in ``named_parameters`` order.

    Take it before the optimizer step and pass it to :func:`optimizer_norms` after the step to measure the update.

    Args:
        model (torch.nn.Module): The model.

    Returns:
        list[torch.Tensor]: One copy per trained parameter, on its device.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> [tuple(t.shape) for t in snapshot_parameters(layer)]
        [(1, 2), (1,)]
    """
    return [p.detach().clone() for _, p in _trained(model)]


def parameter_updates(model: torch.nn.Module, before: list[torch.Tensor]) -> list[torch.Tensor]:
    """The change of every trained parameter since ``before`` was taken, written into ``before`` (no new memory).

    Args:
        model (torch.nn.Module): The model, after the optimizer step.
        before (list[torch.Tensor]): :func:`snapshot_parameters` taken before the step; it is overwritten.

    Returns:
        list[torch.Tensor]: ``before``, now holding ``p_before - p`` per trained parameter (the update, negated; its
        norm is the update's norm).

    Raises:
        ValueError: ``before`` does not hold one tensor of the right shape per trained parameter.

    Example:
        >>> layer = torch.nn.Linear(2, 1, bias=False)
        >>> before = snapshot_parameters(layer)
        >>> with torch.no_grad():
        ...     _ = layer.weight.add_(1.0)
        >>> parameter_updates(layer, before)
        [tensor([[-1., -1.]])]
    """
    params = [p.detach() for _, p in _trained(model)]
    if len(before) != len(params) or any(b.shape != p.shape for b, p in zip(before, params)):
        raise ValueError(
            f"before holds {len(before)} tensors that do not match the model's {len(params)} trained parameters; "
            "pass snapshot_parameters(model) taken before the optimizer step."
        )
    if params:
        torch._foreach_sub_(before, params)
    return before


def _global(norms: torch.Tensor) -> torch.Tensor:
    # sqrt(sum_i n_i^2): the norm of all the tensors concatenated; shape (1,)
    total: torch.Tensor = torch.linalg.vector_norm(norms)
    return total.reshape(1)


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    # numerator / denominator, and 0 where the numerator is 0 (a parameter that did not move, even at 0)
    return torch.where(numerator == 0, 0.0, numerator / denominator)


def optimizer_norms(
    model: torch.nn.Module, updates: Sequence[torch.Tensor] | None = None, only_global: bool = False
) -> dict[str, float]:
    """L2 norms of the gradients, the parameters and (given ``updates``) the last update, read with one host sync.

    The norms are computed on the device by ``torch._foreach_norm`` (float32), stacked into one vector and copied to
    the host once.

    Args:
        model (torch.nn.Module): The model, after the optimizer step (gradients still set).
        updates (Sequence[torch.Tensor], optional): The change of each trained parameter over the step, from
            :func:`parameter_updates` (its sign does not matter); enables the update norms and ratios.
        only_global (bool): Return the global values only, not one per parameter.

    Returns:
        dict[str, float]: For each trained parameter ``name`` (unless ``only_global``) and for ``global`` (all of
        them as one vector):

        * ``l2_norm/grad/<name>``: ``||grad||`` (parameters with a gradient only);
        * ``l2_norm/param/<name>``: ``||p||``;
        * ``l2_norm/update/<name>``: ``||update||`` (with ``updates``);
        * ``l2_norm_ratio/update_param/<name>``: ``||update|| / ||p||``, the step's relative size (with ``updates``).

        The global norms are the square root of the sum of the squared per-parameter norms; the global ratio is the
        global update norm over the global parameter norm. A ratio is 0 where nothing changed.

    Raises:
        ValueError: ``updates`` does not hold one tensor of the right shape per trained parameter.

    Example:
        >>> layer = torch.nn.Linear(2, 1, bias=False)
        >>> with torch.no_grad():
        ...     _ = layer.weight.copy_(torch.tensor([[3.0, 4.0]]))
        >>> before = snapshot_parameters(layer)
        >>> layer.weight.grad = torch.tensor([[0.0, 2.0]])
        >>> with torch.no_grad():
        ...     _ = layer.weight.sub_(0.5 * layer.weight.grad)  # a plain SGD step with lr=0.5: [[3.0, 3.0]]
        >>> norms = optimizer_norms(layer, parameter_updates(layer, before), only_global=True)
        >>> {key: round(value, 4) for key, value in norms.items()}  # doctest: +NORMALIZE_WHITESPACE
        {'l2_norm/grad/global': 2.0, 'l2_norm/param/global': 4.2426, 'l2_norm/update/global': 1.0,
         'l2_norm_ratio/update_param/global': 0.2357}
    """
    trained = _trained(model)
    if updates is not None and (
        len(updates) != len(trained) or any(u.shape != p.shape for u, (_, p) in zip(updates, trained))
    ):
        raise ValueError(
            f"updates holds {len(updates)} tensors that do not match the model's {len(trained)} trained parameters; "
            "pass parameter_updates(model, snapshot_parameters(model) taken before the step)."
        )
    names = [n for n, _ in trained]
    graded = [(name, p.grad) for name, p in trained if p.grad is not None]
    param_norms = tensor_norms([p for _, p in trained])
    device = param_norms.device
    # Blocks of (metric prefix, parameter names, (N,) per-parameter values, (1,) global value).
    blocks: list[tuple[str, list[str], torch.Tensor, torch.Tensor]] = []
    if graded:
        grad_norms = tensor_norms([g for _, g in graded])
        blocks.append(("l2_norm/grad", [n for n, _ in graded], grad_norms, _global(grad_norms)))
    param_global = _global(param_norms)
    blocks.append(("l2_norm/param", names, param_norms, param_global))
    if updates is not None and trained:
        update_norms = tensor_norms(updates)
        update_global = _global(update_norms)
        blocks.append(("l2_norm/update", names, update_norms, update_global))
        ratios = _ratio(update_norms, param_norms)
        blocks.append(("l2_norm_ratio/update_param", names, ratios, _ratio(update_global, param_global)))
    keys: list[str] = []
    parts: list[torch.Tensor] = []
    for prefix, block_names, per_parameter, total in blocks:
        if not only_global:
            keys += [f"{prefix}/{name}" for name in block_names]
            parts.append(per_parameter.to(device))
        keys.append(f"{prefix}/global")
        parts.append(total.to(device))
    values = torch.cat(parts).tolist()  # the one host sync
    return dict(zip(keys, values))


class OptimizerMonitor(Callback):
    """Logs gradient, parameter and update norms, per parameter and global, every ``log_interval`` (BATCH level).

    On a logging batch it copies the trained parameters at ``AFTER_TRAIN_BATCH`` (after unscaling and clipping, just
    before the optimizer step) and, at ``BATCH_END``, logs :func:`optimizer_norms`: the norms of the gradients the step
    used, of the parameters after the step, of the update ``p - p_before`` and the update/parameter ratio. The norms
    are computed on the device and read with one host sync. On other batches it does nothing (no copy, no norm),
    nor when no destination logs the batch. With ``'Nba'`` it logs after batches N, 2N, ... (at steps N, 2N, ...);
    with ``'Nep'``, after the first batch of every N-th epoch. When the optimizer re-runs the batch (SAM's closure),
    the copy is of the parameters before the first pass.

    Cost (``benchmarks/optimizer_monitor.py``, a 400k-parameter MLP on one CPU thread; figures in the monitoring
    guide): about 1.2 ms per logging step, a tenth of that model's 11 ms step, and nothing measurable on the steps
    between logs.

    Args:
        log_interval (str | Time | int): ``'10ba'`` (every 10 batches), ``'1ep'``; an int means batches.
        only_global (bool): Log only the ``/global`` values, not one per parameter.
        log_update_norms (bool): Copy the parameters on logging batches to log the update norms and ratios (the copy
            holds one more set of parameters in memory while the batch steps); False logs gradient and parameter
            norms only.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   callbacks=[OptimizerMonitor(log_interval="2ba", only_global=True)],
        ...                   loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("l2_norm/update/global")
        [2, 4]
        >>> trainer.close()
    """

    def __init__(
        self, log_interval: str | Time[Any] | int = "10ba", only_global: bool = False, log_update_norms: bool = True
    ) -> None:
        self.log_interval: Time[int] = parse_interval(log_interval, "log_interval")
        self.only_global = only_global
        self.log_update_norms = log_update_norms
        self._before: list[torch.Tensor] | None = None
        self._due_batch = -1  # the batch (before it counts) whose norms BATCH_END logs; -1: none

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        names = [n for n, p in state.model.named_parameters() if p.requires_grad]
        prefixes = ["l2_norm/grad", "l2_norm/param"]
        if self.log_update_norms:
            prefixes += ["l2_norm/update", "l2_norm_ratio/update_param"]
        layers = ["global"] if self.only_global else [*names, "global"]
        return [f"{prefix}/{layer}" for prefix in prefixes for layer in layers]

    def _due(self, state: State) -> bool:
        timer, n = state.timer, self.log_interval.value
        if self.log_interval.unit == TimeUnit.BATCH:
            return (timer.batch.value + 1) % n == 0
        return timer.batch_in_epoch.value == 0 and timer.epoch.value % n == 0

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._before, self._due_batch = None, -1

    def after_train_batch(self, state: State, logger: Logger) -> None:
        batch = state.timer.batch.value
        if batch == self._due_batch or not logger.destinations or not self._due(state):
            return  # SAM's second pass keeps the first copy; other batches cost nothing
        self._due_batch = batch
        if self.log_update_norms:
            self._before = snapshot_parameters(state.model)

    def batch_end(self, state: State, logger: Logger) -> None:
        if self._due_batch < 0:
            return
        model, before, only_global = state.model, self._before, self.only_global
        self._before, self._due_batch = None, -1
        logger.metric_batch(
            lambda: optimizer_norms(
                model, parameter_updates(model, before) if before is not None else None, only_global
            )
        )


OptimizerMonitorHparams = hparams_for(OptimizerMonitor)
"""See :class:`OptimizerMonitor`; the fields are its arguments (YAML key ``optimizer_monitor``)."""
