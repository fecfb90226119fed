"""Checkpoint names: the defaults, filling a name pattern, finding a run's checkpoints newest first, pruning the
oldest, and the names of the files inside a sharded checkpoint's folder."""

from __future__ import annotations

import os
import re
import shutil
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer.core.state import State

__all__ = [
    "DCP_INDEX",
    "DEFAULT_FILENAME",
    "DEFAULT_LATEST_FILENAME",
    "FILENAME_FIELDS",
    "SHARDED_FILENAME",
    "SHARDED_LATEST_FILENAME",
    "STATE_FILE",
    "find_checkpoints",
    "format_checkpoint_name",
    "is_sharded_checkpoint",
    "prune_checkpoints",
    "refuse_folders_named_like_checkpoints",
    "shard_files",
]

DEFAULT_FILENAME = "ep{epoch}-ba{batch}-rank{rank}.pt"
"""The default name pattern of a checkpoint file (the Trainer's ``save_filename``, CheckpointSaver's ``filename``)."""
DEFAULT_LATEST_FILENAME = "latest-rank{rank}.pt"
"""The default name of the link to the newest checkpoint (``save_latest_filename``)."""
SHARDED_FILENAME = "ep{epoch}-ba{batch}"
"""The default name pattern of a sharded checkpoint, a folder (every rank writes its shards into it)."""
SHARDED_LATEST_FILENAME = "latest"
"""The default name of the link to the newest sharded checkpoint."""
STATE_FILE = "composer.pt"
"""A sharded checkpoint's own state beside DCP's files; written last, so it marks a finished folder."""
DCP_INDEX = ".metadata"
"""DCP's index of every tensor's shards in a sharded checkpoint's folder, written by rank 0."""

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
"""The fields a checkpoint name pattern may use (``'ep{epoch}-ba{batch}-rank{rank}.pt'``)."""
# The time fields, in their order of precedence when sorting checkpoints from newest to oldest.
_TIME_FIELDS = ("batch", "sample", "token", "epoch", "batch_in_epoch", "sample_in_epoch", "token_in_epoch")


def format_checkpoint_name(pattern: str, state: State | None = None, run_name: str = "", rank: int = 0) -> str:
    """Fills a checkpoint file name pattern: ``'ep{epoch}-ba{batch}-rank{rank}.pt'`` -> ``'ep1-ba6-rank0.pt'``.

    Args:
        pattern (str): A ``str.format`` pattern over :data:`FILENAME_FIELDS` (``run_name``, ``rank``, ``epoch``,
            ``batch``, ``sample``, ``token``, their ``*_in_epoch`` forms, ...).
        state (State, optional): Where the time fields come from; without it they are 0.
        run_name (str): The run's name.
        rank (int): The process rank.

    Returns:
        str: The file name (a relative path when the pattern holds ``/``).

    Raises:
        ValueError: If the pattern uses another field, or is not a valid format string.

    Example:
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
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
    """The checkpoint files (and sharded checkpoint folders) under ``folder`` whose names fit ``pattern`` (written
    by rank 0), newest first.

    Newest means the most training done: files are ordered by the time fields in their names (``batch``, then
    ``sample``, ``token``, ``epoch``), then by modification time. Temporary files of interrupted writes and the
    'latest' link are never returned. Nothing here reads the files; see :func:`read_checkpoint`.

    Args:
        folder (str | Path): Where the checkpoints are.
        pattern (str): The file name pattern they were saved with (it may contain ``/``).
        run_name (str): The run's name, for patterns that use ``{run_name}``.

    Returns:
        list[Path]: The checkpoints, newest first; empty when ``folder`` does not exist or holds none.

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


def refuse_folders_named_like_checkpoints(folder: str | Path, pattern: str, run_name: str = "") -> None:
    """Raises if ``folder`` holds a folder whose name fits ``pattern`` but which is not a sharded checkpoint's (it
    holds neither ``composer.pt`` nor DCP's index): one-file checkpoints of that name could not be saved over it, and
    autoresume would pass over it to an older checkpoint. Savers of one-file checkpoints call it before the first
    save; a sharded checkpoint's folder, complete or not, is left alone.

    Args:
        folder (str | Path): The save folder.
        pattern (str): The checkpoint file name pattern.
        run_name (str): The run's name, for patterns that use ``{run_name}``.

    Raises:
        ValueError: Naming the first such folder, and what to do.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "ep0-ba12.pt").mkdir()
        >>> refuse_folders_named_like_checkpoints(folder, "ep{epoch}-ba{batch}.pt")
        Traceback (most recent call last):
        ...
        ValueError: The save folder ... holds a folder named like a checkpoint, ep0-ba12.pt/, ...
    """
    stray = [
        p for _, p in _timed_checkpoints(Path(folder), pattern, run_name) if p.is_dir() and not is_sharded_checkpoint(p)
    ]
    if stray:
        path = min(stray)
        raise ValueError(
            f"The save folder {folder} holds a folder named like a checkpoint, {path.relative_to(folder)}/, which is "
            f"not one (save_filename={pattern!r} names files; it is not a sharded checkpoint's folder either): "
            "autoresume would pass over it to an older checkpoint, and the checkpoint of that name could not be "
            f"saved. To fix: move or rename {path}, or choose another save_folder (or run_name)."
        )


def _timed_checkpoints(folder: Path, pattern: str, run_name: str) -> list[tuple[tuple[float, ...], Path]]:
    """(time fields in their order of precedence, then the modification time; path) for each file (or sharded
    checkpoint folder) of the pattern."""
    if not folder.is_dir():
        return []
    regex, fields = _pattern_regex(pattern, run_name)
    found: list[tuple[tuple[float, ...], Path]] = []
    # os.walk, not rglob: another thread may be writing a checkpoint here (a saver's upload thread prunes while the
    # training thread writes), so hidden folders (checkpoints being written) are not entered, and an entry renamed
    # or removed during the scan is passed over instead of failing it.
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in (*dirs, *files):
            path = Path(root, name)
            if name.startswith(".") or path.is_symlink():
                continue  # a sharded checkpoint is a folder; whether one is complete is for read_checkpoint to say
            match = regex.fullmatch(path.relative_to(folder).as_posix())
            if match is None:
                continue
            try:
                modified = path.stat().st_mtime
            except FileNotFoundError:
                continue
            found.append(((*(float(match.group(f)) for f in _TIME_FIELDS if f in fields), modified), path))
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
        _remove(path)
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


def _remove(path: Path) -> None:
    """Deletes a checkpoint file, or a sharded checkpoint's folder."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def is_sharded_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a sharded checkpoint's folder (complete or not): it holds ``composer.pt`` or DCP's index.

    Args:
        path (str | PathLike): A file or folder.

    Returns:
        bool: True for a sharded checkpoint's folder; False for a file, a missing path or another folder.
    """
    path = Path(path)
    return path.is_dir() and ((path / STATE_FILE).is_file() or (path / DCP_INDEX).is_file())


def shard_files(folder: str | os.PathLike[str], rank: int) -> list[str]:
    """The names of the files in a sharded checkpoint's ``folder`` that ``rank`` wrote: its shards
    (``__<rank>_<n>.distcp``), and on rank 0 DCP's index too (``composer.pt`` is not among them).

    Args:
        folder (str | PathLike): The checkpoint's folder (or its temporary folder).
        rank (int): The rank.

    Returns:
        list[str]: File names, sorted; DCP's index last.
    """
    own = re.compile(rf"__{rank}_\d+\.distcp")
    names = sorted(p.name for p in Path(folder).iterdir() if p.is_file() and own.fullmatch(p.name))
    return names + ([DCP_INDEX] if rank == 0 and (Path(folder) / DCP_INDEX).is_file() else [])
