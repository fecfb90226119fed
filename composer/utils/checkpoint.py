"""Reading and writing checkpoints: crash-safe writes, checksums, safe loading, and model keys across wrappers.

A checkpoint is one file written by ``torch.save``: a dict with the library's ``format_version``, ``metadata``
(library, torch and Python versions, the run's config) and the ``state`` (:meth:`State.state_dict`, or only the
model's weights). It holds tensors and plain Python values only, so ``torch.load(path, weights_only=True)`` reads it
with no extra allowed globals, and loading never runs code from the file. The SHA-256 of the file's bytes is stored
in the zip archive's comment (``torch.save`` writes a zip archive; readers, torch's included, skip the comment), so
any truncation or flipped bit is caught before the file is used. A name ending in ``.safetensors`` writes the
weights as a safetensors file instead (a checksum of the tensors goes into its header).

Writes are atomic: the file is written under a temporary name in the same folder, flushed to disk (``fsync``), and
only then renamed into place, so a crash leaves either the old files or the complete new one, plus at worst a
temporary file that nothing reads. The environment variable ``COMPOSER_CHECKPOINT_FAULT`` makes the writer kill its
own process at one of those moments, for tests: ``after_write`` (written, not yet flushed to disk) or
``after_fsync`` (on disk, not yet renamed), optionally followed by ``:<glob>`` to hit only files whose name matches,
as in ``COMPOSER_CHECKPOINT_FAULT=after_fsync:ep1-ba6-*``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import json
import logging
import os
import pickle
import pickletools
import platform
import re
import signal
import string
import struct
import warnings
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

import torch

from composer._version import __version__
from composer.core.state import State, _bare_model_state, _unwrap_model
from composer.utils import dist

__all__ = [
    "FAULT_ENV_VAR",
    "FILENAME_FIELDS",
    "CheckpointError",
    "NonFiniteWeightsError",
    "find_checkpoints",
    "format_checkpoint_name",
    "is_safetensors_available",
    "link_latest",
    "load_checkpoint",
    "load_model_state",
    "prune_checkpoints",
    "read_checkpoint",
    "remove_stale_temporary_files",
    "restore_checkpoint",
    "save_checkpoint",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_TRAILER_PREFIX = b"composer-sha256:"
_TRAILER_SIZE = len(_TRAILER_PREFIX) + 64  # hex digest
_PLACEHOLDER = "0" * 64  # where a safetensors header's digest goes
FAULT_ENV_VAR = "COMPOSER_CHECKPOINT_FAULT"
_FAULT_MOMENTS = ("after_write", "after_fsync")

# The fields a checkpoint file name may use.
FILENAME_FIELDS = (
    "run_name",
    "rank",
    "local_rank",
    "node_rank",
    "world_size",
    "epoch",
    "batch",
    "batch_in_epoch",
    "sample",
    "sample_in_epoch",
    "token",
    "token_in_epoch",
)
# The time fields, in their order of precedence when sorting checkpoints from newest to oldest.
_TIME_FIELDS = ("batch", "sample", "token", "epoch", "batch_in_epoch", "sample_in_epoch", "token_in_epoch")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: unreadable, truncated, failing its checksum, or unsafe to load.

    The message names the file and says what to do; :attr:`reason` says in a few words what is wrong with it (for
    lists of refused files, as autoresume gives).

    Args:
        message (str): The whole message.
        reason (str, optional): What is wrong, in a few words; default: the message.

    Example:
        >>> error = CheckpointError("ep1-ba8.pt failed its checksum: ...", reason="failed its checksum")
        >>> error.reason
        'failed its checksum'
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class NonFiniteWeightsError(ValueError):
    """Model weights that hold a NaN or an infinity, refused by :func:`save_checkpoint` (the message names them)."""


def is_safetensors_available() -> bool:
    """Whether the optional ``safetensors`` package is installed (for ``*.safetensors`` weight files)."""
    return importlib.util.find_spec("safetensors") is not None


# ---- names -------------------------------------------------------------------------------------------------------


def format_checkpoint_name(pattern: str, state: State | None = None, run_name: str = "", rank: int = 0) -> str:
    """Fills a checkpoint file name pattern: ``'ep{epoch}-ba{batch}-rank{rank}.pt'`` -> ``'ep1-ba6-rank0.pt'``.

    Args:
        pattern (str): A ``str.format`` pattern over :data:`FILENAME_FIELDS` (``run_name``, ``rank``, ``epoch``,
            ``batch``, ``sample``, ``token``, their ``*_in_epoch`` forms, ...).
        state (State, optional): Where the time fields come from; without it they are 0.
        run_name (str): The run's name.
        rank (int): The process rank.

    Raises:
        ValueError: If the pattern uses another field, or is not a valid format string.

    Example:
        >>> format_checkpoint_name("{run_name}/ep{epoch}-ba{batch}-rank{rank}.pt", state, run_name="r1")
        'r1/ep0-ba0-rank0.pt'
    """
    values: dict[str, Any] = {
        "run_name": run_name,
        "rank": rank,
        "local_rank": rank,
        "node_rank": 0,
        "world_size": 1 if state is None else state.world_size,
    }
    for name in _TIME_FIELDS:
        values[name] = 0 if state is None else int(getattr(state.timer, name))
    try:
        return pattern.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"Invalid checkpoint name pattern {pattern!r} ({type(e).__name__}: {e}); use str.format fields from "
            f"{list(FILENAME_FIELDS)}, for example 'ep{{epoch}}-ba{{batch}}-rank{{rank}}.pt'."
        ) from None


def find_checkpoints(folder: str | Path, pattern: str, run_name: str = "") -> list[Path]:
    """The checkpoint files under ``folder`` whose names fit ``pattern`` (written by rank 0), newest first.

    Newest means the most training done: files are ordered by the time fields in their names (``batch``, then
    ``sample``, ``token``, ``epoch``), then by modification time. Temporary files of interrupted writes and the
    'latest' link are never returned. Nothing here reads the files; see :func:`read_checkpoint`.

    Args:
        folder (str | Path): Where the checkpoints are.
        pattern (str): The file name pattern they were saved with (it may contain ``/``).
        run_name (str): The run's name, for patterns that use ``{run_name}``.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ["ep0-ba3.pt", "ep1-ba12.pt", "ep0-ba6.pt", "notes.txt"]:
        ...     _ = (folder / name).write_text("")
        >>> [p.name for p in find_checkpoints(folder, "ep{epoch}-ba{batch}.pt")]
        ['ep1-ba12.pt', 'ep0-ba6.pt', 'ep0-ba3.pt']
    """
    found = _timed_checkpoints(Path(folder), pattern, run_name)
    return [path for _, path in sorted(found, key=lambda item: item[0], reverse=True)]


def _timed_checkpoints(folder: Path, pattern: str, run_name: str) -> list[tuple[tuple[float, ...], Path]]:
    """(time fields in their order of precedence, then the modification time; path) for each file of the pattern."""
    if not folder.is_dir():
        return []
    regex, fields = _pattern_regex(pattern, run_name)
    found: list[tuple[tuple[float, ...], Path]] = []
    for path in folder.rglob("*"):
        if path.name.startswith(".") or path.is_symlink() or not path.is_file():
            continue
        match = regex.fullmatch(path.relative_to(folder).as_posix())
        if match is None:
            continue
        key = (*(float(match.group(f)) for f in _TIME_FIELDS if f in fields), path.stat().st_mtime)
        found.append((key, path))
    return found


def prune_checkpoints(
    folder: str | Path,
    pattern: str,
    keep: int,
    newest: str | Path,
    *,
    run_name: str = "",
    protect: Sequence[str | Path] = (),
) -> list[Path]:
    """Deletes the checkpoints in ``folder`` that ``pattern`` names, all but the newest ``keep``.

    The folder is read each time, so what an earlier run left (one killed after writing a checkpoint and before
    pruning) goes at the next call. ``newest``, the checkpoint just written, is always kept and counts as the
    newest; the others rank by the training they hold (the time fields in their names), those behind ``newest``
    first, and last those that claim more training than it: left by a run this one went back from (resumed from an
    older checkpoint, or started over with ``save_overwrite``). Only files whose names fit the pattern are
    candidates, as :func:`find_checkpoints` lists them: never symbolic links (the 'latest' link), temporary files,
    other names or other ranks' files; nor the files in ``protect``.

    Args:
        folder (str | Path): Where the checkpoints are.
        pattern (str): Their file name pattern.
        keep (int): How many to keep (at least 1).
        newest (str | Path): The checkpoint just written.
        run_name (str): The run's name, for patterns that use ``{run_name}``.
        protect (Sequence[str | Path]): Files never to delete (the target of a 'latest' link that could not be
            moved, say).

    Returns:
        list[Path]: The files deleted.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ["ep0-ba3.pt", "ep0-ba1.pt", "ep0-ba2.pt", "ep0-ba9.pt", "notes.txt"]:
        ...     _ = (folder / name).write_text("")
        >>> [p.name for p in prune_checkpoints(folder, "ep{epoch}-ba{batch}.pt", 2, folder / "ep0-ba3.pt")]
        ['ep0-ba9.pt', 'ep0-ba1.pt']
        >>> sorted(p.name for p in folder.iterdir())
        ['ep0-ba2.pt', 'ep0-ba3.pt', 'notes.txt']
    """
    if keep < 1:
        raise ValueError(f"keep={keep!r} must be at least 1: the checkpoint just written is always kept.")
    newest = Path(newest)
    found = _timed_checkpoints(Path(folder), pattern, run_name)
    newest_time = next((key[:-1] for key, path in found if path == newest), None)
    others = [(key, path) for key, path in found if path != newest]
    behind = sorted(
        ((key, path) for key, path in others if newest_time is None or key[:-1] <= newest_time), reverse=True
    )
    ahead = sorted(((key, path) for key, path in others if newest_time is not None and key[:-1] > newest_time))
    ranked = [path for _, path in behind] + [path for _, path in reversed(ahead)]
    kept_protected = {Path(p).resolve() for p in protect}
    deleted = []
    for path in reversed(ranked[keep - 1 :]):  # the least worth keeping first
        if path.resolve() in kept_protected:
            continue
        path.unlink(missing_ok=True)
        deleted.append(path)
    return deleted


def _pattern_regex(pattern: str, run_name: str) -> tuple[re.Pattern[str], set[str]]:
    parts, fields = [], set()
    for literal, field, _spec, _conversion in string.Formatter().parse(pattern):
        parts.append(re.escape(literal))
        if field is None:
            continue
        if field == "run_name":
            parts.append(re.escape(run_name))
        elif field in ("rank", "local_rank", "node_rank"):
            parts.append("0")  # the replicated state is written by rank 0
        elif field not in FILENAME_FIELDS:
            raise ValueError(
                f"Checkpoint name pattern {pattern!r} uses unknown field {{{field}}}; use {FILENAME_FIELDS}."
            )
        elif field in fields:
            parts.append(f"(?P={field})")
        else:
            parts.append(f"(?P<{field}>[0-9]+)")
            fields.add(field)
    return re.compile("".join(parts)), fields


# ---- writing -----------------------------------------------------------------------------------------------------


def save_checkpoint(
    state: State,
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    metadata: Mapping[str, Any] | None = None,
    check_finite: bool = True,
) -> Path:
    """Writes ``state`` to ``path`` atomically (temporary file, fsync, rename), with a checksum.

    The file holds the whole :meth:`State.state_dict` (model, optimizers, schedulers, grad scaler, timer, scale
    schedule ratio, algorithms' and callbacks' states, random states, the data position) or, with
    ``weights_only``, the model's weights alone. Tensors are written from where they are, so a save needs no copy of
    the model: at most one tensor's bytes (torch moves GPU storages to the CPU one at a time) and the 16 MiB buffer
    the checksum is read through.

    Launched on several processes, every rank must call it (the Trainer and ``CheckpointSaver`` do): the ranks'
    random states are gathered into the checkpoint (``'rank_states'``, so that each rank resumes its own), rank 0
    writes the file, and the others wait until it is in place (or raise if rank 0 could not write it). A model
    sharded with FSDP (``DTensor`` parameters) is saved whole: every rank joins in gathering each sharded weight and
    optimizer state (one tensor at a time, onto rank 0's CPU), so the file is the one an unsharded run writes and
    loads into one process, or into any number of sharded ones.

    Args:
        state (State): What to save.
        path (str | Path): The file to write; its folder is created. A ``.safetensors`` name writes the weights in
            that format (it needs ``weights_only=True`` and the ``safetensors`` package).
        weights_only (bool): Save only the model's weights.
        metadata (Mapping, optional): The run's config (plain values), stored under ``metadata['config']``.
        check_finite (bool): Refuse to write model weights (parameters and floating-point buffers) that hold a NaN
            or an infinity: resuming from them would only train on NaN (and autoresume picks the newest checkpoint).
            False writes them as they are (to inspect a diverged run, say).

    Returns:
        Path: The path written.

    Raises:
        TypeError: If a state holds something other than tensors and plain Python values (the message names where).
        NonFiniteWeightsError: With ``check_finite``, if a weight is not finite (the message names it); nothing is
            written.

    Example:
        >>> import tempfile
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ep0-ba0.pt")
        >>> sorted(torch.load(path, weights_only=True))
        ['format_version', 'metadata', 'state']
    """
    path = Path(path)
    rank_states = None if weights_only else _gather_rank_states(state)
    unsharded = _gather_sharded_state(state, weights_only)  # FSDP: a collective, before rank 0 goes its own way
    if state.rank != 0:
        error = dist.broadcast_object_list([None])[0]  # rank 0 says whether the file is in place
        if error is not None:
            raise CheckpointError(f"Rank 0 could not write the checkpoint {path}: {error}")
        return path
    try:
        _write_checkpoint(state, path, weights_only, metadata, rank_states, unsharded, check_finite)
    except BaseException as e:
        if state.world_size > 1:
            dist.broadcast_object_list([f"{type(e).__name__}: {e}"])
        raise
    if state.world_size > 1:
        dist.broadcast_object_list([None])
    return path


def _gather_sharded_state(state: State, weights_only: bool) -> dict[str, Any] | None:
    """For a model sharded with FSDP (``DTensor`` parameters): its whole weights and, unless ``weights_only``, its
    optimizers' states, laid out as an unsharded run's (``state_dict()``: parameters numbered, not named), on rank
    0's CPU. A collective: every rank gathers each sharded tensor in turn; ranks other than 0 drop them and get
    None. None for an unsharded model."""
    if not _is_sharded(state.model):
        return None
    keep = state.rank == 0
    unsharded: dict[str, Any] = {"model": _unshard(_bare_model_state(state.model), keep)}
    if not weights_only:
        unsharded["optimizers"] = [_unshard(optimizer.state_dict(), keep) for optimizer in state.optimizers]
    return unsharded if keep else None


def _is_sharded(model: torch.nn.Module) -> bool:
    """Whether some parameter of ``model`` is a ``DTensor`` (a model sharded with FSDP's ``fully_shard``)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return False
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in _unwrap_model(model).parameters())


def _unshard(value: Any, keep: bool) -> Any:
    """``value`` with every ``DTensor`` gathered whole (onto the CPU when ``keep``, else dropped), in a fixed order."""
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        whole = value.full_tensor()
        return whole.cpu() if keep else None
    if isinstance(value, Mapping):
        return {key: _unshard(item, keep) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_unshard(item, keep) for item in value)
    return value


def _shard_like(value: Any, like: Any) -> Any:
    """A whole tensor cut into this rank's shard the way the ``DTensor`` ``like`` is (every rank holds the same
    whole tensor, read from the same file, so no communication is needed); anything else as it is."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not isinstance(like, DTensor) or not isinstance(value, torch.Tensor) or isinstance(value, DTensor):
        return value
    if value.shape != like.shape:
        return value
    return distribute_tensor(value.to(like.device), like.device_mesh, like.placements, src_data_rank=None)


def _shard_optimizer_states(state: State, saved: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Whole optimizer states (from an unsharded or a sharded run's checkpoint) cut to the shards of this rank's
    sharded parameters: each state tensor shaped like its parameter becomes a ``DTensor`` shard like it."""
    if len(saved) != len(state.optimizers):
        return list(saved)  # State.load_state_dict says what does not match
    sharded = []
    for optimizer, optimizer_state in zip(state.optimizers, saved):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        per_param = {
            index: {
                key: _shard_like(value, params[index]) if 0 <= index < len(params) else value
                for key, value in values.items()
            }
            for index, values in optimizer_state.get("state", {}).items()
        }
        sharded.append({**optimizer_state, "state": per_param})
    return sharded


def _gather_rank_states(state: State) -> list[dict[str, Any]] | None:
    """Every rank's random states (``state.rng`` and :meth:`State.capture_rng`), in rank order; None in a single
    process, where the state dict already holds them."""
    if state.world_size == 1:
        return None
    own = {
        "rng": state.rng.get_state(),
        "process_rng": {"current": state.capture_rng(), "epoch_start": state.epoch_start_rng},
    }
    return dist.all_gather_object(own)


def _write_checkpoint(
    state: State,
    path: Path,
    weights_only: bool,
    metadata: Mapping[str, Any] | None,
    rank_states: list[dict[str, Any]] | None,
    unsharded: dict[str, Any] | None = None,
    check_finite: bool = True,
) -> None:
    info = {
        "library": "opencomposer",
        "library_version": __version__,
        "torch_version": str(torch.__version__),  # a str subclass, which weights_only loading refuses
        "python_version": platform.python_version(),
        "weights_only": weights_only,
        "config": dict(metadata or {}),
    }
    content: dict[str, Any] = {"model": _bare_model_state(state.model)} if weights_only else state.state_dict()
    if unsharded is not None:
        content.update(unsharded)  # a sharded model's whole weights and optimizer states, in place of the shards
    if check_finite:
        _check_finite_weights(content["model"], path)
    if rank_states is not None:
        content["rank_states"] = rank_states
    if path.suffix == ".safetensors":
        if not weights_only:
            raise ValueError(
                f"Cannot save the full training state to {path}: safetensors files hold tensors only. Pass "
                "weights_only=True to save the weights there, or use a '.pt' name for a resumable checkpoint."
            )
        _write_safetensors(path, content["model"], info)
        return
    payload = {"format_version": FORMAT_VERSION, "metadata": info, "state": content}
    _check_plain(payload, "checkpoint")  # fail now, naming the culprit, rather than when loading
    _atomic_write(path, lambda tmp: _write_torch(payload, tmp))


def _check_finite_weights(weights: Mapping[str, Any], path: Path) -> None:
    """Raises NonFiniteWeightsError naming the first weight (in the model's order) that holds a NaN or an infinity.

    One device-to-host read per device the weights are on (a checkpoint copies them to the host anyway)."""
    floating = [
        (key, value)
        for key, value in weights.items()
        if isinstance(value, torch.Tensor)
        and (value.is_floating_point() or value.is_complex())
        and value.device.type != "meta"
    ]
    by_device: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
    for index, (_, value) in enumerate(floating):
        by_device.setdefault(value.device, []).append((index, value))
    bad: list[int] = []
    for items in by_device.values():
        finite = torch.stack([torch.isfinite(value).all() for _, value in items])
        if not bool(finite.all()):
            bad.extend(items[i][0] for i in (~finite).nonzero().flatten().tolist())
    if not bad:
        return
    key, value = floating[min(bad)]
    nan, inf = int(torch.isnan(value).sum()), int(torch.isinf(value).sum())
    others = [floating[i][0] for i in sorted(bad)[1:]]
    raise NonFiniteWeightsError(
        f"Refusing to write {path}: the model's weight {key!r} is not finite ({nan} NaN and {inf} infinite of "
        f"{value.numel()} values)"
        + (f", and so are {_some(others, 5)}" if others else "")
        + ". Training has diverged; a checkpoint of these weights could only resume into NaN (and autoresume would "
        "pick it). To fix: lower the learning rate or clip gradients (grad_clip_norm), and resume from an earlier "
        "checkpoint. To write it anyway (to inspect it), pass check_finite=False (to the Trainer, CheckpointSaver or "
        "save_checkpoint)."
    )


def _write_torch(payload: Any, path: Path) -> None:
    torch.save(payload, path)
    with open(path, "r+b") as f:
        # Hash the archive as torch wrote it (read back from the page cache: faster than hashing through a Python
        # file object torch would write to). It ends with the 2-byte length of its comment, 0: set it, then append
        # the comment.
        digest = hashlib.sha256()
        _hash_rest(f, digest)
        trailer = _TRAILER_PREFIX + digest.hexdigest().encode()
        f.seek(-2, os.SEEK_END)
        f.write(struct.pack("<H", len(trailer)) + trailer)


def _write_safetensors(path: Path, weights: Mapping[str, torch.Tensor], info: Mapping[str, Any]) -> None:
    if not is_safetensors_available():
        raise ImportError(
            f"Saving {path} needs the 'safetensors' package; install it with `pip install safetensors`, or save to "
            "a '.pt' name."
        )
    from safetensors.torch import save

    # The header holds the SHA-256 of the whole file as written with a placeholder in its place; the digest has the
    # placeholder's length, so putting it in moves nothing.
    header = {"format_version": str(FORMAT_VERSION), "metadata": json.dumps(info), "checksum": _PLACEHOLDER}
    try:
        data = memoryview(save(dict(weights), metadata=header))
    except Exception as e:  # safetensors refuses tensors that share memory (tied weights)
        raise ValueError(f"Cannot write {path} as safetensors ({e}); save it to a '.pt' name instead.") from e
    header_size = struct.unpack("<Q", data[:8])[0]
    at = bytes(data[: 8 + header_size]).index(_PLACEHOLDER.encode())
    digest = hashlib.sha256(data).hexdigest().encode()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data[:at])
            f.write(digest)
            f.write(data[at + len(digest) :])

    _atomic_write(path, write)


def _atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """Write to a temporary file next to ``path``, flush it to disk, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        _maybe_fault("after_write", path)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _maybe_fault("after_fsync", path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not every platform can open a folder.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _maybe_fault(moment: str, path: Path) -> None:
    """Test hook: kill this process at ``moment`` of writing ``path`` when COMPOSER_CHECKPOINT_FAULT asks for it."""
    setting = os.environ.get(FAULT_ENV_VAR)
    if not setting:
        return
    wanted, _, name_glob = setting.partition(":")
    if wanted not in _FAULT_MOMENTS:
        raise ValueError(
            f"{FAULT_ENV_VAR}={setting!r} is not understood; use one of {list(_FAULT_MOMENTS)}, optionally followed "
            "by ':<glob over the file name>', or unset it."
        )
    if wanted == moment and (not name_glob or fnmatch.fnmatchcase(path.name, name_glob)):
        log.warning("%s=%s: killing the process %s of %s.", FAULT_ENV_VAR, setting, moment, path)
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


_TEMPORARY_NAME = re.compile(r"\..+\.tmp-(?P<pid>[0-9]+)")


def remove_stale_temporary_files(folder: str | Path) -> list[Path]:
    """Deletes the temporary files that writers killed mid-save left under ``folder`` (those of live processes stay).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / ".ep0-ba3.pt.tmp-999999999").write_text("partial")
        >>> [p.name for p in remove_stale_temporary_files(folder)]
        ['.ep0-ba3.pt.tmp-999999999']
    """
    removed = []
    for path in Path(folder).rglob(".*.tmp-*"):
        match = _TEMPORARY_NAME.fullmatch(path.name)
        if match is None or _process_alive(int(match.group("pid"))):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return pid < 2**22  # exists but is someone else's (or the id is out of range: then it never existed)
    return True


def link_latest(link: str | Path, target: str | Path) -> None:
    """Points the symlink ``link`` at ``target`` (a relative link, replaced atomically).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "ep1-ba8.pt").write_text("")
        >>> link_latest(folder / "latest-rank0.pt", folder / "ep1-ba8.pt")
        >>> (folder / "latest-rank0.pt").resolve().name
        'ep1-ba8.pt'
    """
    link, target = Path(link), Path(target)
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)
    _fsync_folder(link.parent)


# ---- reading -----------------------------------------------------------------------------------------------------


def read_checkpoint(path: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """Reads a checkpoint without running any code from it, and checks its checksum.

    Args:
        path (str | Path): A file written by :func:`save_checkpoint` (``.pt`` or ``.safetensors``), or a plain
            model state dict saved with ``torch.save`` (read as weights without a checksum).
        verify (bool): Check the checksum.

    Returns:
        dict: ``{'format_version', 'metadata', 'state'}``; ``state['model']`` holds the weights.

    Raises:
        FileNotFoundError: If there is no such file.
        CheckpointError: If the file is truncated or corrupt, fails its checksum, or holds objects other than
            tensors and plain values (a file crafted to run code when unpickled is refused this way).

    Example:
        >>> import tempfile
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ckpt.pt")
        >>> checkpoint = read_checkpoint(path)
        >>> checkpoint["metadata"]["library"], "timer" in checkpoint["state"]
        ('opencomposer', True)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at {path}; check the path (and that the file was copied over).")
    if path.suffix == ".safetensors":
        return _read_safetensors(path, verify)
    # Check the bytes before unpickling anything: a corrupt file is reported as such, and never half-read.
    intact = _file_checksum_matches(path) if verify else True
    if intact is False:
        raise CheckpointError(
            f"{path} failed its checksum: the file is corrupt (a flipped bit or a partial overwrite). Use an older "
            "checkpoint (autoresume falls back to one by itself).",
            reason="failed its checksum (a flipped bit or a partial overwrite)",
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's weights-only unpickler refuses a crafted pickle and random bytes alike; only a well-formed pickle
        # that imports or calls something is a crafted one.
        weights_only_refusal = "weights only" in str(e).lower() or "weights_only" in str(e)
        if weights_only_refusal and _pickle_imports_code(path):
            raise CheckpointError(
                f"Refusing to load {path}: it holds Python objects other than tensors and plain values, and "
                "unpickling them could run code from the file. Checkpoints written by composer never do; the file "
                "is corrupt or was crafted. Do not load it with weights_only=False unless you trust where it came "
                f"from. (torch: {str(e).splitlines()[0]})",
                reason="holds Python objects that could run code when unpickled (crafted, or not composer's)",
            ) from None
        raise _corrupt(path, None if weights_only_refusal else e) from None
    except Exception as e:
        raise _corrupt(path, e) from None
    if not isinstance(payload, dict):
        raise CheckpointError(
            f"{path} holds a {type(payload).__name__}, not a checkpoint dict.",
            reason=f"holds a {type(payload).__name__}, not a checkpoint dict",
        )
    if "format_version" not in payload:
        if payload and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in payload.items()):
            return {"format_version": 0, "metadata": {"weights_only": True}, "state": {"model": payload}}
        raise CheckpointError(
            f"{path} is not a composer checkpoint (no 'format_version') nor a plain model state dict of tensors; "
            "load it yourself and pass the weights to composer.utils.checkpoint.load_model_state.",
            reason="not a composer checkpoint (no 'format_version') nor a plain state dict",
        )
    if intact is None:
        raise CheckpointError(
            f"{path} has lost its checksum (the end of the file is missing or damaged): it is truncated or corrupt. "
            "Use an older checkpoint (autoresume falls back to one by itself).",
            reason="lost its checksum (truncated or corrupt)",
        )
    if payload["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {payload['format_version']}, newer than this library reads "
            f"({FORMAT_VERSION}); upgrade opencomposer.",
            reason=f"format {payload['format_version']} is newer than this library reads ({FORMAT_VERSION})",
        )
    return payload


# Pickle opcodes that import a global or call one: a pickle without any of them only builds plain values.
_CODE_OPCODES = frozenset(
    {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD", "EXT1", "EXT2", "EXT4"}
)


def _pickle_imports_code(path: Path) -> bool:
    """Whether ``path`` holds a complete, well-formed pickle that imports or calls something (a crafted pickle), as
    opposed to bytes that only fail to unpickle (a truncated file, a text file). Only parses; runs nothing.

    The pickle is the archive's ``data.pkl`` for a zip file (what ``torch.save`` writes), else the file itself (a
    ``pickle.dump`` or a legacy ``torch.save``, which writes several pickles in a row).
    """
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [name for name in archive.namelist() if name.endswith("data.pkl")]
                if not names:
                    return False
                with archive.open(names[0]) as stream:
                    return _pickles_import_code(stream)
        with open(path, "rb") as stream:
            return _pickles_import_code(stream)
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return False


def _pickles_import_code(stream: IO[bytes], limit: int = 8) -> bool:
    for _ in range(limit):  # consecutive pickles; a legacy torch.save writes five
        seen: set[str] = set()
        try:
            for opcode, _arg, _pos in pickletools.genops(stream):  # stops after the pickle's STOP
                seen.add(opcode.name)
        except Exception:  # not a well-formed pickle from here on: unknown opcode, truncated argument, EOF
            return False
        if seen & _CODE_OPCODES:
            return True
    return False


def _file_checksum_matches(path: Path) -> bool | None:
    """Whether the file's bytes hash to the digest in its trailing zip comment; None if it has no such comment."""
    size = path.stat().st_size
    body = size - _TRAILER_SIZE - 2  # the bytes torch.save wrote, but for the comment length it ends with
    with open(path, "rb") as f:
        if body < 0:
            return None
        f.seek(body)
        tail = f.read()
        if struct.unpack("<H", tail[:2])[0] != _TRAILER_SIZE or not tail[2:].startswith(_TRAILER_PREFIX):
            return None
        expected = tail[2 + len(_TRAILER_PREFIX) :]
        f.seek(0)
        digest = hashlib.sha256()
        _hash_rest(f, digest, body)
    digest.update(b"\0\0")
    return digest.hexdigest().encode() == expected


def _hash_rest(f: BinaryIO, digest: Any, limit: int | None = None) -> None:
    """Feeds the file from its current position (``limit`` bytes at most) to ``digest``, 16 MiB at a time."""
    buffer = memoryview(bytearray(1 << 24))
    remaining = limit if limit is not None else float("inf")
    while remaining > 0:
        read = f.readinto(buffer[: int(min(remaining, len(buffer)))])  # type: ignore[attr-defined]
        if not read:
            return
        digest.update(buffer[:read])
        remaining -= read


def _corrupt(path: Path, error: Exception | None) -> CheckpointError:
    """The error for a file that is no readable checkpoint at all; ``error`` is the reader's, if worth showing."""
    try:
        size = path.stat().st_size
    except OSError:
        size = -1
    what = f"not a checkpoint: truncated or corrupt ({size} bytes)"
    detail = ""
    if error is not None:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        detail = f" (reading it failed with {type(error).__name__}{': ' + first_line if first_line else ''})"
    return CheckpointError(
        f"{path} is {what}{detail}. Use an older checkpoint (autoresume falls back to one by itself), or copy the "
        "file again if it came from elsewhere.",
        reason=what,
    )


def _read_safetensors(path: Path, verify: bool) -> dict[str, Any]:
    if not is_safetensors_available():
        raise ImportError(f"Reading {path} needs the 'safetensors' package; install it with `pip install safetensors`.")
    from safetensors import safe_open

    try:
        with open(path, "rb") as f:
            prefix = f.read(8)
            header_bytes = f.read(struct.unpack("<Q", prefix)[0])
            header = json.loads(header_bytes)["__metadata__"]
            if verify:
                # Hash the file as it was before the digest went in: the digest's bytes back to the placeholder.
                at = header_bytes.index(header["checksum"].encode())
                digest = hashlib.sha256(prefix + header_bytes[:at] + _PLACEHOLDER.encode())
                digest.update(header_bytes[at + len(_PLACEHOLDER) :])
                _hash_rest(f, digest)
                if digest.hexdigest() != header["checksum"]:
                    raise CheckpointError(
                        f"{path} failed its checksum: the file is corrupt. Use an older checkpoint (autoresume falls "
                        "back to one by itself).",
                        reason="failed its checksum",
                    )
        with safe_open(str(path), framework="pt") as f:
            weights = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        metadata = json.loads(header["metadata"])
        version = int(header["format_version"])
    except CheckpointError:
        raise
    except Exception as e:
        raise _corrupt(path, e) from None
    return {"format_version": version, "metadata": metadata, "state": {"model": weights}}


def load_checkpoint(
    state: State,
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Reads the checkpoint at ``path`` and restores it into ``state``; see :func:`restore_checkpoint`.

    Returns:
        dict: The checkpoint's metadata.

    Example:
        >>> import tempfile
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ckpt.pt")
        >>> load_checkpoint(state, path)["library"]
        'opencomposer'
    """
    checkpoint = read_checkpoint(path)
    restore_checkpoint(state, checkpoint, weights_only=weights_only, strict=strict, ignore_keys=ignore_keys, path=path)
    return dict(checkpoint["metadata"])


def restore_checkpoint(
    state: State,
    checkpoint: Mapping[str, Any],
    *,
    weights_only: bool = False,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
    path: str | os.PathLike[str] = "the checkpoint",
) -> None:
    """Restores a checkpoint from :func:`read_checkpoint` into ``state``.

    Into a model sharded with FSDP (``DTensor`` parameters; shard it before restoring), every rank restores the
    same file: each keeps its shard of the whole weights and optimizer states, whichever number of ranks saved them.

    Args:
        state (State): Restored in place; its optimizers, schedulers, algorithms and callbacks must exist already.
        checkpoint (Mapping): The output of :func:`read_checkpoint`.
        weights_only (bool): Restore only the model's weights (no optimizer, timer, random states, ...).
        strict (bool): Whether the model's keys must match exactly (keys matching ``ignore_keys`` aside).
        ignore_keys (Sequence[str]): Glob patterns over the model's keys to leave as they are, e.g. a new
            classification head: ``['module.2.*']``.
        path (str | Path): The file it came from, for error messages.

    Raises:
        CheckpointError: If a full restore is asked of a checkpoint that holds only weights.
    """
    saved = checkpoint["state"]
    saved_weights_only = checkpoint["metadata"].get("weights_only", False)
    if saved_weights_only and not weights_only:
        raise CheckpointError(
            f"{path} holds only model weights, so training cannot resume from it; pass load_weights_only=True to "
            "start from these weights.",
            reason="holds only model weights (saved with weights_only), so training cannot resume from it",
        )
    load_model_state(state.model, saved["model"], strict=strict, ignore_keys=ignore_keys)
    if not weights_only:
        rest = {key: value for key, value in saved.items() if key not in ("model", "rank_states")}
        if "optimizers" in rest and _is_sharded(state.model):
            rest["optimizers"] = _shard_optimizer_states(state, rest["optimizers"])
        state.load_state_dict({**rest, **_own_rank_states(saved.get("rank_states"), state, path)})


def _own_rank_states(rank_states: Sequence[Mapping[str, Any]] | None, state: State, path: Any) -> dict[str, Any]:
    """The random states this rank resumes with: its own when the checkpoint was saved by at least as many ranks,
    none (it keeps its fresh per-rank seed) when there are fewer; in a single-process checkpoint, rank 0's."""
    if rank_states is None:
        return {}
    rank = state.rank
    if rank < len(rank_states):
        return dict(rank_states[rank])
    log.warning(
        "%s was saved by %d ranks; rank %d starts with its own random states (seeded from seed + rank), so its "
        "random draws differ from an uninterrupted run.",
        path,
        len(rank_states),
        rank,
    )
    return {"process_rng": None}


def load_model_state(
    model: torch.nn.Module,
    weights: Mapping[str, torch.Tensor],
    *,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """Loads ``weights`` into ``model``, matching keys across DistributedDataParallel and ``torch.compile``.

    Keys saved from a wrapped model (``module.``, ``_orig_mod.`` prefixes) load into a bare model and the other way
    round: wrappers around ``model`` are looked through, ``_orig_mod`` is dropped wherever it appears, and a leading
    ``module.`` is dropped when that is what makes the keys match (a model may also have a submodule really named
    ``module``).

    Args:
        model (torch.nn.Module): The model to load into (possibly wrapped).
        weights (Mapping): A model state dict.
        strict (bool): Raise if keys are missing or unexpected (besides ``ignore_keys``); otherwise warn.
        ignore_keys (Sequence[str]): Glob patterns over the model's keys whose values are neither loaded nor
            required, e.g. ``['module.2.*']`` for a new classification head.

    Returns:
        tuple[list[str], list[str]]: The missing and the unexpected keys.

    Raises:
        ValueError: On a shape mismatch, or (with ``strict``) missing or unexpected keys; the message lists them
            and how to fix it.

    Example:
        >>> source, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        >>> wrapped_keys = {"module." + k: v for k, v in source.state_dict().items()}  # saved from DDP
        >>> load_model_state(target, wrapped_keys)
        ([], [])
        >>> torch.equal(target.weight, source.weight)
        True
    """
    target = _unwrap_model(model)
    own_state = target.state_dict()
    by_bare_key = {_drop_compile_segments(key): key for key in own_state}
    saved = _strip_wrapper_prefixes({_drop_compile_segments(k): v for k, v in weights.items()}, set(by_bare_key))

    unused_patterns = [p for p in ignore_keys if not any(fnmatch.fnmatchcase(k, p) for k in (*by_bare_key, *saved))]
    if unused_patterns:
        warnings.warn(f"load_ignore_keys patterns {unused_patterns} match no model key.", stacklevel=2)

    def ignored(key: str) -> bool:
        return any(fnmatch.fnmatchcase(key, p) for p in ignore_keys)

    to_load = {by_bare_key[k]: v for k, v in saved.items() if k in by_bare_key and not ignored(k)}
    unexpected = sorted(k for k in saved if k not in by_bare_key and not ignored(k))
    missing = sorted(k for k in by_bare_key if k not in saved and not ignored(k))
    mismatched = [
        f"{key}: saved {tuple(value.shape)}, model {tuple(own_state[key].shape)}"
        for key, value in to_load.items()
        if isinstance(value, torch.Tensor) and value.shape != own_state[key].shape
    ]
    if mismatched:
        raise ValueError(
            f"Checkpoint weights do not fit the model: shape mismatch for {mismatched[:5]}"
            + (f" and {len(mismatched) - 5} more" if len(mismatched) > 5 else "")
            + ". If these layers are new (a new classification head), pass their keys in load_ignore_keys "
            "(glob patterns such as 'module.2.*')."
        )
    if strict and (missing or unexpected):
        raise ValueError(
            f"Checkpoint weights do not match the model: missing keys {_some(missing)}, unexpected keys "
            f"{_some(unexpected)}. Load the checkpoint into the same architecture, list keys to skip in "
            "load_ignore_keys, or load non-strictly (load_strict_model_weights=False)."
        )
    if missing or unexpected:
        log.warning("Loaded model weights non-strictly: missing %s, unexpected %s.", _some(missing), _some(unexpected))
    if _is_sharded(target):  # FSDP: each rank keeps its shard of the whole weights
        to_load = {key: _shard_like(value, own_state[key]) for key, value in to_load.items()}
    target.load_state_dict(to_load, strict=False)
    return missing, unexpected


def _some(keys: Sequence[str], limit: int = 8) -> str:
    return str(list(keys[:limit])) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def _drop_compile_segments(key: str) -> str:
    return ".".join(part for part in key.split(".") if part != "_orig_mod")


def _strip_wrapper_prefixes(weights: dict[str, Any], model_keys: set[str]) -> dict[str, Any]:
    """Drops leading ``module.`` while every key has it and dropping it matches more of the model's keys."""
    best, best_overlap = weights, len(model_keys.intersection(weights))
    current = weights
    while current and all(k.startswith("module.") for k in current):
        current = {k.split(".", 1)[1]: v for k, v in current.items()}
        overlap = len(model_keys.intersection(current))
        if overlap > best_overlap:
            best, best_overlap = current, overlap
    return best


# ---- what a checkpoint may hold --------------------------------------------------------------------------------------


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def _check_plain(obj: Any, where: str) -> None:
    """Raises TypeError unless ``obj`` holds only what ``torch.load(weights_only=True)`` reads back.

    Types are checked exactly, not with isinstance: a subclass (a numpy float, a str enum, torch's version string)
    is pickled as its own class, which weights-only loading refuses.
    """
    kind = type(obj)
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            raise TypeError(f"{where} is a {obj.layout} tensor; checkpoints hold dense tensors only.")
    elif kind in (dict, OrderedDict):
        for key, value in obj.items():
            _check_plain(key, f"{where} (a key)")
            _check_plain(value, f"{where}/{key}")
    elif kind in (list, tuple, set):
        for i, value in enumerate(obj):
            _check_plain(value, f"{where}/{i}")
    elif kind not in _PLAIN_TYPES:
        raise TypeError(
            f"{where} is a {kind.__module__}.{kind.__qualname__}; checkpoints hold tensors and plain Python values "
            "only (so they load with torch.load(weights_only=True)). Make the state_dict() that returns it give "
            "plain values (int, float, str, bool, None, lists, tuples and dicts of them, tensors) instead."
        )
