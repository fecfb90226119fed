"""Fully sharded data parallel training through torch's ``fully_shard`` (FSDP2), for models too big for one device.

Each rank keeps 1/world_size of every parameter, gradient and optimizer state. A sharded submodule (an FSDP *unit*)
gathers its full parameters just before its forward and backward and frees them after, so the peak memory is the
shards plus the largest unit; gradients are reduce-scattered (averaged) onto the shards. Which submodules become
units is a policy (:class:`FSDPConfig`, :func:`select_fsdp_modules`): the classes you name (a transformer block),
modules marked ``_fsdp_wrap = True``, and any submodule holding at least ``min_params`` parameters not already in
a smaller unit; the root module is always a unit and holds the rest.

:func:`prepare_fsdp_module` shards a model in place; it needs the process group (``torchrun`` or
``composer launch``, then :func:`composer.utils.dist.initialize_dist`). Runs on CUDA with NCCL and on CPU with gloo
(torch 2.14: training, mixed precision and ``set_requires_gradient_sync`` work on gloo CPU ranks; CPU offload needs
CUDA). The parameters become ``DTensor`` shards, so ``model.state_dict()`` holds shards too:
:func:`full_model_state_dict` and :func:`full_optimizer_state_dict`, which every rank calls (they are collectives),
give rank 0 the whole, unsharded state, and the ``load_full_*`` functions cut it back into every rank's shards.

The Trainer's ``fsdp_config`` argument uses this module: :func:`resolve_fsdp_config` checks it when the Trainer is
built, and :func:`prepare_fsdp_module` shards the model after ``Event.INIT``. Its checkpoints are written and read by
:mod:`composer.utils.checkpoint`; gathering a sharded model's whole state, and cutting it back, is done in one
place, :mod:`composer.utils.checkpoint.full_state`, which the functions here call too (see
``composer/distributed/DISTRIBUTED.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from composer.utils.checkpoint.full_state import (
    broadcast_full_state,
    full_model_state,
    full_optimizer_state,
    shard_like,
)
from composer.utils.module_surgery import update_optimizer_params

__all__ = [
    "STATE_DICT_TYPES",
    "FSDPConfig",
    "full_model_state_dict",
    "full_optimizer_state_dict",
    "load_full_model_state_dict",
    "load_full_optimizer_state_dict",
    "prepare_fsdp_module",
    "resolve_fsdp_config",
    "select_fsdp_modules",
]

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
STATE_DICT_TYPES = ("full", "sharded")


@dataclasses.dataclass(frozen=True)
class FSDPConfig:
    """How :func:`prepare_fsdp_module` shards a model.

    Args:
        module_classes: Submodule classes (or their names, for YAML) that each become a unit, e.g. a transformer
            block. Default: none.
        min_params: A submodule holding at least this many parameters that no smaller unit holds becomes a unit;
            ``None`` turns the size rule off. Default: 100M, torch's own size policy's default.
        reshard_after_forward: Free the gathered parameters after forward and gather again for backward (least
            memory); ``False`` keeps them until backward (one all-gather less per unit and step).
        param_dtype: ``'bf16'``, ``'fp16'`` or ``'fp32'``: the dtype forward and backward compute in (the shards
            and the optimizer stay in float32). Default: the parameters' own dtype.
        reduce_dtype: The dtype gradients are averaged in. Default: ``param_dtype``.
        cpu_offload: Keep the shards, their gradients and the optimizer step on the CPU (needs CUDA).
        state_dict_type: How the Trainer's checkpoints are written. ``'full'`` (default): the whole state is gathered
            onto rank 0, which writes one file in an unsharded run's format. ``'sharded'``: every rank writes its own
            shards into a checkpoint folder with ``torch.distributed.checkpoint``, so no rank ever holds the whole
            model or optimizer state (see :mod:`composer.utils.checkpoint.sharded`); such a folder loads into FSDP
            runs on any number of ranks, and ``composer checkpoint convert`` turns it into one file.

    Example:
        >>> FSDPConfig(module_classes=["Linear"], param_dtype="bf16").module_classes
        ('Linear',)
        >>> FSDPConfig(min_params=0)
        Traceback (most recent call last):
        ...
        ValueError: FSDPConfig.min_params must be a positive number of parameters or None (size rule off), received 0.
        >>> FSDPConfig(state_dict_type="sharded").state_dict_type
        'sharded'
    """

    module_classes: tuple[str | type[nn.Module], ...] = ()
    min_params: int | None = 100_000_000
    reshard_after_forward: bool = True
    param_dtype: str | None = None
    reduce_dtype: str | None = None
    cpu_offload: bool = False
    state_dict_type: str = "full"

    def __post_init__(self) -> None:
        classes = self.module_classes
        if isinstance(classes, (str, type)):
            classes = (classes,)
        object.__setattr__(self, "module_classes", tuple(classes))
        for cls in self.module_classes:
            if not (isinstance(cls, str) or (isinstance(cls, type) and issubclass(cls, nn.Module))):
                raise TypeError(
                    f"FSDPConfig.module_classes takes nn.Module subclasses or their names, received {cls!r}."
                )
        if self.min_params is not None and (not isinstance(self.min_params, int) or self.min_params < 1):
            raise ValueError(
                "FSDPConfig.min_params must be a positive number of parameters or None (size rule off), "
                f"received {self.min_params!r}."
            )
        for name in ("param_dtype", "reduce_dtype"):
            value = getattr(self, name)
            if value is not None and value not in _DTYPES:
                raise ValueError(f"FSDPConfig.{name} must be one of {list(_DTYPES)} or None, received {value!r}.")
        if self.state_dict_type not in STATE_DICT_TYPES:
            raise ValueError(
                f"FSDPConfig.state_dict_type must be one of {list(STATE_DICT_TYPES)}, received "
                f"{self.state_dict_type!r}. Use 'full' for one checkpoint file gathered on rank 0, or 'sharded' for "
                "a folder in which every rank writes its own shards."
            )
        for name in ("reshard_after_forward", "cpu_offload"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"FSDPConfig.{name} must be True or False, received {getattr(self, name)!r}.")

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> FSDPConfig:
        """The config from a mapping (a recipe's ``fsdp_config``); unknown keys raise with the valid ones.

        Example:
            >>> FSDPConfig.from_dict({"reshard_after_forward": False}).reshard_after_forward
            False
            >>> FSDPConfig.from_dict({"sharding_strategy": "FULL_SHARD"})
            Traceback (most recent call last):
            ...
            ValueError: Unknown fsdp_config key(s) ['sharding_strategy']; expected some of ['module_classes', 'min_params', 'reshard_after_forward', 'param_dtype', 'reduce_dtype', 'cpu_offload', 'state_dict_type'].
        """
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(config) - set(fields))
        if unknown:
            raise ValueError(f"Unknown fsdp_config key(s) {unknown}; expected some of {fields}.")
        return cls(**config)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values (classes by name), for a run's config; :meth:`from_dict` reads it back.

        Example:
            >>> FSDPConfig(module_classes=[nn.Linear], min_params=None).to_dict()["module_classes"]
            ['Linear']
            >>> FSDPConfig.from_dict(FSDPConfig().to_dict()) == FSDPConfig()
            True
        """
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        classes = [cls if isinstance(cls, str) else cls.__name__ for cls in self.module_classes]
        return {**fields, "module_classes": classes}


def resolve_fsdp_config(config: FSDPConfig | Mapping[str, Any] | None) -> FSDPConfig | None:
    """The Trainer's ``fsdp_config`` as an :class:`FSDPConfig` (None: no FSDP), once there is a group to shard over;
    its value is checked with the Trainer's other arguments (:func:`composer.trainer.arguments.argument_problems`).

    Raises:
        RuntimeError: A config is given but no ``torch.distributed`` process group exists (the Trainer creates one
            when launched with ``torchrun``; a single process may create its own).

    Example:
        >>> resolve_fsdp_config(None) is None
        True
        >>> resolve_fsdp_config({"min_params": None})
        Traceback (most recent call last):
        ...
        RuntimeError: fsdp_config was given, but there is no torch.distributed process group to shard the model over. ...
    """
    if config is None:
        return None
    if isinstance(config, Mapping):
        config = FSDPConfig.from_dict(config)
    import torch.distributed as torch_dist

    if not (torch_dist.is_available() and torch_dist.is_initialized()):
        raise RuntimeError(
            "fsdp_config was given, but there is no torch.distributed process group to shard the model over. "
            "Launch the script on several processes with `torchrun --nproc_per_node N script.py` or "
            "`composer launch -n N script.py` (the Trainer then creates the group), or create a group yourself "
            "before building the Trainer (a single process: torch.distributed.init_process_group('gloo', rank=0, "
            "world_size=1, init_method='tcp://127.0.0.1:PORT')); or drop fsdp_config to train unsharded."
        )
    return config


def select_fsdp_modules(
    model: nn.Module, module_classes: Iterable[str | type[nn.Module]] = (), min_params: int | None = None
) -> list[str]:
    """The names of the submodules that become FSDP units, children before their parents (the order to shard in).

    A submodule is a unit when its class is in ``module_classes`` (by type or by name), when it sets
    ``_fsdp_wrap = True``, or when it holds at least ``min_params`` parameters that no unit below it holds; a
    module setting ``_fsdp_wrap = False`` never is. Modules without parameters of their own are skipped. The root
    is not listed: :func:`prepare_fsdp_module` always shards it last.

    Raises:
        ValueError: A parameter is shared (tied) between two units, or a unit and the root's remainder: FSDP would
            shard it twice.

    Example:
        >>> model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Sequential(nn.Linear(10, 8), nn.Linear(8, 8)))
        >>> [sum(p.numel() for p in m.parameters()) for m in (model[0], model[2][0], model[2][1])]
        [110, 88, 72]
        >>> select_fsdp_modules(model, min_params=100)
        ['0', '2']
        >>> select_fsdp_modules(model, module_classes=["Linear"])
        ['0', '2.0', '2.1']
    """
    classes = tuple(module_classes)
    names = {cls for cls in classes if isinstance(cls, str)}
    types = tuple(cls for cls in classes if isinstance(cls, type))
    claimed: set[int] = set()
    selected: list[str] = []

    def visit(module: nn.Module, name: str) -> None:
        for child_name, child in module.named_children():
            visit(child, f"{name}.{child_name}" if name else child_name)
        if not name:
            return  # the root
        free = {id(p): p.numel() for p in module.parameters() if id(p) not in claimed}
        marked = getattr(module, "_fsdp_wrap", None)
        wanted = (
            isinstance(module, types)
            or type(module).__name__ in names
            or marked is True
            or (min_params is not None and sum(free.values()) >= min_params)
        )
        if free and wanted and marked is not False:
            selected.append(name)
            claimed.update(free)

    visit(model, "")
    _check_no_shared_parameters(model, selected)
    return selected


def _check_no_shared_parameters(model: nn.Module, units: Sequence[str]) -> None:
    owners: dict[int, tuple[str, str]] = {}  # id(param) -> (first name seen, its unit)
    for param_name, param in model.named_parameters(remove_duplicate=False):
        unit = max((u for u in units if param_name.startswith(u + ".")), key=len, default="")
        first = owners.setdefault(id(param), (param_name, unit))
        if first[1] != unit:
            raise ValueError(
                f"Parameter {first[0]!r} is shared with {param_name!r} (tied weights), but they fall in different "
                f"FSDP units ({first[1] or 'the root'!r} and {unit or 'the root'!r}); FSDP would shard it twice. Put "
                "both in one unit: drop one of those classes from module_classes, set _fsdp_wrap = False on it, "
                "or raise min_params."
            )


def prepare_fsdp_module(
    model: nn.Module,
    config: FSDPConfig | Mapping[str, Any] | None = None,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] = (),
    *,
    sync_module_states: bool = False,
) -> nn.Module:
    """Shards ``model`` in place with ``fully_shard``: the units :func:`select_fsdp_modules` picks, then the root.

    Every rank calls this with the same model: the same initial weights, or any weights with
    ``sync_module_states=True``, which first broadcasts rank 0's parameters and buffers (as
    ``DistributedDataParallel`` does when it wraps). The parameters become ``DTensor`` shards,
    new ``nn.Parameter`` objects under the same names, on this rank's device (CUDA when the process group is NCCL,
    else the CPU); ``optimizers`` built before are switched over to them (:func:`update_optimizer_params`). The
    returned model is ``model`` itself. For gradient accumulation, call
    ``model.set_requires_gradient_sync(False)`` before the backward of every microbatch but the last.

    Args:
        model: The model, after any surgery (every rank's copy identical).
        config: An :class:`FSDPConfig`, a mapping of its fields, or ``None`` for the defaults.
        optimizers: Optimizers already built on ``model``'s parameters; their state must still be empty.
        sync_module_states: Broadcast rank 0's parameters and buffers before sharding (on the process group's
            device: CUDA with NCCL), so that every rank starts from rank 0's model.

    Raises:
        RuntimeError: torch.distributed is not initialized.
        ValueError: ``cpu_offload`` without CUDA, or an optimizer that has already stepped.
    """
    import torch.distributed as torch_dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    config = FSDPConfig.from_dict(config) if isinstance(config, Mapping) else config or FSDPConfig()
    optimizers = [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
    stepped = [type(opt).__name__ for opt in optimizers if opt.state]
    if stepped:
        raise ValueError(
            f"Optimizer(s) {stepped} already hold state; FSDP replaces the parameters and that state would be lost. "
            "Call prepare_fsdp_module before the first step (load optimizer state afterwards with "
            "load_full_optimizer_state_dict)."
        )
    if not (torch_dist.is_available() and torch_dist.is_initialized()):
        raise RuntimeError(
            "FSDP needs the torch.distributed process group, which does not exist. Launch with "
            "`torchrun --nproc_per_node N script.py` (or `composer launch -n N script.py`) and create the group "
            "first with composer.utils.dist.initialize_dist(); a single process can create one with "
            "torch.distributed.init_process_group('gloo', rank=0, world_size=1, init_method='tcp://127.0.0.1:PORT')."
        )
    device_type = "cuda" if "nccl" in torch_dist.get_backend() else "cpu"
    if config.cpu_offload and device_type != "cuda":
        raise ValueError(
            "FSDPConfig.cpu_offload=True needs CUDA (it pins host memory), but the process group uses "
            f"{torch_dist.get_backend()!r} on CPU. Set cpu_offload=False: on CPU ranks the shards are in host "
            "memory already."
        )
    # A reduce_dtype of None means param_dtype to MixedPrecisionPolicy; None for both keeps the parameters' dtype.
    param_dtype = _DTYPES[config.param_dtype] if config.param_dtype else None
    reduce_dtype = _DTYPES[config.reduce_dtype] if config.reduce_dtype else None
    options: dict[str, Any] = {
        "mesh": init_device_mesh(device_type, (torch_dist.get_world_size(),)),
        "reshard_after_forward": config.reshard_after_forward,
        "mp_policy": MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype),
        "offload_policy": CPUOffloadPolicy() if config.cpu_offload else OffloadPolicy(),
    }
    if sync_module_states:
        cuda = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else None
        _broadcast_module_states(model, cuda)
    before = dict(model.named_parameters())
    for name in select_fsdp_modules(model, config.module_classes, config.min_params):
        fully_shard(model.get_submodule(name), **options)
    fully_shard(model, **options)
    update_optimizer_params(optimizers, before, dict(model.named_parameters()))
    return model


def _broadcast_module_states(model: nn.Module, device: torch.device | None) -> None:
    """Copies rank 0's parameters and buffers into every rank's ``model``, one tensor at a time (through ``device``
    when the tensors live elsewhere: NCCL broadcasts CUDA tensors only)."""
    import torch.distributed as torch_dist

    with torch.no_grad():
        for tensor in dict.fromkeys([*model.parameters(), *model.buffers()]):  # shared tensors once
            if device is None or tensor.device == device:
                torch_dist.broadcast(tensor.detach(), src=0)
            else:
                staged = tensor.detach().to(device)
                torch_dist.broadcast(staged, src=0)
                tensor.copy_(staged)


def full_model_state_dict(model: nn.Module) -> dict[str, Any]:
    """The whole, unsharded ``state_dict`` of a sharded model, on the CPU, on rank 0 (other ranks get ``{}``).

    A collective: every rank calls it. What rank 0 gets loads into the unsharded model with ``load_state_dict``,
    and is a snapshot: later training does not change it. The same gathering as a full checkpoint's
    (:func:`composer.utils.checkpoint.full_state.full_model_state`).
    """
    return full_model_state(model)


def load_full_model_state_dict(model: nn.Module, state_dict: Mapping[str, Any]) -> None:
    """Loads an unsharded ``state_dict`` held by rank 0 into a sharded model; other ranks may pass ``{}``.

    A collective: every rank calls it; rank 0's tensors are broadcast one at a time and each rank keeps its shards.
    """
    own = model.state_dict()
    state = broadcast_full_state(dict(state_dict), lambda path, tensor: shard_like(tensor, own.get(path[0])))
    model.load_state_dict(state)


def full_optimizer_state_dict(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The whole optimizer state of a sharded model on rank 0, as ``optimizer.state_dict()`` lays it out for the
    unsharded model (parameters numbered); other ranks get ``{}``.

    A collective: every rank calls it. Like :func:`full_model_state_dict`, a snapshot.
    """
    del model  # the optimizer's parameters are the model's shards
    return full_optimizer_state(optimizer)


def load_full_optimizer_state_dict(
    model: nn.Module, optimizer: torch.optim.Optimizer, state_dict: Mapping[str, Any]
) -> None:
    """Loads what :func:`full_optimizer_state_dict` gave rank 0 into every rank's sharded optimizer.

    A collective: every rank calls it; other ranks may pass ``{}``.
    """
    del model
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def place(path: tuple[Any, ...], tensor: torch.Tensor) -> Any:
        # ('state', parameter number, key): a state tensor shaped like its parameter becomes a shard like it.
        like = params[path[1]] if len(path) == 3 and path[0] == "state" and path[1] < len(params) else None
        return shard_like(tensor, like)

    optimizer.load_state_dict(broadcast_full_state(dict(state_dict), place))
