"""Autoresume of sharded checkpoints from an object store with local mirrors (for
:class:`~composer.utils.checkpoint.mirrored_folder.MirroredFolder`): the newest checkpoint complete across the store and the
ranks' local folders, chosen the same on every rank, made complete in the store, then downloaded by every node.

The store is not always the newest: a run whose uploads failed for good, or a preempted one whose upload missed the
grace period, leaves newer checkpoints in the local folders. And on nodes that share no disk, a sharded
checkpoint's local copies are split: each node's folder holds its own ranks' shards, and rank 0's node also
``composer.pt`` (which lists every file's SHA-256) and DCP's index. So:

1. every rank lists the sharded checkpoints of its local folder and the files each holds; a rank that holds a
   ``composer.pt`` reads it (verified) for that list of files and checksums, and checks DCP's index against it as
   loading does (:mod:`~composer.utils.checkpoint.sharded_index`: a crafted folder is passed over, neither uploaded
   nor loaded). The ranks gather these;
2. rank 0 walks the checkpoints of the store and of every local folder, newest first. One is complete if its
   ``composer.pt`` (in the store, else in a local folder) can be read and every file it lists is in the store with
   its checksum or in some rank's local folder. Rank 0 assigns each file the store lacks to a rank that holds it
   (the rank that wrote it, if it does) and broadcasts that plan;
3. each rank uploads the files assigned to it, each checked against the SHA-256 ``composer.pt`` lists first (a
   damaged copy makes rank 0 pass over the checkpoint to the next one); then the rank that holds ``composer.pt``
   uploads it, last: the existing commit mark, so a folder counts in the store only once it is complete;
4. the first rank of each node downloads what its local folder lacks (each file verified; files already there
   whose bytes match are kept), and every rank loads it.

A checkpoint complete in the store needs no upload (step 3 is empty), and a fresh machine downloads it whole. Only
the chosen checkpoint is uploaded; older local ones that the store lacks are superseded by it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from composer.utils import dist
from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.naming import DCP_INDEX, STATE_FILE, find_checkpoints
from composer.utils.checkpoint.reading import read_checkpoint_file
from composer.utils.checkpoint.remote_folder import UNFINISHED_UPLOAD, RemoteCheckpointFolder, rank_checkpoint_names
from composer.utils.checkpoint.sharded_index import check_layout, read_index

__all__ = ["ShardedChoice", "download_on_every_node", "newest_sharded_checkpoint"]

log = logging.getLogger(__name__)


@dataclass
class ShardedChoice:
    """What autoresume chose, the same on every rank.

    Attributes:
        name (str | None): The checkpoint's folder name under the store folder (and the local folder); None if
            there is none to resume from.
        path (Path | None): This rank's local copy, downloaded and complete.
        refused (list[tuple[str, str]]): The newer checkpoints passed over, each with why.
    """

    name: str | None
    path: Path | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Held:
    """One rank's local copy of a checkpoint: the files it holds, and what its composer.pt says, if it holds one."""

    files: list[str]
    modified: float
    listing: dict[str, str] | None = None  # composer.pt's file -> SHA-256
    weights_only: bool = False
    problem: str | None = None  # why its composer.pt could not be read


@dataclass
class _Plan:
    name: str | None
    listing: dict[str, str] = field(default_factory=dict)
    uploads: dict[str, int] = field(default_factory=dict)  # file the store lacks -> the rank that uploads it
    committer: int | None = None  # the rank that uploads composer.pt last (None: it is in the store)
    refused: list[tuple[str, str]] = field(default_factory=list)
    failure: str | None = None  # why rank 0 could not plan (the store failed)


def newest_sharded_checkpoint(remote: RemoteCheckpointFolder, pattern: str, run_name: str) -> ShardedChoice:
    """The newest sharded checkpoint of ``pattern`` complete across the store and the ranks' local folders, made
    complete in the store and downloaded into every node's local folder (a collective; see the module's docstring).

    Args:
        remote (RemoteCheckpointFolder): The ``save_folder`` in the store, with this node's local folder.
        pattern (str): The checkpoints' folder name pattern (``save_filename``).
        run_name (str): The run's name, for patterns that use ``{run_name}``.

    Returns:
        ShardedChoice: The choice (its ``name`` None if there is none to resume from) and the newer ones refused.

    Raises:
        CheckpointError: On every rank, if the choice could not be uploaded or downloaded (the store failed).
    """
    held = dist.all_gather_object(_local_copies(remote.local_folder, pattern, run_name))
    planner = _Planner(remote, pattern, run_name, held) if dist.get_global_rank() == 0 else None
    while True:
        [plan] = dist.broadcast_object_list([planner.next() if planner is not None else None])
        assert isinstance(plan, _Plan)
        if plan.failure is not None:
            raise CheckpointError(plan.failure, reason="the store could not be read")
        if plan.name is None:
            return ShardedChoice(None, None, plan.refused)
        damaged = _share(remote, plan)
        if damaged is None:
            return ShardedChoice(plan.name, download_on_every_node(remote, plan.name), plan.refused)
        if planner is not None:
            planner.refused.append((plan.name, damaged))


def download_on_every_node(remote: RemoteCheckpointFolder, name: str) -> Path:
    """The sharded checkpoint ``name``, complete in the store, downloaded into each node's local folder by the node's
    first rank (files already there whose bytes match are kept; every file verified); a collective.

    Args:
        remote (RemoteCheckpointFolder): The folder in the store, with this node's local folder.
        name (str): The checkpoint's folder name under it.

    Returns:
        Path: This rank's local copy.

    Raises:
        CheckpointError: On every rank, if a node could not download it.
    """
    problem = None
    if dist.get_local_rank() == 0:
        try:
            remote.download_sharded(name)
        except Exception as e:  # every rank learns it, so that none waits in a collective for ever
            problem = (
                f"rank {dist.get_global_rank()} could not download {remote.url.join(name)}: {type(e).__name__}: {e}"
            )
    problems = [p for p in dist.all_gather_object(problem) if p is not None]
    if problems:
        raise CheckpointError("; ".join(problems), reason="could not be downloaded")
    return remote.local_folder.joinpath(*name.split("/"))


def _local_copies(folder: Path, pattern: str, run_name: str) -> dict[str, _Held]:
    """This rank's local sharded checkpoints (name under ``folder`` -> what it holds of each)."""
    held: dict[str, _Held] = {}
    for path in find_checkpoints(folder, pattern, run_name):
        try:
            if not path.is_dir():
                continue
            files = sorted(p.name for p in path.iterdir() if p.is_file() and not p.is_symlink())
            copy = _Held(files, path.stat().st_mtime)
        except OSError:  # removed meanwhile, or unreadable: not a copy this rank can share
            continue
        if STATE_FILE in files:
            try:
                payload = read_checkpoint_file(path / STATE_FILE)  # its own checksum verified
                if not isinstance(payload.get("metadata"), dict) or "files" not in payload:
                    raise CheckpointError(f"{path / STATE_FILE} is not a sharded checkpoint's.", reason="not sharded")
                check_layout(payload, path)  # plain file names inside the folder, before any is read or uploaded
                if DCP_INDEX in files:
                    read_index(path, payload)  # a crafted index is passed over here, neither uploaded nor loaded
                copy.listing = dict(payload["files"])
                copy.weights_only = bool(payload["metadata"].get("weights_only", False))
            except CheckpointError as e:
                copy.problem = f"{e.reason} (local copy)"
            except OSError as e:
                copy.problem = f"its local copy cannot be read ({type(e).__name__}: {e})"
        held[path.relative_to(folder).as_posix()] = copy
    return held


class _Planner:
    """Rank 0: the checkpoints of the store and of every rank's local folder, newest first, each planned in turn."""

    def __init__(self, remote: RemoteCheckpointFolder, pattern: str, run_name: str, held: list[dict[str, _Held]]):
        self.remote, self.held, self.pattern, self.run_name = remote, held, pattern, run_name
        self.candidates: list[str] | None = None  # listed at the first plan
        self.store: dict[str, float] = {}  # the store's objects, name -> modification time
        self.refused: list[tuple[str, str]] = []

    def next(self) -> _Plan:
        """The plan for the newest candidate not yet tried that is complete across the store and the local folders
        (its ``failure`` says why, if the store could not be read: every rank raises it)."""
        try:
            if self.candidates is None:
                self.candidates = self._candidates()
            while self.candidates:
                name = self.candidates.pop(0)
                try:
                    return self._plan(name)
                except CheckpointError as e:
                    self.refused.append((name, e.reason))
        except Exception as e:  # every rank learns it, so that none waits in a collective for ever
            return _Plan(None, failure=f"autoresume could not read {self.remote.url}: {type(e).__name__}: {e}")
        return _Plan(None, refused=list(self.refused))

    def _candidates(self) -> list[str]:
        """The checkpoints' folders in the store and in the local folders, newest first."""
        self.store = self.remote.listing()
        local = {f"{name}/{file}": c.modified for copies in self.held for name, c in copies.items() for file in c.files}
        folders = {key.rsplit("/", 1)[0] for key in (*self.store, *local) if "/" in key}
        return [n for n in rank_checkpoint_names({**self.store, **local}, self.pattern, self.run_name) if n in folders]

    def _plan(self, name: str) -> _Plan:
        copies = {rank: copies[name] for rank, copies in enumerate(self.held) if name in copies}
        in_store = f"{name}/{STATE_FILE}" in self.store
        if in_store:
            payload = self.remote.sharded_state(name)
            listing, weights_only, committer = dict(payload["files"]), payload["metadata"].get("weights_only"), None
        else:
            sound = [(rank, c) for rank, c in copies.items() if c.listing is not None]
            if not sound:
                problems = [c.problem for c in copies.values() if c.problem is not None]
                raise CheckpointError(name, reason=problems[0] if problems else UNFINISHED_UPLOAD)
            committer, copy = sound[0]
            listing, weights_only = dict(copy.listing or {}), copy.weights_only
        if weights_only:
            raise CheckpointError(
                name, reason="holds only model weights (saved with weights_only), so training cannot resume"
            )
        missing = self.remote.missing_files(name, listing)
        uploads = {}
        for file, problem in missing.items():
            holders = [rank for rank, c in copies.items() if file in c.files]
            if not holders:
                raise CheckpointError(
                    name, reason=f"shard file {file} {problem} in the store, and no local folder holds it"
                )
            uploads[file] = _writer(file, holders)
        return _Plan(name, listing, uploads, committer, list(self.refused))


def _writer(file: str, holders: list[int]) -> int:
    """The rank that uploads ``file``: the one that wrote it (``__<rank>_<n>.distcp``; rank 0 DCP's index), if it
    holds it, else the first that does."""
    match = re.fullmatch(r"__(\d+)_\d+\.distcp", file)
    writer = int(match.group(1)) if match is not None else 0 if file == DCP_INDEX else None
    return writer if writer in holders else holders[0]


def _share(remote: RemoteCheckpointFolder, plan: _Plan) -> str | None:
    """A collective: each rank uploads the files the plan gives it, then the committer ``composer.pt``. Returns why
    the checkpoint cannot be used (a damaged local copy), the same on every rank, or None.

    Raises:
        CheckpointError: On every rank, if the store failed.
    """
    assert plan.name is not None
    rank, name = dist.get_global_rank(), plan.name
    local = remote.local_folder.joinpath(*name.split("/"))
    damaged, failure = None, None
    try:
        for file in sorted(f for f, uploader in plan.uploads.items() if uploader == rank):
            remote.upload(local / file, f"{name}/{file}", expected=plan.listing[file])
    except CheckpointError as e:
        damaged = f"{e.reason} on rank {rank}"
    except Exception as e:  # every rank learns it, so that none waits in a collective for ever
        failure = f"rank {rank}: {type(e).__name__}: {e}"
    outcomes = dist.all_gather_object((damaged, failure))
    if not any(d or f for d, f in outcomes) and plan.committer is not None:
        if rank == plan.committer:
            try:
                remote.upload(local / STATE_FILE, f"{name}/{STATE_FILE}")
                log.info("autoresume: uploaded %s, newer than the store's checkpoints.", local)
            except Exception as e:
                failure = f"rank {rank}: {type(e).__name__}: {e}"
        outcomes = dist.all_gather_object((None, failure))
    failures = [f for _, f in outcomes if f is not None]
    if failures:
        raise CheckpointError(
            f"autoresume chose {remote.url.join(name)}, the newest complete checkpoint, which the ranks' local folders "
            f"hold, and it could not be uploaded for every node: {failures[0]}. The local copies stay; run again once "
            "the store answers.",
            reason="could not be uploaded",
        )
    return next((d for d, _ in outcomes if d is not None), None)
