"""Stochastic Depth (Huang et al. 2016): train a ResNet as an ensemble of shallower networks by dropping blocks.

:func:`apply_stochastic_depth` swaps a model's residual blocks for their stochastic versions (see
:mod:`~composer.algorithms.stochastic_depth.stochastic_layers`), with drop rates that are the same for every block
(``"uniform"``) or grow linearly with depth (``"linear"``); :class:`StochasticDepth` does that at ``Event.INIT`` and
can warm the drop rate up over the start of training.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch
from torch import nn

from composer.algorithms.stochastic_depth.stochastic_layers import (
    StochasticBasicBlock,
    StochasticBlock,
    StochasticBottleneck,
    check_drop_rate,
    check_stochastic_method,
)
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.models.resnet import BasicBlock, Bottleneck
from composer.utils.module_surgery import ReplacementPolicy, replace_module_classes

__all__ = [
    "DROP_DISTRIBUTIONS",
    "STOCHASTIC_LAYER_MAPPING",
    "StochasticDepth",
    "StochasticDepthHparams",
    "apply_stochastic_depth",
]

DROP_DISTRIBUTIONS = ("uniform", "linear")
"""How the drop rate varies with depth: ``'uniform'`` (every block gets it) or ``'linear'`` (rising to it at the last block)."""


# The names of torchvision's blocks; registered only when torchvision (optional) is installed.
_TORCHVISION_LAYER_NAMES = ("TorchvisionBottleneck", "TorchvisionBasicBlock")


def _torchvision_entries() -> dict[str, tuple[type[nn.Module], type[StochasticBlock]]]:
    # torchvision's blocks share our attribute names (conv1, bn1, ..., downsample), so the same stochastic classes
    # adopt them.
    from torchvision.models import resnet as tv_resnet

    return {
        "TorchvisionBottleneck": (tv_resnet.Bottleneck, StochasticBottleneck),
        "TorchvisionBasicBlock": (tv_resnet.BasicBlock, StochasticBasicBlock),
    }


_Entry = tuple[type[nn.Module], type[StochasticBlock]]


class _LayerMapping(MutableMapping[str, _Entry]):
    """A dict of the target layers whose torchvision entries are imported when first read: importing torchvision
    takes over a second, and listing or checking names (a recipe's ``target_layer_name``) needs none of it.

    Example:
        >>> mapping = _LayerMapping({"ResNetBasicBlock": (BasicBlock, StochasticBasicBlock)}, lazy=["Tv"], load=dict)
        >>> sorted(mapping), "Tv" in mapping
        (['ResNetBasicBlock', 'Tv'], True)
    """

    def __init__(self, entries: Mapping[str, _Entry], lazy: Iterable[str], load: Callable[[], dict[str, _Entry]]):
        self._entries = dict(entries)
        self._lazy = [name for name in lazy if name not in self._entries]
        self._load = load

    def _resolve(self) -> None:
        if self._lazy:
            loaded = self._load()
            self._entries.update({name: loaded[name] for name in self._lazy if name in loaded})
            self._lazy = []

    def __getitem__(self, name: str) -> _Entry:
        if name in self._lazy:
            self._resolve()
        return self._entries[name]

    def __setitem__(self, name: str, entry: _Entry) -> None:
        if name in self._lazy:
            self._lazy.remove(name)
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        if name in self._lazy:
            self._lazy.remove(name)
        else:
            del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter([*self._entries, *self._lazy])

    def __len__(self) -> int:
        return len(self._entries) + len(self._lazy)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


STOCHASTIC_LAYER_MAPPING: MutableMapping[str, _Entry] = _LayerMapping(
    {
        "ResNetBottleneck": (Bottleneck, StochasticBottleneck),
        "ResNetBasicBlock": (BasicBlock, StochasticBasicBlock),
    },
    lazy=_TORCHVISION_LAYER_NAMES if importlib.util.find_spec("torchvision") is not None else (),
    load=_torchvision_entries,
)
"""Target layer name -> (the target layer class, the stochastic layer class that replaces it).

``"ResNetBottleneck"`` and ``"ResNetBasicBlock"`` are the blocks of :mod:`composer.models.resnet` (ResNet-50/101/152,
and ResNet-18/34 and the CIFAR ResNets); ``"TorchvisionBottleneck"`` and ``"TorchvisionBasicBlock"`` are
torchvision's, present when torchvision is installed (imported when one of them is first read). A mapping like a
dict: add a name to make StochasticDepth target a block class of your own.
"""


def _check_target_layer_name(target_layer_name: str) -> None:
    if target_layer_name in STOCHASTIC_LAYER_MAPPING:
        return
    if target_layer_name in _TORCHVISION_LAYER_NAMES:
        raise ImportError(
            f"target_layer_name={target_layer_name!r} targets torchvision's blocks, but torchvision is not installed. "
            "To fix, install the vision extra: pip install 'opencomposer[vision]'."
        )
    raise ValueError(
        f"target_layer_name={target_layer_name!r} is not in STOCHASTIC_LAYER_MAPPING; choose one of "
        f"{sorted(STOCHASTIC_LAYER_MAPPING)} ('ResNetBottleneck' for ResNet-50/101/152, 'ResNetBasicBlock' for "
        "ResNet-18/34 and CIFAR ResNets, from composer.models; 'Torchvision...' for torchvision's ResNets)."
    )


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _check_targets_found(model: nn.Module, target_layer_name: str) -> None:
    # No block of the requested class: if the model has blocks another name covers (say torchvision's Bottleneck
    # under "ResNetBottleneck", the name v0.5 used for them), the user picked the wrong name; say which to use.
    present = {type(m) for m in model.modules() if not isinstance(m, StochasticBlock)}
    others = [
        name
        for name, (target_class, _) in STOCHASTIC_LAYER_MAPPING.items()
        if name != target_layer_name and any(issubclass(cls, target_class) for cls in present)
    ]
    if others:
        target_class = STOCHASTIC_LAYER_MAPPING[target_layer_name][0]
        raise ValueError(
            f"target_layer_name={target_layer_name!r} targets {_class_name(target_class)}, and the model has no such "
            f"block, but it has blocks that {others} target. To fix, pass target_layer_name={others[0]!r}."
        )


def _check_drop_distribution(drop_distribution: str) -> None:
    if drop_distribution not in DROP_DISTRIBUTIONS:
        raise ValueError(
            f"drop_distribution={drop_distribution!r} is not supported; choose one of {list(DROP_DISTRIBUTIONS)}."
        )


def _layer_drop_rate(drop_rate: float, module_id: int, module_count: int, drop_distribution: str) -> float:
    # "linear": the i-th of M blocks (0-based) drops with (i + 1) / M * drop_rate, so the last one with drop_rate.
    if drop_distribution == "linear":
        return drop_rate * (module_id + 1) / module_count
    return drop_rate


def _set_drop_rates(model: nn.Module, drop_rate: float, drop_distribution: str) -> None:
    for module in model.modules():
        if isinstance(module, StochasticBlock):
            module.drop_rate = _layer_drop_rate(drop_rate, module.module_id, module.module_count, drop_distribution)


def apply_stochastic_depth(
    model: nn.Module,
    stochastic_method: str,
    target_layer_name: str,
    drop_rate: float = 0.2,
    drop_distribution: str = "linear",
    use_same_gpu_seed: bool = True,
    generator: torch.Generator | None = None,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> None:
    """Applies Stochastic Depth (Huang et al.) to the specified model, in place.

    Every block of the target kind becomes its stochastic version, which in training randomly drops either the whole
    block (``"block"``, as in the paper) or individual samples within it (``"sample"``, as in the EfficientNet
    TensorFlow/TPU code); see :mod:`~composer.algorithms.stochastic_depth.stochastic_layers` for the exact rules.
    The ``i``-th of ``M`` blocks (0-based, in the order the model defines them) gets the drop rate ``drop_rate``
    (``"uniform"``) or ``(i + 1) / M * drop_rate`` (``"linear"``). The stochastic blocks adopt the original layers,
    so the weights and any optimizer training them carry over.

    Args:
        model: Model containing modules to be replaced with stochastic versions.
        stochastic_method: ``"block"`` randomly drops blocks during training; ``"sample"`` randomly drops samples
            within a block during training.
        target_layer_name: Block to replace with a stochastic equivalent: a key of ``STOCHASTIC_LAYER_MAPPING``,
            ``"ResNetBottleneck"`` or ``"ResNetBasicBlock"`` (the blocks of :mod:`composer.models.resnet`), or
            ``"TorchvisionBottleneck"`` or ``"TorchvisionBasicBlock"`` (torchvision's, when it is installed).
        drop_rate: The base probability of dropping a layer or sample, in [0.0, 1.0].
        drop_distribution: ``"uniform"`` (every block gets ``drop_rate``) or ``"linear"`` (rising linearly from
            ``drop_rate / M`` for the first block to ``drop_rate`` for the last).
        use_same_gpu_seed: Recorded on the blocks. Whether the same blocks drop on every GPU depends on
            ``generator``: pass one seeded alike on every process for True (see :class:`StochasticDepth`).
        generator: The ``torch.Generator`` the blocks draw from; None uses torch's default generator.
        optimizers: Optimizers already training ``model``, kept in step (see
            :func:`~composer.utils.replace_module_classes`).

    Raises:
        ValueError: If ``stochastic_method``, ``target_layer_name``, ``drop_rate`` or ``drop_distribution`` is not
            one of the allowed values, or if ``model`` has no block of the target class but has blocks that another
            name of ``STOCHASTIC_LAYER_MAPPING`` targets (the message names it).
        ImportError: If ``target_layer_name`` names torchvision's blocks and torchvision is not installed.

    Example:
        >>> from composer.models import cifar_resnet
        >>> model = cifar_resnet(depth=20)  # 9 basic blocks
        >>> apply_stochastic_depth(model, "block", "ResNetBasicBlock", drop_rate=0.9, drop_distribution="linear",
        ...                        generator=torch.Generator().manual_seed(0))
        >>> [round(m.drop_rate, 2) for m in model.modules() if isinstance(m, StochasticBasicBlock)]
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    """
    check_stochastic_method(stochastic_method)
    _check_target_layer_name(target_layer_name)
    check_drop_rate(drop_rate)
    _check_drop_distribution(drop_distribution)
    target_class, stochastic_class = STOCHASTIC_LAYER_MAPPING[target_layer_name]
    # Blocks that are already stochastic (a subclass of our blocks) stay as they are.
    targets = [m for m in model.modules() if isinstance(m, target_class) and not isinstance(m, StochasticBlock)]
    if not targets:
        _check_targets_found(model, target_layer_name)
    module_count = len(targets)
    next_id = iter(range(module_count))

    def policy(module: nn.Module, index: int) -> nn.Module | None:
        if isinstance(module, StochasticBlock):
            return None
        module_id = next(next_id)
        return stochastic_class.from_target_layer(
            module,
            drop_rate=_layer_drop_rate(drop_rate, module_id, module_count, drop_distribution),
            module_id=module_id,
            module_count=module_count,
            use_same_gpu_seed=use_same_gpu_seed,
            use_same_depth_across_gpus=drop_distribution == "uniform",
            rand_generator=generator,
            stochastic_method=stochastic_method,
        )

    policies: dict[type[nn.Module], ReplacementPolicy] = {target_class: policy}
    replace_module_classes(model, policies, optimizers=optimizers)


class StochasticDepth(Algorithm):
    """Applies Stochastic Depth (Huang et al.) to the specified model.

    The algorithm replaces the specified target layer with a stochastic version of the layer. The stochastic layer
    randomly drops either samples or the layer itself, depending on ``stochastic_method``. The block-wise version
    follows the original paper; the sample-wise version follows the implementation used for EfficientNet in the
    TensorFlow/TPU repo. Surgery happens at ``Event.INIT`` (see :func:`apply_stochastic_depth`); with
    ``drop_warmup > 0`` the drop rate starts at 0 and rises linearly to ``drop_rate`` over that fraction of the run,
    updated at every ``Event.BATCH_START`` from ``state.get_elapsed_duration()``. The algorithm runs first
    (``run_first``), and with ``"block"`` it tells DDP to expect unused parameters.

    Every draw comes from an explicit generator: with ``use_same_gpu_seed`` and ``"block"`` one seeded from the
    run's seed (the same blocks dropped on every process), otherwise ``state.rng`` (details in the method card,
    ``README.md``).

    Args:
        stochastic_method: ``"block"`` randomly drops blocks during training; ``"sample"`` randomly drops samples
            within a block during training.
        target_layer_name: Block to replace, a key of ``STOCHASTIC_LAYER_MAPPING``: ``"ResNetBottleneck"`` or
            ``"ResNetBasicBlock"`` (our ResNets), ``"TorchvisionBottleneck"`` or ``"TorchvisionBasicBlock"``.
        drop_rate: The base probability of dropping a layer or sample, in [0.0, 1.0].
        drop_distribution: How ``drop_rate`` is distributed across layers: ``"uniform"`` assigns the same rate to
            every layer; ``"linear"`` increases it linearly with depth, ending with ``drop_rate``.
        drop_warmup: Fraction of training over which the drop rate rises from 0 to ``drop_rate``, in [0, 1].
        use_same_gpu_seed: Drop the same layers on every GPU (True) or a different set per GPU (False). Only used
            with ``"block"``.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import cifar_resnet
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = cifar_resnet(depth=8)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> algorithm = StochasticDepth(stochastic_method="block", target_layer_name="ResNetBasicBlock",
        ...                             drop_rate=0.5, drop_distribution="uniform")
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep", algorithms=[algorithm],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> type(model.module.layer1[0]).__name__, model.module.layer1[0].drop_rate
        ('StochasticBasicBlock', 0.5)
    """

    run_first = True

    def __init__(
        self,
        stochastic_method: str,
        target_layer_name: str,
        drop_rate: float = 0.2,
        drop_distribution: str = "linear",
        drop_warmup: float = 0.0,
        use_same_gpu_seed: bool = True,
    ) -> None:
        check_stochastic_method(stochastic_method)
        _check_target_layer_name(target_layer_name)
        check_drop_rate(drop_rate)
        _check_drop_distribution(drop_distribution)
        check_drop_rate(drop_warmup, name="drop_warmup")
        self.stochastic_method = stochastic_method
        self.target_layer_name = target_layer_name
        self.drop_rate = drop_rate
        self.drop_distribution = drop_distribution
        self.drop_warmup = drop_warmup
        self.use_same_gpu_seed = use_same_gpu_seed
        self._generator: torch.Generator | None = None  # the shared generator, when use_same_gpu_seed applies
        self._pending_generator_state: torch.Tensor | None = None

    @property
    def find_unused_parameters(self) -> bool:
        """True with ``"block"``: a dropped block's parameters get no gradient that step."""
        return self.stochastic_method == "block"

    def match(self, event: Event, state: State) -> bool:
        """Runs at ``Event.INIT``, and at every ``Event.BATCH_START`` when ``drop_warmup > 0``."""
        return event == Event.INIT or (event == Event.BATCH_START and self.drop_warmup > 0)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """INIT: replaces the target blocks. BATCH_START: sets the warmed-up drop rate on every stochastic block."""
        if event == Event.INIT:
            apply_stochastic_depth(
                state.model,
                stochastic_method=self.stochastic_method,
                target_layer_name=self.target_layer_name,
                drop_rate=self.drop_rate,
                drop_distribution=self.drop_distribution,
                use_same_gpu_seed=self.use_same_gpu_seed,
                generator=self._make_generator(state),
            )
            count = sum(isinstance(m, StochasticBlock) for m in state.model.modules())
            logger.metric_fit({"stochastic_depth/num_stochastic_layers": count})
        if self.drop_warmup > 0:
            warmup_done = min(1.0, state.get_elapsed_duration().value / self.drop_warmup)
            _set_drop_rates(state.model, warmup_done * self.drop_rate, self.drop_distribution)
            logger.metric_batch({"stochastic_depth/drop_rate": warmup_done * self.drop_rate})

    def _make_generator(self, state: State) -> torch.Generator:
        if self.stochastic_method != "block" or not self.use_same_gpu_seed:
            return state.rng
        self._generator = torch.Generator().manual_seed(state.rank_zero_seed)
        if self._pending_generator_state is not None:
            self._generator.set_state(self._pending_generator_state)
            self._pending_generator_state = None
        return self._generator

    def state_dict(self) -> dict[str, Any]:
        """The state of the shared generator, when the algorithm owns one (or has one loaded, waiting for INIT)."""
        if self._generator is not None:
            return {"generator": self._generator.get_state()}
        return {} if self._pending_generator_state is None else {"generator": self._pending_generator_state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the shared generator (now, or at INIT if the surgery has not happened yet)."""
        if "generator" not in state:
            return
        if self._generator is None:
            self._pending_generator_state = state["generator"]
        else:
            self._generator.set_state(state["generator"])


StochasticDepthHparams = hparams_for(
    StochasticDepth,
    first=[
        "stochastic_method",
        "target_layer_name",
        "drop_rate",
        "drop_distribution",
        "use_same_gpu_seed",
        "drop_warmup",
    ],
)
"""See :class:`StochasticDepth`; the fields are its arguments (YAML key ``stochastic_depth``).

The seed's order: ``use_same_gpu_seed`` before ``drop_warmup``.
"""
