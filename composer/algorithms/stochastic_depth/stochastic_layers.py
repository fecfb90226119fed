"""Residual blocks whose residual branch is randomly dropped in training: per block ("block") or per sample ("sample").

A :class:`StochasticBottleneck` or :class:`StochasticBasicBlock` is the ordinary ResNet block plus a drop rate ``r``:

* ``"block"`` (Huang et al. 2016): in training the whole residual branch is skipped with probability ``r`` (one draw
  per forward pass), so the block returns ``relu(shortcut(x))``; in evaluation the branch is scaled by its survival
  probability ``1 - r``, matching its expected contribution in training.
* ``"sample"`` (as in the EfficientNet TensorFlow/TPU code, "drop connect"): in training each sample's residual branch
  is kept with probability ``1 - r`` and divided by ``1 - r`` (so its expected value is unchanged); evaluation is the
  ordinary block.

The draws come from the block's ``rand_generator`` (a ``torch.Generator``; None uses torch's default one).
"""

from __future__ import annotations

from typing import Any, Self

import torch
import torch.nn.functional as F
from torch import nn

from composer.models.resnet import BasicBlock, Bottleneck

__all__ = [
    "STOCHASTIC_METHODS",
    "StochasticBasicBlock",
    "StochasticBlock",
    "StochasticBottleneck",
    "check_drop_rate",
    "check_stochastic_method",
]

STOCHASTIC_METHODS = ("block", "sample")
"""What is dropped: ``'block'`` (the residual branch, for the whole batch) or ``'sample'`` (per sample)."""


def check_stochastic_method(stochastic_method: str) -> None:
    """Raises ValueError unless ``stochastic_method`` is one of :data:`STOCHASTIC_METHODS`."""
    if stochastic_method not in STOCHASTIC_METHODS:
        raise ValueError(
            f"stochastic_method={stochastic_method!r} is not supported; choose one of {list(STOCHASTIC_METHODS)} "
            "('block' drops whole blocks, 'sample' drops the block for individual samples)."
        )


def check_drop_rate(drop_rate: float, name: str = "drop_rate") -> None:
    """Raises ValueError naming ``name`` unless ``drop_rate`` is a probability in [0, 1]."""
    if isinstance(drop_rate, bool) or not isinstance(drop_rate, (int, float)) or not 0.0 <= drop_rate <= 1.0:
        raise ValueError(f"{name}={drop_rate!r} must be a probability in [0.0, 1.0], such as 0.2.")


class StochasticBlock(nn.Module):
    """The stochastic forward pass shared by both block types; the residual branch comes from the subclass."""

    drop_rate: float
    module_id: int
    module_count: int
    stochastic_method: str
    use_same_gpu_seed: bool
    use_same_depth_across_gpus: bool
    rand_generator: torch.Generator | None
    downsample: nn.Module | None

    def __init__(
        self,
        drop_rate: float,
        module_id: int,
        module_count: int,
        use_same_gpu_seed: bool,
        use_same_depth_across_gpus: bool,
        rand_generator: torch.Generator | None,
        stochastic_method: str = "block",
        **kwargs: Any,
    ) -> None:
        """Builds the block from ``**kwargs`` (its block class's arguments), then sets the stochastic ones."""
        super().__init__(**kwargs)  # the block class after this one in the subclass's bases
        self._configure(
            drop_rate,
            module_id,
            module_count,
            use_same_gpu_seed,
            use_same_depth_across_gpus,
            rand_generator,
            stochastic_method,
        )

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _configure(
        self,
        drop_rate: float,
        module_id: int,
        module_count: int,
        use_same_gpu_seed: bool,
        use_same_depth_across_gpus: bool,
        rand_generator: torch.Generator | None,
        stochastic_method: str,
    ) -> None:
        check_drop_rate(drop_rate)
        check_stochastic_method(stochastic_method)
        if not 0 <= module_id < module_count:
            raise ValueError(
                f"module_id={module_id!r} must be in [0, module_count) with module_count={module_count!r} "
                "(the block's position among the network's blocks of this type)."
            )
        self.drop_rate = float(drop_rate)
        self.module_id = module_id
        self.module_count = module_count
        self.use_same_gpu_seed = use_same_gpu_seed
        self.use_same_depth_across_gpus = use_same_depth_across_gpus
        self.rand_generator = rand_generator
        self.stochastic_method = stochastic_method

    @classmethod
    def from_target_layer(
        cls,
        module: nn.Module,
        drop_rate: float,
        module_id: int,
        module_count: int,
        use_same_gpu_seed: bool = True,
        use_same_depth_across_gpus: bool = False,
        rand_generator: torch.Generator | None = None,
        stochastic_method: str = "block",
    ) -> Self:
        """Builds the stochastic version of a residual block, reusing its layers (and so its parameters).

        ``module`` is one of ours or torchvision's block of the same kind; its ``conv*``, ``bn*``, ``relu`` and
        ``downsample`` children are adopted as they are, so the weights (and an optimizer training them) carry over.
        The remaining arguments are those of the class.
        """
        block = cls.__new__(cls)
        nn.Module.__init__(block)
        for name, child in module.named_children():
            setattr(block, name, child)
        if not hasattr(block, "downsample"):
            block.downsample = None
        block.stride = vars(module).get("stride", 1)
        block._configure(
            drop_rate,
            module_id,
            module_count,
            use_same_gpu_seed,
            use_same_depth_across_gpus,
            rand_generator,
            stochastic_method,
        )
        block.train(module.training)
        return block

    def _uniform(self, size: tuple[int, ...], device: torch.device) -> torch.Tensor:
        generator = self.rand_generator
        if generator is None or generator.device == device:
            return torch.rand(size, generator=generator, device=device)
        # E.g. a CPU generator driving a model on an accelerator: draw where the generator lives, copy the few over.
        return torch.rand(size, generator=generator, device=generator.device).to(device, non_blocking=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output ``relu(branch + shortcut(x))`` with the branch dropped or scaled as the method says."""
        shortcut = x if self.downsample is None else self.downsample(x)
        rate = self.drop_rate
        if self.stochastic_method == "block":
            if not self.training:
                return F.relu(self.residual(x) * (1.0 - rate) + shortcut)
            draw_device = torch.device("cpu") if self.rand_generator is None else self.rand_generator.device
            if rate > 0.0 and self._uniform((), draw_device).item() < rate:
                return F.relu(shortcut)  # the residual branch is skipped: no compute, no gradient
            return F.relu(self.residual(x) + shortcut)
        # "sample": keep each sample's branch with probability 1 - rate, scaled by 1 / (1 - rate) to keep the mean.
        if not self.training or rate == 0.0:
            return F.relu(self.residual(x) + shortcut)
        keep_prob = 1.0 - rate
        keep = self._uniform((x.shape[0],), x.device) < keep_prob  # (N,) bool
        scale = keep.to(x.dtype) / keep_prob if keep_prob > 0.0 else torch.zeros_like(keep, dtype=x.dtype)
        return F.relu(self.residual(x) * scale.view(-1, *([1] * (x.dim() - 1))) + shortcut)

    def extra_repr(self) -> str:
        return (
            f"stochastic_method={self.stochastic_method!r}, drop_rate={self.drop_rate:.4g}, "
            f"module_id={self.module_id}, module_count={self.module_count}"
        )


class StochasticBottleneck(StochasticBlock, Bottleneck):
    """Stochastic ResNet Bottleneck block: the residual branch is randomly skipped in training.

    In ``"block"`` mode (the default) the block skips its transformation with probability ``drop_rate`` in training
    and scales the transformation's output by ``1 - drop_rate`` in evaluation; in ``"sample"`` mode each sample is
    dropped on its own (see the module docstring). Build one from an existing block with
    :meth:`from_target_layer`, or from scratch with the :class:`~composer.models.resnet.Bottleneck` arguments.

    Args:
        drop_rate: Probability of dropping the block, in [0, 1].
        module_id: The block's placement within the network, e.g. 0 for the first block.
        module_count: The total number of blocks of this type in the network.
        use_same_gpu_seed: Whether the same blocks are dropped on every GPU; it says which generator to pass (one
            seeded alike on every process, or a per-process one): see :class:`StochasticDepth`.
        use_same_depth_across_gpus: Whether the same number of blocks should be dropped on every GPU (meant for
            the "uniform" distribution). Recorded for reference; the count is equal across processes whenever the
            generator is (``use_same_gpu_seed=True``).
        rand_generator: The generator the drops are drawn from; None uses torch's default generator.
        stochastic_method: ``"block"`` or ``"sample"``.
        **kwargs: :class:`~composer.models.resnet.Bottleneck` arguments (``in_channels``, ``width``, ``stride``).

    Example:
        >>> block = StochasticBottleneck(drop_rate=0.5, module_id=0, module_count=1, use_same_gpu_seed=True,
        ...                              use_same_depth_across_gpus=False, rand_generator=torch.Generator(),
        ...                              in_channels=64, width=16)
        >>> block(torch.randn(2, 64, 8, 8)).shape
        torch.Size([2, 64, 8, 8])
    """

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """The bottleneck's residual branch (1x1, 3x3, 1x1 convolutions with batch norm)."""
        return Bottleneck.residual(self, x)


class StochasticBasicBlock(StochasticBlock, BasicBlock):
    """Stochastic ResNet basic block (two 3x3 convolutions): the residual branch is randomly skipped in training.

    The counterpart of :class:`StochasticBottleneck` for ResNet-18/34 and the CIFAR ResNets; the arguments are the
    same, with :class:`~composer.models.resnet.BasicBlock` arguments (``in_channels``, ``out_channels``,
    ``stride``) in ``**kwargs``.

    Args:
        drop_rate: Probability of dropping the block, in [0, 1].
        module_id: The block's position among the network's stochastic blocks, from 0.
        module_count: How many stochastic blocks of this type the network has.
        use_same_gpu_seed: Whether every GPU drops the same blocks (see :class:`StochasticDepth`).
        use_same_depth_across_gpus: Whether every GPU drops as many blocks (recorded for reference, as in
            :class:`StochasticBottleneck`).
        rand_generator: The generator the drops are drawn from; None uses torch's default generator.
        stochastic_method: ``"block"`` (drop the whole residual branch for the batch) or ``"sample"`` (per sample).
        **kwargs: :class:`~composer.models.resnet.BasicBlock` arguments (``in_channels``, ``out_channels``,
            ``stride``).

    Example:
        >>> block = StochasticBasicBlock.from_target_layer(
        ...     BasicBlock(16, 16), drop_rate=1.0, module_id=0, module_count=1, rand_generator=torch.Generator())
        >>> x = torch.rand(2, 16, 4, 4)
        >>> torch.equal(block(x), x)  # always dropped in training: the identity shortcut alone
        True
    """

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """The basic block's residual branch (two 3x3 convolutions with batch norm)."""
        return BasicBlock.residual(self, x)
