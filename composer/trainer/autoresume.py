"""Autoresume from an object store: the newest sound checkpoint, in the store or in a rank's local folder, chosen
the same on every rank.

The store is not always the newest: a run whose uploads failed for good (a store outage longer than
``retry_budget``) leaves newer checkpoints in its local folder than in the store, and the local folders of different
nodes differ (the machine that held rank 0's folder may come back as another rank). So, for one-file checkpoints:

1. every rank finds the newest checkpoint in its own local folder that reads back and holds the whole training
   state (each read verifies the file's checksum);
2. rank 0 gathers them and ranks them with the store's checkpoints by the training in their names, then walks them
   newest first: a rank's local one is taken as it is; one only in the store is downloaded and verified (passed
   over, and named in the warning, if it is damaged);
3. the choice is broadcast, so every rank resumes from the same checkpoint. A rank that lacks it downloads it; if
   only other ranks' folders hold it, the first of them uploads it first;
4. rank 0's local checkpoints that the store lacks, newer than the store's newest and not newer than the choice,
   are then uploaded in the background, newest first (:meth:`~composer.callbacks.CheckpointSaver.upload_missing`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.utils import dist
from composer.utils.checkpoint import CheckpointError, RemoteCheckpointFolder, find_checkpoints, read_checkpoint
from composer.utils.checkpoint.remote_folder import rank_checkpoint_names

__all__ = ["Resumption", "newest_local_or_remote"]

log = logging.getLogger(__name__)

Found = tuple[Path, dict[str, Any]]


@dataclass
class Resumption:
    """What autoresume chose, the same on every rank.

    Attributes:
        found (tuple[Path, dict] | None): This rank's local path of the checkpoint and its payload; None if there is
            none to resume from.
        refused (list[tuple[str, str]]): The newer checkpoints passed over, each with why.
        missing (list[Path]): On rank 0, its local checkpoints that the store lacks, newest first, to upload.
    """

    found: Found | None
    refused: list[tuple[str, str]] = field(default_factory=list)
    missing: list[Path] = field(default_factory=list)


@dataclass
class _Choice:
    name: str | None
    holders: list[int]  # the ranks whose local folder holds it, read back
    in_store: bool
    refused: list[tuple[str, str]]
    missing: list[str]


def newest_local_or_remote(remote: RemoteCheckpointFolder, pattern: str, run_name: str) -> Resumption:
    """The newest checkpoint of ``pattern`` that can be resumed, in the store or in any rank's local folder, chosen
    by rank 0 and read on every rank (a collective; see the module's docstring).

    Raises:
        CheckpointError: On every rank, if the choice is held only by other ranks' folders and could not be uploaded
            for this one.
        ObjectStoreError: If the store cannot be read.
    """
    rank = dist.get_global_rank()
    local, refused_here = _newest_local(remote.local_folder, pattern, run_name)
    names = _local_names(remote.local_folder, pattern, run_name)
    report = (None if local is None else _name(remote, local[0]), names, refused_here)
    reports = dist.all_gather_object(report)
    choice, verified = _choose(remote, pattern, run_name, reports) if rank == 0 else (None, None)
    [choice] = dist.broadcast_object_list([choice])
    assert isinstance(choice, _Choice)
    if choice.name is None:
        return Resumption(None, choice.refused)
    found = local if rank in choice.holders else verified
    if not choice.in_store and len(choice.holders) < dist.get_world_size():
        _share(remote, choice.name, local if rank == choice.holders[0] else None)
        choice.missing = [name for name in choice.missing if name != choice.name]
    if found is None:
        path = remote.download(choice.name)
        found = (path, read_checkpoint(path))
    missing = [remote.local_folder.joinpath(*name.split("/")) for name in choice.missing] if rank == 0 else []
    return Resumption(found, choice.refused, missing)


def _newest_local(folder: Path, pattern: str, run_name: str) -> tuple[Found | None, list[tuple[str, str]]]:
    """The newest checkpoint in ``folder`` that reads back and holds the whole training state, and the newer ones
    refused on the way (name relative to the folder, why)."""
    refused: list[tuple[str, str]] = []
    for path in find_checkpoints(folder, pattern, run_name):
        try:
            return (path, _read_resumable(path)), refused
        except CheckpointError as e:
            refused.append((path.relative_to(folder).as_posix(), f"{e.reason} (local copy)"))
    return None, refused


def _read_resumable(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path`` read back (its checksum verified), if it holds the whole training state."""
    checkpoint = read_checkpoint(path)
    if checkpoint["metadata"].get("weights_only", False):
        raise CheckpointError(
            f"{path} holds only model weights.",
            reason="holds only model weights (saved with weights_only), so training cannot resume",
        )
    return checkpoint


def _local_names(folder: Path, pattern: str, run_name: str) -> dict[str, float]:
    """Name -> modification time of the local checkpoints (ranked with the store's by rank 0)."""
    names = {}
    for path in find_checkpoints(folder, pattern, run_name):
        try:
            names[path.relative_to(folder).as_posix()] = path.stat().st_mtime
        except FileNotFoundError:
            continue
    return names


def _choose(
    remote: RemoteCheckpointFolder,
    pattern: str,
    run_name: str,
    reports: list[tuple[str | None, dict[str, float], list[tuple[str, str]]]],
) -> tuple[_Choice, Found | None]:
    """Rank 0: the newest of the ranks' local checkpoints and the store's, a store one verified by downloading it."""
    store = remote.listing()
    local = {name: when for _, names, _ in reports for name, when in names.items()}
    ranked = rank_checkpoint_names({**local, **store}, pattern, run_name)
    bests = [best for best, _, _ in reports]
    local_refused = {name: why for _, _, refused in reports for name, why in refused}
    refused: list[tuple[str, str]] = []
    chosen, holders, verified = None, [], None
    for name in ranked:
        holders = [rank for rank, best in enumerate(bests) if best == name]
        if holders:
            chosen = name
            break
        if name in local_refused and name not in store:
            refused.append((name, local_refused[name]))
        if name not in store:
            continue  # a rank's local checkpoint older than its newest readable one
        try:
            path = remote.download(name)
            verified = (path, _read_resumable(path))
        except CheckpointError as e:
            refused.append((name, e.reason))
            continue
        chosen, holders = name, []
        break
    missing = []
    if chosen is not None:
        newest_in_store = next((name for name in ranked if name in store), None)
        newer_than_store = ranked[: ranked.index(newest_in_store)] if newest_in_store is not None else ranked
        behind_choice = ranked[ranked.index(chosen) :]
        missing = [n for n in newer_than_store if n in behind_choice and n in reports[0][1] and n not in store]
    return _Choice(chosen, holders, chosen in store, refused, missing), verified


def _share(remote: RemoteCheckpointFolder, name: str, local: Found | None) -> None:
    """A collective: the rank given ``local`` (the first that holds ``name``) uploads it, so that every rank can
    download it; every rank raises if that failed."""
    problem = None
    if local is not None:
        try:
            remote.upload(local[0], name)
            log.info("autoresume: uploaded %s, which only some ranks' local folders held.", local[0])
        except Exception as e:  # every rank learns it, so that none waits in a collective for ever
            problem = f"{type(e).__name__}: {e}"
    problems = [p for p in dist.all_gather_object(problem) if p is not None]
    if problems:
        raise CheckpointError(
            f"autoresume chose {remote.url.join(name)}, the newest checkpoint, which only some ranks' local folders "
            f"hold, and it could not be uploaded for the other ranks: {problems[0]}",
            reason="could not be shared",
        )


def _name(remote: RemoteCheckpointFolder, path: Path) -> str:
    return path.relative_to(remote.local_folder).as_posix()
