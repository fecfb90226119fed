"""Every rank's uploads of a run's sharded checkpoints, when one counts in the store, and what an upload that fails
for good does (``on_upload_failure``).

A sharded checkpoint is a folder into which every rank writes its shards; on nodes that share no disk, each node's
local copy holds only its own ranks' files (rank 0's node also DCP's index and ``composer.pt``). So every rank uploads
its own shard files on its own worker thread, and rank 0 commits the checkpoint (DCP's index, then ``composer.pt``,
which makes it count in the store) once every rank has uploaded its shards. The ranks learn that from a report: one
``all_gather`` of what each has uploaded, is still uploading and has committed, and of the first failure since the
last report. It rides on the saves (already collectives for sharded checkpoints) and the end of ``fit``, never on a
step; every rank makes the same decisions from the same reports, so they agree without another collective.

``on_upload_failure``:

* ``'raise'``: a failure on any rank raises :class:`~composer.utils.object_store.UploadError` on every rank at the
  next report; the checkpoint stays in the local folders.
* ``'keep_local'``: the ranks agree that the store is down; rank 0 warns once and training goes on. The checkpoints
  not in the store stay in the local folders, the newest ``keep`` of them (each node's first rank deletes its copy
  of older ones, unless a rank's upload may still read them: none deletes a folder another needs). A report at which
  no rank has an upload running tries the store again: every rank uploads its shards of the kept checkpoints, newest
  first; at the first report after that try at which no failure came and no upload runs, the store answers again:
  rank 0 commits them, newest first, and prunes the store to ``keep``.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from composer.utils import dist
from composer.utils.checkpoint.naming import DCP_INDEX, STATE_FILE, find_checkpoints, shard_files
from composer.utils.checkpoint.uploads import UploadQueue
from composer.utils.object_store.uploader import UploadError

__all__ = ["ShardedUploads"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Report:
    uploaded: frozenset[str]  # the checkpoints whose shards this rank has uploaded
    busy: frozenset[str]  # those its worker may still read (queued or running)
    committed: frozenset[str]  # rank 0: those whose composer.pt is in the store
    failure: str | None  # the first failure since the last report


class ShardedUploads(UploadQueue):
    """One rank's side of the uploads of the sharded checkpoints saved under ``folder`` (named by ``pattern``).

    Every rank makes one, and calls :meth:`submit` after each save, then :meth:`report` (a collective), and
    :meth:`finish` at the end of ``fit`` (see the module's docstring).

    Args:
        remote (RemoteCheckpointFolder): Where they go.
        folder (Path): This node's local folder they are written to.
        pattern (str): Their folder name pattern; ``run_name`` fills its ``{run_name}``.
        run_name (str): The run's name.
        keep (int): How many the store keeps (-1: all); under ``keep_local``, also how many not uploaded stay in
            the local folders while the store is down.
        uploader (BackgroundUploader): This rank's worker thread.
        on_upload_failure (str): ``'raise'`` or ``'keep_local'``.

    The :class:`~composer.utils.checkpoint.RemoteFolder` of sharded checkpoints (a CheckpointSaver's ``s3://``
    ``save_folder``) makes one; ``tests/utils/checkpoint/test_sharded_uploads.py`` shows it on two nodes whose store
    goes down.
    """

    def _init_state(self) -> None:
        self.rank = dist.get_global_rank()
        # The same on every rank: changed only by what every rank does alike (a save, a report).
        self._waiting: list[str] = []  # saved, not yet known complete in the store; oldest first
        self._committing: set[str] = set()  # of those, the ones rank 0 is committing
        self.outage: str | None = None  # keep_local: why the store does not take checkpoints (None while it does)
        self._trying = False  # keep_local: a try of the store is under way, and no failure came since
        # This rank's own, changed by its worker thread too.
        self._uploaded: set[str] = set()
        self._busy: Counter[str] = Counter()
        self._committed: set[str] = set()
        self._failure: str | None = None
        self._skip = False  # keep_local: an upload failed, so the jobs queued behind it skip theirs

    @property
    def waiting(self) -> list[str]:
        """The checkpoints saved and not yet known complete in the store, oldest first (names under ``folder``)."""
        with self._lock:
            return list(self._waiting)

    def submit(self, path: Path) -> None:
        """After a save, on every rank: the checkpoint waits for the store, and this rank's shards of it are queued
        for upload (unless the store is down: the next try takes them).

        Args:
            path (Path): The checkpoint's folder, under ``folder``.
        """
        name = path.relative_to(self.folder).as_posix()
        with self._lock:
            self._waiting = [n for n in self._waiting if n != name] + [name]
        if self.outage is None:
            self._upload_later([name])

    def report(self, *, wait: bool = False, deadline: float | None = None, retry: bool = True) -> None:
        """A collective: every rank says what it has uploaded (``wait``: once its uploads are done, or ``deadline``
        comes), and every rank decides the same from it: rank 0 commits the checkpoints every rank has uploaded;
        under ``keep_local`` the ranks agree whether the store is down, which checkpoints stay and (``retry``)
        whether to try the store again.

        Args:
            wait (bool): Report once this rank's uploads are done (else what is done now).
            deadline (float, optional): With ``wait``: a ``time.monotonic()`` past which it reports anyway.
            retry (bool): Allow a try of the store if it is down.

        Raises:
            UploadError: On every rank, under ``'raise'``, if an upload failed on any rank.
        """
        if not self._waiting:  # the same on every rank: all report, or none
            return
        failure = None
        try:
            if wait and deadline is not None:
                self.uploader.wait_until(deadline)
            elif wait:
                self.uploader.wait()
            else:
                self.uploader.check()
        except UploadError as e:
            failure = f"rank {self.rank}: {e}"
        with self._lock:
            mine = _Report(
                frozenset(self._uploaded), frozenset(self._busy), frozenset(self._committed), self._failure or failure
            )
            self._failure = None
        self._decide(dist.all_gather_object(mine), retry)

    def complete(self, deadline: float) -> bool:
        """Waits for this rank's uploads until ``deadline``; whether every checkpoint saved is complete in the store
        then (as rank 0 knows it; other ranks: whether their own uploads are done).

        Args:
            deadline (float): A ``time.monotonic()``.

        Returns:
            bool: Whether they are complete.

        Raises:
            UploadError: Under ``'raise'``, if an upload of this rank failed.
        """
        done = self.uploader.wait_until(deadline) and self.outage is None
        with self._lock:
            return done and (self.rank != 0 or all(n in self._committed for n in self._waiting))

    def finish(self) -> None:
        """At the end of ``fit``, on every rank: a few reports, each once the uploads are done, until what every rank
        uploaded is committed. Under ``'keep_local'`` with the store down, it is tried once more unless a try failed
        meanwhile (so this waits on a store that is down for about one ``retry_budget``); then rank 0 says which
        checkpoints stay only in the local folders."""
        self.report(wait=True)
        self.report(wait=True, retry=False)  # the commits of what the first report found uploaded everywhere
        self.report(wait=True, retry=False)  # and of what a try of the store uploaded
        self.uploader.wait()
        with self._lock:
            left = [n for n in self._waiting if n not in self._committed]
        if left and self.rank == 0:
            log.warning(
                "The store does not answer yet: the sharded checkpoints %s stay only in the local folders (%s on rank "
                "0's node). The next run with autoresume uploads the newest.",
                ", ".join(left),
                self.folder,
            )

    # ---- the decisions, the same on every rank ------------------------------------------------------------------

    def _decide(self, reports: list[_Report], retry: bool) -> None:
        busy = frozenset().union(*(r.busy for r in reports))
        committed = reports[0].committed
        with self._lock:
            newest = [n for n in self._waiting if n in committed][-1:]
            self._waiting = [n for n in self._waiting if n not in committed]
            self._uploaded -= committed
            self._committed -= committed
        if (
            newest
            and self.rank != 0
            and dist.get_local_rank() == 0
            and not (self._path(newest[0]) / DCP_INDEX).exists()
        ):
            self._drop_local_before(newest[0])  # a node without rank 0's disk: its copies older than the newest go
        # A commit that ended without committing failed; the checkpoint is committed again once the store answers.
        self._committing = {n for n in self._committing if n in reports[0].busy and n not in committed}
        failures = [r.failure for r in reports if r.failure is not None]
        if failures and self.on_upload_failure == "raise":
            with self._lock:
                self._waiting.clear()
            raise UploadError("; ".join(failures))
        if failures:
            self._store_down(failures[0])
        elif self.outage is not None and self._trying and not busy:
            if self.rank == 0:
                log.warning(
                    "The store at %s answers again; the checkpoints kept locally are uploaded.", self.remote.url
                )
            self.outage, self._trying = None, False
        if self.outage is None:
            self._commit_ready(reports)
            self._upload_missing()
            return
        self._keep_newest(busy)
        if retry and not failures and not busy:
            self._try_again()

    def _commit_ready(self, reports: list[_Report]) -> None:
        """Rank 0 commits, newest first, the checkpoints whose shards every rank has uploaded."""
        with self._lock:
            ready = [n for n in self._waiting if n not in self._committing and all(n in r.uploaded for r in reports)]
        if not ready:
            return
        self._committing.update(ready)
        newest_first = ready[::-1]
        if self.rank == 0:
            self._later(
                newest_first,
                lambda: self._commit(newest_first),
                f"Uploading {STATE_FILE} of checkpoint(s) {', '.join(newest_first)} to {self.remote.url}",
            )

    def _upload_missing(self) -> None:
        """This rank's shards of the waiting checkpoints it has not uploaded (saved while the store was down, or
        during a try of it), newest first."""
        with self._lock:
            missing = [
                n
                for n in reversed(self._waiting)
                if n not in self._uploaded and n not in self._busy and n not in self._committing
            ]
        if missing:
            self._upload_later(missing)

    def _store_down(self, failure: str) -> None:
        self.outage, self._trying = failure, False
        if self.rank == 0:
            kept = f"sharded checkpoints not yet uploaded in the local folders ({self.folder} on rank 0's node)"
            self.warn_keeping_local(failure, kept, stacklevel=2)

    def _keep_newest(self, busy: frozenset[str]) -> None:
        """While the store is down: the waiting checkpoints beyond the newest ``keep`` that no rank's upload may
        still read are given up; each node's first rank deletes its copy."""
        if self.keep <= 0:
            return
        with self._lock:
            old = [n for n in self._waiting[: -self.keep] if n not in busy and n not in self._committing]
            self._waiting = [n for n in self._waiting if n not in old]
            self._uploaded -= set(old)
        for name in old if dist.get_local_rank() == 0 else []:
            _remove(self._path(name))
            log.info(
                "Deleted %s, not uploaded (num_checkpoints_to_keep=%d while the store is down).",
                self._path(name),
                self.keep,
            )

    def _try_again(self) -> None:
        """Every rank uploads its shards of the newest ``keep`` waiting checkpoints, newest first."""
        self._trying, self._skip = True, False
        with self._lock:
            kept = self._waiting[-self.keep :] if self.keep > 0 else list(self._waiting)
            mine = [n for n in reversed(kept) if n not in self._uploaded]
        if mine:
            self._upload_later(mine)

    # ---- this rank's worker thread ------------------------------------------------------------------------------

    def _upload_later(self, names: list[str]) -> None:
        self._later(
            names,
            lambda: self._upload(names),
            f"Uploading rank {self.rank}'s shards of checkpoint(s) {', '.join(names)} to {self.remote.url}",
        )

    def _later(self, names: list[str], job: Callable[[], object], what: str) -> None:
        """Queues ``job`` (which reads the checkpoints ``names``); a failure is said at the next report."""
        with self._lock:
            self._busy.update(names)
        try:
            self.uploader.submit(
                job,
                what,
                note=f"They stay in {self.folder}; the store keeps the checkpoints uploaded before.",
            )
        except UploadError as e:  # an earlier upload failed ('raise'): every rank learns it at the next report
            self._done(names)
            with self._lock:
                self._failure = self._failure or f"rank {self.rank}: {e}"

    def _upload(self, names: list[str]) -> None:
        try:
            for name in names:
                if self._skip:
                    return
                path = self._path(name)
                self.remote.upload_files(path, name, [f for f in shard_files(path, self.rank) if f != DCP_INDEX])
                with self._lock:
                    self._uploaded.add(name)
        except Exception as e:
            self._failed(e, f"Uploading rank {self.rank}'s shards of {', '.join(names)}")
        finally:
            self._done(names)

    def _commit(self, newest_first: list[str]) -> None:
        """Rank 0's worker: DCP's index and ``composer.pt`` of each checkpoint, which make it count; then the store
        is pruned to ``keep`` and the local copies older than the newest are deleted."""
        try:
            for name in newest_first:
                if self._skip:
                    return
                self.remote.upload_files(self._path(name), name, [DCP_INDEX, STATE_FILE])
                with self._lock:
                    self._committed.add(name)
                log.info("Uploaded %s to %s", self._path(name), self.remote.url.join(name))
            if self.keep > 0:
                with self._lock:
                    uploading = set(self._waiting) - self._committed
                self.remote.prune(self.pattern, self.keep, newest_first[0], self.run_name, protect=uploading)
            self._drop_local_before(newest_first[0])
        except Exception as e:
            self._failed(e, f"Uploading {STATE_FILE} of {', '.join(newest_first)}")
        finally:
            self._done(newest_first)

    def _failed(self, error: Exception, what: str) -> None:
        if self.on_upload_failure == "raise":
            raise error
        message = f"rank {self.rank}: {what} to {self.remote.url} failed: {type(error).__name__}: {error}"
        with self._lock:
            first, self._skip = self._failure is None, True
            self._failure = self._failure or message
        if first:
            log.warning("%s; keeping the checkpoints locally.", message)

    def _done(self, names: list[str]) -> None:
        with self._lock:
            self._busy.subtract(names)
            self._busy = +self._busy  # drops the names counted down to zero

    def _drop_local_before(self, name: str) -> None:
        """Deletes this node's local checkpoints older than ``name`` (complete in the store now), but those waiting
        (and not yet committed)."""
        with self._lock:
            waiting = {self._path(n) for n in self._waiting if n not in self._committed}
        local = find_checkpoints(self.folder, self.pattern, self.run_name)
        newest = self._path(name)
        for old in local[local.index(newest) + 1 :] if newest in local else []:
            if old not in waiting:
                _remove(old)

    def _path(self, name: str) -> Path:
        return self.folder.joinpath(*name.split("/"))


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
