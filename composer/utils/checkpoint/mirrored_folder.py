"""A folder in an object store whose ranks' local folders count too (:class:`MirroredFolder`), and autoresume's choice
in it: the newest sound checkpoint, in the store or in a rank's local folder, chosen the same on every rank.

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
   are then uploaded in the background, newest first (:meth:`MirroredFolder.catch_up`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.utils import dist
from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.folders import CheckpointFolder, RemoteFolder
from composer.utils.checkpoint.formats import read_checkpoint
from composer.utils.checkpoint.naming import find_checkpoints
from composer.utils.checkpoint.remote_folder import RemoteCheckpointFolder, rank_checkpoint_names
from composer.utils.checkpoint.sharded_mirror import newest_sharded_checkpoint

__all__ = ["WEIGHTS_ONLY", "MirroredFolder", "Resumption", "newest_local_or_remote"]

log = logging.getLogger(__name__)

Found = tuple[Path, dict[str, Any]]

WEIGHTS_ONLY = "holds only model weights (saved with weights_only), so training cannot resume"
"""Why a weights-only checkpoint is passed over by autoresume."""


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
        raise CheckpointError(f"{path} holds only model weights.", reason=WEIGHTS_ONLY)
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


class MirroredFolder(CheckpointFolder):
    """A folder in an object store whose ranks' local folders count too: what autoresume walks.

    The store is not always the newest: a run whose uploads failed for good, or a preempted one whose upload missed
    the grace period, leaves newer checkpoints in its local folders, and the local folders of different nodes differ.
    :meth:`newest_first` (a collective) chooses the newest sound checkpoint across the store and every rank's local
    folder, the same on every rank (one-file checkpoints: see this module's docstring; sharded ones:
    :mod:`~composer.utils.checkpoint.sharded_mirror`). It gives the names passed over on the way, newest first, whose
    :meth:`open` raises why, then the one chosen, whose :meth:`open` gives this rank's local copy (shared through the
    store first if only some ranks held it). Commits and pruning are the store folder's.

    Args:
        remote (RemoteFolder): The folder in the store, with this node's local folder.
    """

    def __init__(self, remote: RemoteFolder) -> None:
        super().__init__(remote.local_folder, remote.pattern, remote.run_name, remote.keep)
        self.remote = remote
        self._refused: list[tuple[str, str]] = []  # passed over, in the order newest_first gives them
        self._chosen: tuple[str, Path] | None = None
        self._missing: list[Path] = []  # rank 0: its local checkpoints the store lacks, newest first

    @property
    def location(self) -> str:
        return self.remote.location

    def newest_first(self) -> Iterator[str]:
        """A collective: the checkpoints passed over, newest first, then the one chosen (if any)."""
        store, pattern, run_name = self.remote.store, self.pattern, self.run_name
        if self.remote.sharded:
            choice = newest_sharded_checkpoint(store, pattern, run_name)
            self._refused = list(choice.refused)
            self._chosen = None if choice.name is None or choice.path is None else (choice.name, choice.path)
        else:
            resumption = newest_local_or_remote(store, pattern, run_name)
            self._refused, self._missing = list(resumption.refused), resumption.missing
            found = None if resumption.found is None else resumption.found[0]
            self._chosen = None if found is None else (found.relative_to(self.local_folder).as_posix(), found)
        names = [name for name, _ in self._refused]
        yield from names + ([self._chosen[0]] if self._chosen is not None else [])

    def open(self, name: str) -> Path:
        """This rank's copy of the checkpoint chosen; for one passed over, raises why.

        Raises:
            CheckpointError: For a checkpoint passed over, with why as its reason.
        """
        if self._refused and self._refused[0][0] == name:
            _, why = self._refused.pop(0)
            raise CheckpointError(f"autoresume passes over {self.remote.store.url.join(name)}: {why}", reason=why)
        assert self._chosen is not None and self._chosen[0] == name, f"{name} was not chosen"
        return self._chosen[1]

    def catch_up(self) -> None:
        """Rank 0's local checkpoints that the store lacks, newer than the store's newest and not newer than the one
        resumed from, are uploaded in the background, newest first."""
        if self._missing:
            self.remote.upload_missing(self._missing)
            self._missing = []

    def commit(self, path: Path) -> list[Path]:
        return self.remote.commit(path)

    def prune(self, newest: str) -> list[str]:
        return self.remote.prune(newest)
