"""Ghost Batch Normalization (Hoffer et al. 2017): batch norm over small slices of a large batch.

Batch norm's regularising noise comes from normalising by the statistics of a small random set of samples; with
large batches that noise fades. Ghost batch norm splits every training batch into "ghost batches" of
``ghost_batch_size`` samples and normalises each with its own statistics, as if the batch were smaller. The
``GhostBatchNorm1d/2d/3d`` modules do that, :func:`apply_ghost_batchnorm` puts them in place of a model's batch norms,
and :class:`GhostBatchNorm` does that at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import REQUIRED, hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils.module_surgery import ReplacementPolicy, replace_module_classes

__all__ = [
    "GhostBatchNorm",
    "GhostBatchNorm1d",
    "GhostBatchNorm2d",
    "GhostBatchNorm3d",
    "GhostBatchNormHparams",
    "apply_ghost_batchnorm",
]


def _check_ghost_batch_size(ghost_batch_size: int) -> None:
    if isinstance(ghost_batch_size, bool) or not isinstance(ghost_batch_size, int) or ghost_batch_size < 1:
        raise ValueError(
            f"ghost_batch_size={ghost_batch_size!r} must be a positive int (samples per ghost batch), such as 32."
        )


class _GhostBatchNorm(_BatchNorm):
    """Batch norm that, in training, normalises each ``ghost_batch_size`` slice of the batch on its own."""

    _input_dims: ClassVar[tuple[int, ...]] = ()
    _batchnorm_class: ClassVar[type[_BatchNorm]]

    def __init__(
        self,
        num_features: int,
        ghost_batch_size: int = 32,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        _check_ghost_batch_size(ghost_batch_size)
        self.ghost_batch_size = ghost_batch_size

    @classmethod
    def from_batchnorm(cls, module: _BatchNorm, ghost_batch_size: int) -> _GhostBatchNorm:
        """Builds the ghost version of ``module``, sharing its parameters and running-statistics buffers.

        The state-dict keys stay the same, so checkpoints load into either model.
        """
        ghost = cls(
            module.num_features,
            ghost_batch_size=ghost_batch_size,
            eps=module.eps,
            momentum=module.momentum,
            affine=module.affine,
            track_running_stats=module.track_running_stats,
        )
        ghost.weight, ghost.bias = module.weight, module.bias
        ghost.running_mean, ghost.running_var = module.running_mean, module.running_var
        ghost.num_batches_tracked = module.num_batches_tracked
        ghost.train(module.training)
        return ghost

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() not in self._input_dims:
            raise ValueError(
                f"{type(self).__name__} expects input with {' or '.join(map(str, self._input_dims))} dimensions "
                f"(N, C, ...), got shape {tuple(input.shape)}; use GhostBatchNorm1d for (N, C) or (N, C, L), "
                "2d for (N, C, H, W), 3d for (N, C, D, H, W)."
            )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Normalises each ghost batch of ``input`` ``(N, C, ...)`` with its own statistics (in training)."""
        self._check_input_dim(input)
        uses_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        if not uses_batch_stats or input.shape[0] <= self.ghost_batch_size:
            out: torch.Tensor = super().forward(input)  # one ghost batch covers the batch: plain batch norm
            return out

        chunks = torch.split(input, self.ghost_batch_size)  # ghost batches along dim 0; the last may be smaller
        per_channel = input[0, 0].numel()  # values per channel and sample
        if chunks[-1].shape[0] * per_channel < 2:
            raise ValueError(
                f"{type(self).__name__}: the last ghost batch of a batch of {input.shape[0]} has "
                f"{chunks[-1].shape[0]} sample(s) with {per_channel} value(s) per channel, so it has no variance; "
                f"choose ghost_batch_size (now {self.ghost_batch_size}) so that the last ghost batch has at least 2 "
                "samples (ideally one that divides the batch size)."
            )
        if self.training and self.track_running_stats:
            self._update_running_stats(input)
        # One fused batch-norm call per ghost batch, without running statistics: each is normalised by its own.
        return torch.cat([F.batch_norm(c, None, None, self.weight, self.bias, True, 0.0, self.eps) for c in chunks])

    @torch.no_grad()
    def _update_running_stats(self, input: torch.Tensor) -> None:
        # The whole batch's mean and unbiased variance: the running statistics plain batch norm would keep, so
        # evaluation is unchanged by the ghost batches. Computed in fp32 when the activations are half precision.
        stats_input = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        var, mean = torch.var_mean(stats_input, dim=(0, *range(2, input.dim())), correction=1)  # (C,)
        assert self.running_mean is not None and self.running_var is not None and self.num_batches_tracked is not None
        self.num_batches_tracked.add_(1)
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        self.running_mean.lerp_(mean.to(self.running_mean.dtype), factor)
        self.running_var.lerp_(var.to(self.running_var.dtype), factor)

    def extra_repr(self) -> str:
        base: str = super().extra_repr()  # type: ignore[no-untyped-call]
        return f"{base}, ghost_batch_size={self.ghost_batch_size}"


class GhostBatchNorm1d(_GhostBatchNorm):
    """Ghost batch norm for ``(N, C)`` or ``(N, C, L)`` inputs, the ghost counterpart of ``nn.BatchNorm1d``.

    In training, each ``ghost_batch_size`` slice of the batch (the last may be smaller) is normalised with its own
    mean and variance; a batch of at most ``ghost_batch_size`` samples is normalised exactly as batch norm would.
    The running statistics track the whole batch, as batch norm's do, so evaluation is plain batch norm.

    Args:
        num_features: Channels ``C``.
        ghost_batch_size: Samples per ghost batch.
        eps: Added to the variance for stability.
        momentum: Weight of the new batch in the running statistics (None: cumulative average).
        affine: Learn a per-channel scale and shift.
        track_running_stats: Keep running statistics for evaluation.

    Example:
        >>> gbn = GhostBatchNorm1d(4, ghost_batch_size=2)
        >>> out = gbn(torch.randn(6, 4))
        >>> out[:2].mean(0).abs().max() < 1e-6  # each ghost batch of 2 is centred on its own
        tensor(True)
    """

    _input_dims = (2, 3)


class GhostBatchNorm2d(_GhostBatchNorm):
    """Ghost batch norm for ``(N, C, H, W)`` inputs, the ghost counterpart of ``nn.BatchNorm2d``.

    See :class:`GhostBatchNorm1d` for the behaviour and the arguments.

    Example:
        >>> bn = torch.nn.BatchNorm2d(3)
        >>> gbn = GhostBatchNorm2d.from_batchnorm(bn, ghost_batch_size=4)
        >>> x = torch.randn(8, 3, 5, 5)
        >>> torch.allclose(gbn(x)[:4], bn(x[:4]), atol=1e-5)
        True
    """

    _input_dims = (4,)


class GhostBatchNorm3d(_GhostBatchNorm):
    """Ghost batch norm for ``(N, C, D, H, W)`` inputs, the ghost counterpart of ``nn.BatchNorm3d``.

    See :class:`GhostBatchNorm1d` for the behaviour and the arguments.

    Example:
        >>> GhostBatchNorm3d(2, ghost_batch_size=2)(torch.randn(4, 2, 3, 3, 3)).shape
        torch.Size([4, 2, 3, 3, 3])
    """

    _input_dims = (5,)


_GHOST_CLASSES: dict[type[_BatchNorm], type[_GhostBatchNorm]] = {
    nn.BatchNorm1d: GhostBatchNorm1d,
    nn.BatchNorm2d: GhostBatchNorm2d,
    nn.BatchNorm3d: GhostBatchNorm3d,
}


def apply_ghost_batchnorm(
    model: nn.Module,
    ghost_batch_size: int,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> nn.Module:
    """Replaces the batch normalization modules of ``model`` with ghost batch normalization modules, in place.

    Each ``BatchNorm1d/2d/3d`` becomes the matching ``GhostBatchNorm1d/2d/3d``, sharing its parameters and running
    statistics (the state-dict keys do not change, and an optimizer built earlier keeps working). Must run before
    the model moves to an accelerator.

    Args:
        model: The model to transform.
        ghost_batch_size: Size of the sub-batches to normalize over.
        optimizers: Optimizers already training ``model``, kept in step (see
            :func:`~composer.utils.replace_module_classes`).

    Returns:
        nn.Module: ``model``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
        >>> model = apply_ghost_batchnorm(model, ghost_batch_size=16)
        >>> type(model[1]).__name__, model[1].ghost_batch_size
        ('GhostBatchNorm2d', 16)
    """
    _check_ghost_batch_size(ghost_batch_size)

    def make_policy(ghost_class: type[_GhostBatchNorm]) -> ReplacementPolicy:
        def policy(module: nn.Module, index: int) -> nn.Module:
            assert isinstance(module, _BatchNorm)
            return ghost_class.from_batchnorm(module, ghost_batch_size)

        return policy

    policies: dict[type[nn.Module], ReplacementPolicy] = {
        bn_class: make_policy(ghost_class) for bn_class, ghost_class in _GHOST_CLASSES.items()
    }
    replace_module_classes(model, policies, optimizers=optimizers)
    return model


class GhostBatchNorm(Algorithm):
    """Replaces batch normalization modules with ghost batch normalization modules, simulating smaller batches.

    Works by splitting the input into chunks of ``ghost_batch_size`` samples and running batch normalization on each
    chunk separately; dim 0 is the sample axis. Runs on ``Event.INIT``, before the model moves to an accelerator and
    before the Trainer builds (or updates) the optimizer. Logs ``GhostBatchNorm/num_new_modules``. Note that the
    chunks are taken from each microbatch (with ``grad_accum > 1``).

    Args:
        ghost_batch_size: Size of the sub-batches to normalize over.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import cifar_resnet
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = cifar_resnet(depth=8)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep",
        ...                   algorithms=[GhostBatchNorm(ghost_batch_size=2)], progress_bar=False)
        >>> trainer.fit()
        >>> type(model.module.bn1).__name__
        'GhostBatchNorm2d'
    """

    def __init__(self, ghost_batch_size: int = 32) -> None:
        _check_ghost_batch_size(ghost_batch_size)
        self.ghost_batch_size = ghost_batch_size

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Swaps the model's batch norms for ghost batch norms; logs how many."""
        apply_ghost_batchnorm(state.model, ghost_batch_size=self.ghost_batch_size)
        count = sum(isinstance(m, _GhostBatchNorm) for m in state.model.modules())
        logger.metric_fit({"GhostBatchNorm/num_new_modules": count})


GhostBatchNormHparams = hparams_for(GhostBatchNorm, defaults={"ghost_batch_size": REQUIRED})
"""See :class:`GhostBatchNorm`; the fields are its arguments (YAML key ``ghost_batchnorm``).

``ghost_batch_size`` is required here, as in the seed.
"""
