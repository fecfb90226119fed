"""Rank 0's uploads of a run's one-file checkpoints to the store, and what an upload that fails for good does.

Each checkpoint written locally is handed over (:meth:`CheckpointUploads.submit`) and uploaded on the
:class:`~composer.utils.object_store.BackgroundUploader`'s worker thread; once it is in the store, the store is pruned
to ``keep`` and the local copies older than it are deleted. What a failure for good (after ``retry_budget``) does is
the ``on_upload_failure`` policy:

* ``'raise'``: the failure is raised at the next save or at the end of ``fit`` (the run ends); the checkpoint stays
  in the local folder;
* ``'keep_local'``: training goes on and one warning says so. While the store is down, the checkpoints not uploaded
  stay in the local folder, the newest ``keep`` of them at most (a long outage cannot fill the disk), and each save
  tries the store again if no try is running (so training never waits on a store that is down). Once the store
  answers, they are uploaded newest first, then the store is pruned to ``keep``.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from composer.utils.checkpoint.naming import find_checkpoints
from composer.utils.checkpoint.remote_folder import RemoteCheckpointFolder
from composer.utils.object_store.s3 import ObjectStoreError
from composer.utils.object_store.uploader import BackgroundUploader

__all__ = ["UPLOAD_FAILURE_POLICIES", "CheckpointUploads", "UploadQueue", "check_upload_failure_policy"]

log = logging.getLogger(__name__)

UPLOAD_FAILURE_POLICIES = ("raise", "keep_local")
"""What an upload that fails for good does: ``'raise'`` ends the run; ``'keep_local'`` trains on."""


def check_upload_failure_policy(value: object) -> str:
    """``value`` if it is one of :data:`UPLOAD_FAILURE_POLICIES`.

    Args:
        value (object): The ``on_upload_failure`` argument.

    Returns:
        str: The policy, ``'raise'`` or ``'keep_local'``.

    Raises:
        ValueError: Naming ``on_upload_failure``, the value and the choices.

    Example:
        >>> check_upload_failure_policy("keep_local")
        'keep_local'
        >>> check_upload_failure_policy("keep")
        Traceback (most recent call last):
        ...
        ValueError: on_upload_failure='keep' is not a policy; expected one of ['raise', 'keep_local']: ...
    """
    if value not in UPLOAD_FAILURE_POLICIES:
        raise ValueError(
            f"on_upload_failure={value!r} is not a policy; expected one of {list(UPLOAD_FAILURE_POLICIES)}: 'raise' "
            "ends the run when an upload fails for good, 'keep_local' trains on and keeps the checkpoints locally "
            "until the store answers again."
        )
    return str(value)


class UploadQueue:
    """What the uploads of one-file and of sharded checkpoints both hold: where from and to, and the failure policy.

    A subclass sets up its own bookkeeping in ``_init_state``, which the constructor calls last.

    Args:
        remote (RemoteCheckpointFolder): Where the checkpoints go.
        folder (Path): The local folder they are written to.
        pattern (str): Their name pattern; ``run_name`` fills its ``{run_name}``.
        run_name (str): The run's name.
        keep (int): How many the store keeps (-1: all).
        uploader (BackgroundUploader): The worker thread the uploads run on.
        on_upload_failure (str): ``'raise'`` or ``'keep_local'`` (see :func:`check_upload_failure_policy`).
    """

    def __init__(
        self,
        remote: RemoteCheckpointFolder,
        folder: Path,
        pattern: str,
        run_name: str,
        keep: int,
        uploader: BackgroundUploader,
        on_upload_failure: str = "raise",
    ) -> None:
        self.remote, self.folder, self.pattern, self.run_name, self.keep = remote, folder, pattern, run_name, keep
        self.uploader = uploader
        self.on_upload_failure = check_upload_failure_policy(on_upload_failure)
        self._lock = threading.Lock()
        self._warned = False  # keep_local: the store's failure was warned about (once per run)
        self._init_state()

    def _init_state(self) -> None:
        """Sets up the subclass's own bookkeeping (called last by the constructor)."""

    def warn_keeping_local(self, failure: str, kept: str, stacklevel: int) -> None:
        """Under ``'keep_local'``, warns once per run that the store failed and ``kept`` stay local meanwhile.

        Args:
            failure (str): Why the store does not take checkpoints.
            kept (str): What is kept and where (``"checkpoints not yet uploaded in <folder>"``).
            stacklevel (int): The caller's ``stacklevel`` for :func:`warnings.warn`.
        """
        if self._warned:
            return
        self._warned = True
        at_most = f" (the newest {self.keep} at most)" if self.keep > 0 else ""
        warnings.warn(
            f"{failure}. on_upload_failure='keep_local': training goes on, keeping the {kept}{at_most}; they are "
            "uploaded, newest first, once the store answers again (tried at each save).",
            stacklevel=stacklevel + 1,
        )


class CheckpointUploads(UploadQueue):
    """The uploads of the one-file checkpoints in ``folder`` (named by ``pattern``) to ``remote``.

    Args:
        remote (RemoteCheckpointFolder): Where they go.
        folder (Path): The local folder they are written to.
        pattern (str): Their file name pattern; ``run_name`` fills its ``{run_name}``.
        run_name (str): The run's name.
        keep (int): How many the store keeps (-1: all); under ``keep_local``, also how many not uploaded stay
            locally while the store is down.
        uploader (BackgroundUploader): The worker thread the uploads run on.
        on_upload_failure (str): ``'raise'`` or ``'keep_local'`` (see the module's docstring).

    The :class:`~composer.utils.checkpoint.RemoteFolder` of a CheckpointSaver's ``s3://`` ``save_folder`` makes one;
    ``tests/utils/checkpoint/test_uploads.py`` shows both policies against a store that hangs.
    """

    def _init_state(self) -> None:
        self._waiting: list[
            Path
        ] = []  # local checkpoints not in the store yet (queued, uploading or kept), oldest first
        # keep_local: why the store failed for good (None while it answers); whether a checkpoint was saved (or
        # skipped) since the last try of the store began.
        self.outage: str | None = None
        self._untried = False
        self._in_flight: Path | None = None  # the checkpoint being uploaded now
        self._failed_at = 0.0  # when a try of the store last failed (time.monotonic)

    def submit(self, path: Path) -> None:
        """Queues the upload of ``path`` (waiting while ``max_pending_uploads`` are pending; raising the failure of
        an earlier upload, under ``'raise'``). Under ``'keep_local'`` while the store is down, keeps it locally and
        tries the store again if no try is running."""
        name = self._name(path)
        with self._lock:
            self._waiting.append(path)
        if self.outage is not None:
            self._keep_local()
            return
        try:
            self.uploader.submit(
                lambda: self._upload(path),
                f"Uploading checkpoint {name} to {self.remote.url.join(name)}",
                note=f"The checkpoint stays at {path}; the store keeps the checkpoints uploaded before it.",
            )
        except BaseException:
            with self._lock:
                self._waiting.remove(path)
            raise

    def upload_missing(self, paths: Sequence[Path]) -> None:
        """Uploads in the background local checkpoints that the store lacks (left by a run whose uploads failed),
        newest first and at most ``keep`` of them, then prunes the store; a failure is handled as any upload's."""
        if not paths:
            return
        with self._lock:
            self._waiting.extend(p for p in paths if p not in self._waiting)
        self.uploader.submit(
            self._upload_waiting,
            f"Uploading the local checkpoints that {self.remote.url} lacks ({', '.join(p.name for p in paths)})",
            note=f"They stay in {self.folder}.",
        )

    def finish(self) -> None:
        """At the end of ``fit``: waits for the uploads (raising a failure under ``'raise'``). Under ``'keep_local'``
        with the store down, tries it once more for the checkpoints saved while a try was running (unless a try
        failed meanwhile), then says which stay only locally."""
        began = time.monotonic()
        self.uploader.wait()
        # keep_local: checkpoints saved (or skipped) since the last try of the store began; tried once more unless a
        # try failed during this wait (the training thread waits on a store that is down for one budget at most).
        if self._untried and not self._failed_at > began:
            self._try_again()
            self.uploader.wait()
        if self.outage is not None:
            self._warn()
            with self._lock:
                left = ", ".join(sorted(p.name for p in self._waiting))
            log.warning(
                "The store does not answer yet: %s stay only in %s. The next run with autoresume on this machine "
                "uploads them.",
                left,
                self.folder,
            )

    # ---- on the worker thread ------------------------------------------------------------------------------------

    def _upload(self, path: Path) -> None:
        """Uploads ``path``, then prunes the store and the local copies older than it."""
        if self.outage is not None:
            self._untried = True  # keep_local: the store is down; the next try uploads it
            return
        try:
            if not self._upload_one(path):
                return
            with self._lock:
                self._waiting = [p for p in self._waiting if p != path]
            self._prune_after(path)
        except ObjectStoreError as e:
            self._failed(e)

    def _upload_waiting(self) -> None:
        """Uploads the checkpoints waiting for the store, newest first (at most ``keep``: the older ones would be
        pruned), then prunes the store and the local copies; again while checkpoints were saved meanwhile. The first
        failure stops it: the store is down."""
        while True:
            with self._lock:
                waiting, self._untried = set(self._waiting), False
            newest_first = [p for p in find_checkpoints(self.folder, self.pattern, self.run_name) if p in waiting]
            newest_first = newest_first[: self.keep] if self.keep > 0 else newest_first
            try:
                for path in newest_first:
                    self._upload_one(path)
            except ObjectStoreError as e:
                self._failed(e)
                return
            if self.outage is not None:
                log.warning(
                    "The store at %s answers again; the checkpoints kept locally are uploaded.", self.remote.url
                )
            with self._lock:
                self.outage = None
                self._waiting = [p for p in self._waiting if p not in waiting]  # uploaded, or older than those
                again = self._untried
            if newest_first:
                self._prune_after(newest_first[0])
            if not again:
                return

    def _upload_one(self, path: Path) -> bool:
        """Uploads ``path`` unless it was dropped meanwhile (over ``keep`` while the store was down); whether it did."""
        with self._lock:
            if path not in self._waiting:
                return False
            self._in_flight = path
        try:
            self.remote.upload(path, self._name(path))
        finally:
            self._in_flight = None
        log.info("Uploaded %s to %s", path, self.remote.url.join(self._name(path)))
        return True

    def _prune_after(self, path: Path) -> None:
        """Once ``path`` is in the store: prunes the store, then drops the local copies older than it."""
        with self._lock:
            waiting = set(self._waiting)
        if self.keep > 0:
            self.remote.prune(self.pattern, self.keep, self._name(path), self.run_name)
        # Locally, this checkpoint (now the newest in the store) stays, and so does every newer file: those waiting
        # for their upload, and one the training thread may be renaming into place right now.
        local = find_checkpoints(self.folder, self.pattern, self.run_name)
        for old in local[local.index(path) + 1 :] if path in local else []:
            if old not in waiting:
                old.unlink(missing_ok=True)

    def _failed(self, error: ObjectStoreError) -> None:
        """``'raise'``: the failure ends the run (raised where the uploader's caller looks); ``'keep_local'``: the
        store is down."""
        if self.on_upload_failure == "raise":
            raise error
        if self.outage is None:
            log.warning("The store does not take checkpoints (%s); keeping them locally.", error)
        self.outage, self._failed_at = str(error), time.monotonic()

    # ---- keep_local, on the training thread ------------------------------------------------------------------------

    def _keep_local(self) -> None:
        """While the store is down: warns once, deletes the oldest local checkpoints not uploaded beyond ``keep``,
        and tries the store again if no upload is pending (training never waits on a store that is down)."""
        self._warn()
        with self._lock:
            waiting = set(self._waiting)
            newest_first = [p for p in find_checkpoints(self.folder, self.pattern, self.run_name) if p in waiting]
            for old in newest_first[self.keep :] if self.keep > 0 else []:
                if old == self._in_flight:
                    continue
                self._waiting.remove(old)
                old.unlink(missing_ok=True)
                log.info(
                    "Deleted %s, not uploaded (num_checkpoints_to_keep=%d while the store is down).", old, self.keep
                )
        self._try_again()

    def _try_again(self) -> None:
        if self.uploader.pending > 0:
            self._untried = True
            return
        self.uploader.submit(self._upload_waiting, f"Uploading the checkpoints waiting for {self.remote.url}")

    def _warn(self) -> None:
        if self.outage is not None:
            self.warn_keeping_local(self.outage, f"checkpoints not yet uploaded in {self.folder}", stacklevel=5)

    def _name(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()
