"""Sharded checkpoints: every rank of an FSDP run writes its own shards with ``torch.distributed.checkpoint`` (DCP).

A sharded checkpoint is a folder (``ep1-ba6/``). DCP writes the tensors into it: the model's weights and the
optimizers' state tensors, each rank its own shards (``__<rank>_0.distcp``) and rank 0 DCP's index (``.metadata``),
so no rank ever holds the whole model or optimizer state. Everything else goes into ``composer.pt`` beside them, a
checkpoint file like any other (checksummed, read with ``weights_only=True``): the timer, schedulers, algorithms'
and callbacks' states, every rank's random states, the optimizers' hyperparameters and non-tensor state, the run's
config, the layout of the tensors (their names, global shapes and dtypes) and the SHA-256 of every shard file.

The folder is written under a temporary name (``.ep1-ba6.tmp-<pid of rank 0>``) and renamed into place by rank 0
once every rank has written its shards and ``composer.pt`` is on disk, so a folder under a checkpoint's name is
always complete; a crash leaves the temporary folder, which nothing reads and the next run deletes.

Loading (into a model sharded with FSDP on any number of ranks: DCP reshards) reads each rank's part of every
tensor. :func:`convert_sharded_to_full` turns the folder into one ordinary checkpoint file (in one process, without
a process group), which loads into an unsharded run. A crafted folder cannot run code nor make loading read a file
outside it: the names ``composer.pt`` lists and DCP's index are checked against ``composer.pt`` before any tensor is
read (:mod:`~composer.utils.checkpoint.sharded_index`), and the tensors are read through that checked index
(:mod:`~composer.utils.checkpoint.sharded_reader`).

Optimizer states are stored numbered by parameter, as ``optimizer.state_dict()`` numbers them (the same layout as a
full checkpoint's), so a run resumes them when its optimizers are built over the parameters in the same order.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from composer.core.state import State, bare_model_state
from composer.utils import dist
from composer.utils.checkpoint.contents import (
    check_finite_weights,
    check_plain,
    checkpoint_info,
    gather_rank_states,
)
from composer.utils.checkpoint.entry_paths import entry_path
from composer.utils.checkpoint.errors import CheckpointError, NonFiniteWeightsError
from composer.utils.checkpoint.full_state import is_sharded
from composer.utils.checkpoint.local_io import (
    FORMAT_VERSION,
    after_fsync,
    atomic_write,
    disk_full_error,
    fsync_folder,
    hash_rest,
    write_torch,
)
from composer.utils.checkpoint.naming import STATE_FILE, shard_files
from composer.utils.checkpoint.reading import read_checkpoint_file
from composer.utils.checkpoint.sharded_index import check_layout, read_index
from composer.utils.checkpoint.state_dicts import check_keys

__all__ = [
    "convert_sharded_to_full",
    "load_sharded_checkpoint",
    "read_sharded_checkpoint",
    "save_sharded_checkpoint",
]

log = logging.getLogger(__name__)


# ---- saving ------------------------------------------------------------------------------------------------------


def save_sharded_checkpoint(
    state: State,
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    metadata: Mapping[str, Any] | None = None,
    check_finite: bool = True,
) -> Path:
    """Writes ``state`` as a sharded checkpoint folder at ``path``: every rank writes its shards (a collective).

    See the module's docstring for the layout. Every rank must call it, with a model sharded with FSDP.

    Args:
        state (State): What to save.
        path (str | Path): The folder to write (it replaces an existing checkpoint folder of that name).
        weights_only (bool): Save only the model's weights.
        metadata (Mapping, optional): The run's config (plain values), stored under ``metadata['config']``.
        check_finite (bool): Refuse to write model weights that hold a NaN or an infinity (checked shard by shard).

    Returns:
        Path: The folder written.

    Raises:
        ValueError: If the model is not sharded with FSDP.
        NonFiniteWeightsError: With ``check_finite``, if a weight holds a NaN or an infinity (on every rank).
    """
    path = Path(path)
    if not is_sharded(state.model):
        raise ValueError(
            f"Cannot save {path} as a sharded checkpoint: the model is not sharded with FSDP (no DTensor parameters). "
            "Sharded checkpoints need fsdp_config; without it, save one file (the default)."
        )
    model_state = bare_model_state(state.model)
    if check_finite:
        _refuse_non_finite(model_state, path)
    tensors, layout = _flatten({"model": model_state})
    optimizers_rest = [] if weights_only else _split_optimizers(state, tensors, layout)
    rank_states = None if weights_only else gather_rank_states(state)
    tmp, digests = _write_shards(state, path, tensors)
    failure: BaseException | None = None
    if state.rank == 0:
        # composer.pt's content is built inside the write's guard: a failure there reaches every rank too.
        rest = (weights_only, metadata, optimizers_rest, rank_states, layout, digests)
        failure = _write_state_file(path, tmp, lambda: _state_file(state, *rest))
    _raise_on_every_rank_if(failure, state, path)
    if state.rank != 0 and dist.get_local_rank() == 0 and tmp.is_dir():
        _replace_folder(tmp, path)  # a node that does not share rank 0's disk: its copy holds its ranks' shards
    return path


def _write_shards(state: State, path: Path, tensors: dict[str, torch.Tensor]) -> tuple[Path, dict[str, str]]:
    """Every rank writes its shards of ``tensors`` into the checkpoint's temporary folder (a collective); returns the
    folder and the SHA-256 of every rank's shard files. On a failure the folder is removed and every rank raises."""
    from torch.distributed.checkpoint.filesystem import FileSystemWriter
    from torch.distributed.checkpoint.state_dict_saver import save

    # The name is rank 0's, the folder each rank's own: on nodes that share no disk, each writes its shards into its
    # own copy of the folder (DCP creates it), and that node's first rank renames it into place.
    tmp = path.with_name(dist.broadcast_object_list([_temporary_folder(path).name if state.rank == 0 else None])[0])
    if state.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()  # the folder exists before any rank writes into it
    try:
        save(tensors, storage_writer=FileSystemWriter(tmp, sync_files=True))  # raises on every rank
        digests = _merge(dist.all_gather_object({name: _sha256(tmp / name) for name in shard_files(tmp, state.rank)}))
    except BaseException as e:
        full = disk_full_error(path, e, tmp)  # before the folder goes: its disk's free space is evidence
        if state.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        if full is not None:
            raise full from e
        raise
    return tmp, digests


def _state_file(
    state: State,
    weights_only: bool,
    metadata: Mapping[str, Any] | None,
    optimizers_rest: list[dict[str, Any]],
    rank_states: list[dict[str, Any]] | None,
    layout: dict[str, Any],
    digests: dict[str, str],
) -> dict[str, Any]:
    """What ``composer.pt`` holds: the state but its tensors, their layout, and the shard files' digests."""
    content = {} if weights_only else state.state_dict()
    content = {k: v for k, v in content.items() if k not in ("model", "optimizers")}
    if not weights_only:
        content["optimizers"] = optimizers_rest
    if rank_states is not None:
        content["rank_states"] = rank_states
    info = {**checkpoint_info(weights_only, metadata), "sharded": True, "world_size": state.world_size}
    return {"format_version": FORMAT_VERSION, "metadata": info, "state": content, "tensors": layout, "files": digests}


def _write_state_file(path: Path, tmp: Path, payload: Callable[[], dict[str, Any]]) -> BaseException | None:
    """Rank 0 writes ``composer.pt`` (``payload()``) into the folder of shards ``tmp`` and renames the folder into
    place at ``path``; returns what went wrong (the folder removed), or None."""
    try:
        content = payload()
        check_plain(content, "checkpoint")
        atomic_write(tmp / STATE_FILE, lambda file: write_torch(content, file))
        after_fsync(path)  # the whole folder is on disk, not yet renamed: a seam for tests
        _replace_folder(tmp, path)
    except BaseException as e:
        failure = disk_full_error(path, e, tmp) or e  # naming the checkpoint's folder, not its temporary one
        shutil.rmtree(tmp, ignore_errors=True)
        return failure
    return None


def _raise_on_every_rank_if(failure: BaseException | None, state: State, path: Path) -> None:
    """Every rank returns once the folder is in place, or raises if rank 0 (whose ``failure`` it is) could not put
    it there."""
    message = None if failure is None else f"{type(failure).__name__}: {failure}"
    if state.world_size > 1:
        message = dist.broadcast_object_list([message])[0]
    if failure is not None:
        raise failure
    if message is not None:
        raise CheckpointError(f"Rank 0 could not write the sharded checkpoint {path}: {message}")


def _split_optimizers(state: State, tensors: dict[str, torch.Tensor], layout: dict[str, Any]) -> list[dict[str, Any]]:
    """Each optimizer's state tensors added to ``tensors`` (and ``layout``) under DCP's flat names; the rest of its
    state (hyperparameters, non-tensor values), numbered by parameter, returned for ``composer.pt``."""
    optimizers_rest: list[dict[str, Any]] = []
    for i, optimizer in enumerate(state.optimizers):
        saved = optimizer.state_dict()
        per_param: dict[Any, dict[str, Any]] = {}
        for index, values in saved["state"].items():
            per_param[index] = {k: v for k, v in values.items() if not isinstance(v, torch.Tensor)}
            opt_tensors, opt_layout = _flatten(
                {f"optimizer/{i}/{index}": {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}}
            )
            tensors.update(opt_tensors)
            layout.update(opt_layout)
        optimizers_rest.append({"state": per_param, "param_groups": saved["param_groups"]})
    return optimizers_rest


def _refuse_non_finite(model_state: Mapping[str, Any], path: Path) -> None:
    """Checks this rank's shards; every rank raises if any rank found a weight that is not finite."""
    local = {key: value.to_local() if hasattr(value, "to_local") else value for key, value in model_state.items()}
    try:
        check_finite_weights(local, path)
        problem = None
    except NonFiniteWeightsError as e:
        problem = str(e)
    problems = [p for p in dist.all_gather_object(problem) if p is not None]
    if problems:
        raise NonFiniteWeightsError(problems[0] + " (checked in this rank's shard of the weight)")


def _flatten(tree: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``{'model': {'0.weight': t}}`` -> ``({'model/0.weight': t}, {'model/0.weight': (shape, dtype, sharded)})``:
    DCP's flat keys, and the layout ``composer.pt`` records (global shapes: a DTensor's shape is the whole one)."""
    from torch.distributed.tensor import DTensor

    tensors: dict[str, torch.Tensor] = {}
    layout: dict[str, Any] = {}
    for prefix, values in tree.items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                name = f"{prefix}/{key}"
                tensors[name] = value
                layout[name] = (torch.Size(value.shape), value.dtype, isinstance(value, DTensor))
    return tensors, layout


def _load_tensors(targets: dict[str, Any], folder: Path, checkpoint: Mapping[str, Any], no_dist: bool = False) -> None:
    # The reader is a leaf (it imports nothing of this module), imported here because it imports
    # torch.distributed.checkpoint, which takes about half a second: paid when a sharded checkpoint is loaded, not by
    # every import of the package (the Trainer's, the command line's).
    from composer.utils.checkpoint.sharded_reader import load_tensors

    load_tensors(targets, folder, checkpoint, no_dist=no_dist)


def _temporary_folder(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _replace_folder(tmp: Path, path: Path) -> None:
    """Renames the finished folder into place; an older folder of that name (``save_overwrite``) is moved aside to
    a temporary name first and deleted after, so the name never points at a partial folder."""
    old = None
    if path.exists() or path.is_symlink():
        old = path.with_name(f".{path.name}.old.tmp-{os.getpid()}")
        os.replace(path, old)
    os.replace(tmp, path)
    fsync_folder(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)


def _merge(shares: Sequence[Mapping[str, str]]) -> dict[str, str]:
    return {name: digest for share in shares for name, digest in share.items()}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        hash_rest(f, digest)
    return digest.hexdigest()


# ---- reading and loading -------------------------------------------------------------------------------------------


def read_sharded_checkpoint(path: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """Reads a sharded checkpoint's ``composer.pt`` and (with ``verify``) checks every shard file's checksum.

    Returns what :func:`~composer.utils.checkpoint.read_checkpoint` returns for a file, without the tensors: they
    stay in the shard files until :func:`load_sharded_checkpoint` reads each rank's part. ``metadata['sharded']``
    is True, and ``'tensors'`` holds their layout.

    Raises:
        CheckpointError: If the folder is incomplete (no ``composer.pt``), a shard file is missing or fails its
            checksum, ``composer.pt`` itself is damaged, or the folder declares anything ``composer.pt`` does not
            record (a name outside the folder, a bytes item, another shape or dtype: see
            :func:`~composer.utils.checkpoint.sharded_index.read_index`); the message names the offending entry.
    """
    path = Path(path)
    state_file = path / STATE_FILE
    if not state_file.is_file():
        problem = (
            f"{path} is an incomplete sharded checkpoint: it has no {STATE_FILE}, which is written once every rank has "
            "written its shards"
        )
        raise _unusable(problem, f"an incomplete sharded checkpoint (no {STATE_FILE})")
    payload = read_checkpoint_file(entry_path(path, STATE_FILE, source=f"the sharded checkpoint {path}"), verify=verify)
    if (
        not isinstance(payload.get("metadata"), dict)
        or not payload["metadata"].get("sharded")
        or "files" not in payload
    ):
        raise CheckpointError(
            f"{state_file} is not the state file of a sharded checkpoint; pass the checkpoint file itself as the path.",
            reason="not a sharded checkpoint's state file",
        )
    check_layout(payload, path)  # every listed name a plain file name in the folder, before any file is read
    for name, expected in payload["files"].items():
        shard = path / name
        if not shard.is_file():
            problem = f"{path} is missing its shard file {name}: the checkpoint is incomplete"
            raise _unusable(problem, f"missing its shard file {name}", copy_again=True)
        if verify and _sha256(shard) != expected:
            problem = f"{shard} failed its checksum: the file is corrupt"
            raise _unusable(problem, f"shard file {name} failed its checksum", copy_again=True)
    read_index(path, payload)  # refused now (autoresume passes over it) rather than when the tensors are loaded
    return payload


def _unusable(problem: str, reason: str, copy_again: bool = False) -> CheckpointError:
    """The error for a sharded checkpoint that is incomplete or damaged (``problem`` names the file): an older one
    serves instead, or (``copy_again``) the folder copied again."""
    fix = "Use an older checkpoint (autoresume falls back to one by itself)"
    return CheckpointError(
        f"{problem}. {fix}{', or copy the whole folder again' if copy_again else ''}.", reason=reason
    )


def load_sharded_checkpoint(
    state: State,
    checkpoint: Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Loads the tensors of the sharded checkpoint at ``path`` into ``state``'s sharded model and optimizers.

    A collective: every rank calls it, each reading its own part of every tensor (any number of ranks: DCP
    reshards). ``checkpoint`` is :func:`read_sharded_checkpoint`'s. Returns the rest of the state for
    :meth:`State.load_state_dict` (the optimizers' states complete, with this rank's shards).

    Raises:
        CheckpointError: If the model is not sharded with FSDP (the message says how to convert the checkpoint), or
            the folder does not hold what ``composer.pt`` records (see :func:`read_sharded_checkpoint`).
        ValueError: If the model's keys or shapes do not match the checkpoint's (``strict``; ``ignore_keys`` aside).
    """
    path = Path(path)
    if not is_sharded(state.model):
        raise CheckpointError(
            f"{path} is a sharded checkpoint (a folder of per-rank shards, saved with fsdp_config's "
            "state_dict_type='sharded'), and this run's model is not sharded with FSDP, so it cannot load it. Load it "
            "in a run with fsdp_config, or convert it into one file first: `composer checkpoint convert "
            f"{path} {path.name}.pt` (or composer.utils.checkpoint.convert_sharded_to_full) and pass that file as "
            "load_path.",
            reason="a sharded checkpoint, which needs fsdp_config to load",
        )
    layout: Mapping[str, Any] = checkpoint["tensors"]
    own = bare_model_state(state.model)
    saved_keys = [name.split("/", 1)[1] for name in layout if name.startswith("model/")]
    wanted = check_keys(list(own), saved_keys, strict=strict, ignore_keys=ignore_keys)
    mismatched = [
        f"{key}: saved {tuple(layout['model/' + key][0])}, model {tuple(own[key].shape)}"
        for key in wanted
        if tuple(layout["model/" + key][0]) != tuple(own[key].shape)
    ]
    if mismatched:
        raise ValueError(
            f"Checkpoint weights do not fit the model: shape mismatch for {mismatched[:5]}. If these layers are new "
            "(a new classification head), pass their keys in load_ignore_keys (glob patterns such as 'module.2.*')."
        )
    targets: dict[str, Any] = {f"model/{key}": own[key] for key in wanted}
    rest = dict(checkpoint["state"])
    if not weights_only:
        saved_optimizers = rest.get("optimizers", [])
        if len(saved_optimizers) == len(state.optimizers):  # else State.load_state_dict says what does not match
            rest["optimizers"] = [
                _optimizer_targets(i, optimizer, saved, layout, targets)
                for i, (optimizer, saved) in enumerate(zip(state.optimizers, saved_optimizers))
            ]
    _load_tensors(targets, path, checkpoint)
    # DCP loaded the weights into the model's own shards in place; loading them again keeps the model's hooks honest.
    state_of_model = {key: targets[f"model/{key}"] for key in wanted}
    state.model.load_state_dict(state_of_model, strict=False)
    return rest


def _optimizer_targets(
    i: int,
    optimizer: torch.optim.Optimizer,
    saved: Mapping[str, Any],
    layout: Mapping[str, Any],
    targets: dict[str, Any],
) -> dict[str, Any]:
    """The optimizer's state dict to load, with an empty tensor (a shard like its parameter, or a whole tensor) where
    each saved state tensor goes; the tensors are added to ``targets`` for DCP to fill."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    per_param: dict[Any, dict[str, Any]] = {}
    for index, values in saved["state"].items():
        entry = dict(values)
        prefix = f"optimizer/{i}/{index}/"
        for name, (shape, dtype, sharded) in layout.items():
            if not name.startswith(prefix):
                continue
            like = params[index] if 0 <= index < len(params) else None
            if sharded and like is not None and tuple(like.shape) == tuple(shape):
                tensor = torch.empty_like(like, dtype=dtype)
            else:
                tensor = torch.empty(shape, dtype=dtype)
            entry[name[len(prefix) :]] = targets[name] = tensor
        per_param[index] = entry
    return {"state": per_param, "param_groups": saved["param_groups"]}


# ---- converting --------------------------------------------------------------------------------------------------


def convert_sharded_to_full(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Turns the sharded checkpoint folder ``src`` into one checkpoint file ``dst``, as a full (unsharded) run
    writes it; it loads into an unsharded run with ``load_path`` (or ``load_checkpoint``), and into FSDP runs.

    Runs in one process, without a process group (if the calling process has one, it is not used); it holds the
    whole state in memory, as rank 0 does when a full checkpoint is saved.

    Args:
        src (str | Path): A sharded checkpoint's folder.
        dst (str | Path): The file to write (atomically, with a checksum); its folder is created.

    Returns:
        Path: ``dst``.

    Raises:
        ValueError: If ``dst`` is an existing folder.
        CheckpointError: If ``src`` is not a complete sharded checkpoint, fails its checksums, or declares anything
            its ``composer.pt`` does not record (see :mod:`~composer.utils.checkpoint.sharded_index`).
    """
    src, dst = Path(src), Path(dst)
    if dst.is_dir():
        raise ValueError(
            f"convert_sharded_to_full(dst={str(dst)!r}): dst is an existing folder; give the checkpoint file to write, "
            f"e.g. {str(dst / (src.name + '.pt'))!r}."
        )
    if not src.is_dir():
        raise CheckpointError(
            f"convert_sharded_to_full(src={str(src)!r}): src must be a sharded checkpoint's folder (such as "
            "checkpoints/ep1-ba6), and this is "
            + ("a file, which is already a full checkpoint." if src.is_file() else "not there; check the path."),
            reason="not a sharded checkpoint folder",
        )
    checkpoint = read_sharded_checkpoint(src)
    layout: Mapping[str, Any] = checkpoint["tensors"]
    tensors = {name: torch.empty(shape, dtype=dtype) for name, (shape, dtype, _sharded) in layout.items()}
    with warnings.catch_warnings():  # DCP warns that there is no process group: that is the intent
        warnings.filterwarnings("ignore", "torch.distributed is disabled, unavailable or uninitialized")
        _load_tensors(tensors, src, checkpoint, no_dist=True)
    content = dict(checkpoint["state"])
    content["model"] = {name.split("/", 1)[1]: t for name, t in tensors.items() if name.startswith("model/")}
    if "optimizers" in content:
        optimizers = []
        for i, saved in enumerate(content["optimizers"]):
            per_param = {}
            for index, values in saved["state"].items():
                prefix = f"optimizer/{i}/{index}/"
                found = {name[len(prefix) :]: t for name, t in tensors.items() if name.startswith(prefix)}
                per_param[index] = {**values, **found}
            optimizers.append({"state": per_param, "param_groups": saved["param_groups"]})
        content["optimizers"] = optimizers
    metadata = {**checkpoint["metadata"], "sharded": False, "converted_from": str(src)}
    payload = {"format_version": FORMAT_VERSION, "metadata": metadata, "state": content}
    check_plain(payload, "checkpoint")
    atomic_write(dst, lambda tmp: write_torch(payload, tmp))
    return dst
