"""The folders that hold a run's checkpoints, behind one interface: a local folder, and a folder in an object store.

A :class:`CheckpointFolder` holds the checkpoints of one name pattern (``save_filename``) of one run:

* :meth:`~CheckpointFolder.newest_first`: their names (relative to the folder), newest first, by the training in
  their names (see :func:`~composer.utils.checkpoint.find_checkpoints`);
* :meth:`~CheckpointFolder.open`: a local path to read one from (one in a store is downloaded and verified first);
* :meth:`~CheckpointFolder.commit`: a checkpoint just written under :attr:`~CheckpointFolder.local_folder` counts:
  a local folder points its 'latest' link at it and prunes; a store uploads it in the background, then prunes;
* :meth:`~CheckpointFolder.prune`: deletes all but the newest ``keep``.

A saver writes into ``local_folder`` and commits, the same wherever the folder lives; a loader walks
``newest_first()`` and opens the first that reads back. The cases: :class:`LocalFolder`, :class:`RemoteFolder`, and
:class:`~composer.utils.checkpoint.mirrored_folder.MirroredFolder` (a store whose ranks' local folders count too:
what autoresume walks, since a run's newest checkpoints may be only local after uploads that failed).
"""

from __future__ import annotations

import abc
import logging
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from composer.utils import dist
from composer.utils.checkpoint.local_io import link_latest
from composer.utils.checkpoint.naming import find_checkpoints, format_checkpoint_name, prune_checkpoints
from composer.utils.checkpoint.remote_folder import RemoteCheckpointFolder
from composer.utils.checkpoint.sharded_uploads import ShardedUploads
from composer.utils.checkpoint.uploads import CheckpointUploads, check_upload_failure_policy
from composer.utils.object_store import BackgroundUploader

__all__ = ["CheckpointFolder", "LocalFolder", "RemoteFolder"]

log = logging.getLogger(__name__)


class CheckpointFolder(abc.ABC):
    """The checkpoints of one name pattern of a run, wherever they are (see the module's docstring).

    Args:
        local_folder (str | Path): Where checkpoints are written before they are committed, and read from.
        pattern (str): Their name pattern (``save_filename``; it may contain ``/``).
        run_name (str): The run's name, for patterns that use ``{run_name}``.
        keep (int): How many :meth:`prune` keeps (-1: all).
    """

    def __init__(self, local_folder: str | Path, pattern: str, run_name: str = "", keep: int = -1) -> None:
        self.local_folder = Path(local_folder)
        self.pattern, self.run_name, self.keep = pattern, run_name, keep

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the folder lives, for messages (a path, or an ``s3://`` URL)."""

    @abc.abstractmethod
    def newest_first(self) -> Iterable[str]:
        """The names of the checkpoints (relative to the folder), newest first."""

    @abc.abstractmethod
    def open(self, name: str) -> Path:
        """A local path to read the checkpoint ``name`` from.

        Raises:
            CheckpointError: If it cannot be had whole (a store's copy that does not match its checksum, say).
        """

    @abc.abstractmethod
    def commit(self, path: Path) -> list[Path]:
        """Makes the checkpoint just written at ``path`` (under :attr:`local_folder`) count; every rank calls it.

        Returns:
            list[Path]: The local checkpoints deleted meanwhile (pruned).
        """

    @abc.abstractmethod
    def prune(self, newest: str) -> list[str]:
        """Deletes the checkpoints all but the newest ``keep``, ``newest`` (just committed) always kept; returns the
        names deleted."""

    def prepare(self) -> None:
        """Before the first save (rank 0): clears what an interrupted run left where it would get in the way."""
        return None

    def catch_up(self) -> None:
        """Once a run resumed from one of its checkpoints: commits what an interrupted run left uncommitted."""
        return None

    @property
    def outage(self) -> str | None:
        """Why the folder does not take checkpoints now (a store that is down, under ``'keep_local'``), else None."""
        return None

    def flush(self, deadline: float) -> bool:
        """Waits until ``time.monotonic()`` reaches ``deadline`` at the latest for the commits under way; whether
        every checkpoint committed counts by then (what does not is left locally)."""
        del deadline
        return True

    def finish(self) -> None:
        """At the end of ``fit``: waits for the commits under way (raising why one failed)."""
        return None

    def wait(self) -> None:
        """Waits for the commits under way (raising why one failed)."""
        return None

    def close(self) -> None:
        """Stops what runs in the background."""
        return None

    def local_path(self, name: str) -> Path:
        """The local path of the checkpoint ``name``."""
        return self.local_folder.joinpath(*name.split("/"))


class LocalFolder(CheckpointFolder):
    """A folder on a disk of this machine, with an optional 'latest' link to the newest checkpoint.

    Args:
        local_folder (str | Path): The folder.
        pattern (str): The checkpoints' name pattern.
        run_name (str): The run's name.
        keep (int): How many checkpoints a commit keeps (-1: all).
        latest_filename (str, optional): The name of the link to the newest checkpoint (``{run_name}``, ``{rank}``).

    Example:
        >>> import tempfile
        >>> folder = LocalFolder(tempfile.mkdtemp(), "ep{epoch}-ba{batch}.pt", keep=1)
        >>> for name in ["ep0-ba2.pt", "ep0-ba4.pt"]:
        ...     _ = (folder.local_folder / name).write_text("")
        >>> folder.newest_first()
        ['ep0-ba4.pt', 'ep0-ba2.pt']
        >>> [p.name for p in folder.commit(folder.local_folder / "ep0-ba4.pt")]
        ['ep0-ba2.pt']
    """

    def __init__(
        self,
        local_folder: str | Path,
        pattern: str,
        run_name: str = "",
        keep: int = -1,
        latest_filename: str | None = None,
    ) -> None:
        super().__init__(local_folder, pattern, run_name, keep)
        self.latest_filename = latest_filename

    @property
    def location(self) -> str:
        return str(self.local_folder)

    def newest_first(self) -> list[str]:
        found = find_checkpoints(self.local_folder, self.pattern, self.run_name)
        return [path.relative_to(self.local_folder).as_posix() for path in found]

    def open(self, name: str) -> Path:
        return self.local_path(name)

    def commit(self, path: Path) -> list[Path]:
        """Rank 0 points the 'latest' link at ``path``, then deletes the oldest checkpoints beyond ``keep``."""
        if dist.get_global_rank() != 0:
            return []
        protect: list[Path] = []
        if self.latest_filename is not None:
            link = self.local_folder / format_checkpoint_name(self.latest_filename, run_name=self.run_name)
            try:
                link_latest(link, path)
            except OSError as e:
                warnings.warn(f"Could not point {link} at {path} ({e}); the checkpoint itself is saved.", stacklevel=3)
                if link.is_symlink():
                    protect.append(link)  # the file it still names stays, so that it does not dangle
        if self.keep <= 0:
            return []
        # From the folder, not from a list of what was saved: a run killed after its rename and before this step
        # left a checkpoint that no list names, and this is where it goes.
        return [self.local_path(name) for name in self.prune(path.relative_to(self.local_folder).as_posix(), protect)]

    def prune(self, newest: str, protect: Sequence[Path] = ()) -> list[str]:
        """Deletes all but the newest ``keep`` checkpoints; ``protect``: files never to delete."""
        deleted = prune_checkpoints(
            self.local_folder, self.pattern, self.keep, self.local_path(newest), run_name=self.run_name, protect=protect
        )
        for old in deleted:
            log.info("Deleted %s (num_checkpoints_to_keep=%d).", old, self.keep)
        return [old.relative_to(self.local_folder).as_posix() for old in deleted]


class RemoteFolder(CheckpointFolder):
    """A folder in an object store: checkpoints are written into a local folder, then uploaded in the background by
    a worker thread, and the store keeps the newest ``keep``.

    An upload that fails for good (after ``retry_budget`` seconds of retries) raises
    :class:`~composer.utils.object_store.UploadError` at the next commit or at :meth:`finish`, or with
    ``on_upload_failure='keep_local'`` training goes on (see :mod:`~composer.utils.checkpoint.uploads` and, for
    sharded checkpoints, which every rank uploads its shards of, :mod:`~composer.utils.checkpoint.sharded_uploads`).

    Args:
        store (RemoteCheckpointFolder): The folder in the store.
        local_folder (str | Path): Where checkpoints are written first (and downloaded to).
        pattern (str): The checkpoints' name pattern.
        run_name (str): The run's name.
        keep (int): How many the store keeps (-1: all).
        sharded (bool): Whether the checkpoints are sharded (folders of every rank's shards).
        on_upload_failure (str): ``'raise'`` or ``'keep_local'``.
    """

    def __init__(
        self,
        store: RemoteCheckpointFolder,
        local_folder: str | Path,
        pattern: str,
        run_name: str = "",
        keep: int = -1,
        *,
        sharded: bool = False,
        on_upload_failure: str = "raise",
    ) -> None:
        super().__init__(local_folder, pattern, run_name, keep)
        self.store = store
        self.sharded = sharded
        self.on_upload_failure = check_upload_failure_policy(on_upload_failure)
        self._uploader: BackgroundUploader | None = None
        self._uploads: CheckpointUploads | None = None  # one-file checkpoints' uploads, made at the first
        self._sharded_uploads: ShardedUploads | None = None  # sharded checkpoints' (every rank's), made at the first

    @property
    def location(self) -> str:
        return str(self.store.url)

    def newest_first(self) -> list[str]:
        return self.store.newest_first(self.pattern, self.run_name)

    def open(self, name: str) -> Path:
        return self.store.download_sharded(name) if self.sharded else self.store.download(name)

    def commit(self, path: Path) -> list[Path]:
        """Queues the upload of ``path``: rank 0's for a one-file checkpoint; every rank its own shards of a sharded
        one, then a report of what every rank has uploaded (a collective) commits the complete ones."""
        if self.sharded:
            uploads = self._shard_uploads()
            uploads.submit(path)  # this rank's shards, in the background
            uploads.report()  # a collective: what every rank has uploaded counts now (and, keep_local, what stays)
        elif dist.get_global_rank() == 0:
            self._one_file_uploads().submit(path)
        return []

    def prune(self, newest: str) -> list[str]:
        return self.store.prune(self.pattern, self.keep, newest, self.run_name)

    def prepare(self) -> None:
        self.store.clean_up_unfinished_uploads()

    def upload_missing(self, paths: list[Path]) -> None:
        """Uploads in the background the local checkpoints ``paths`` that the store lacks (left by a run whose
        uploads failed), newest first, then prunes the store. Rank 0's call."""
        if paths:
            self._one_file_uploads().upload_missing(paths)

    @property
    def outage(self) -> str | None:
        uploads = self._uploads if self._uploads is not None else self._sharded_uploads
        return uploads.outage if uploads is not None else None

    def flush(self, deadline: float) -> bool:
        """Every rank calls it. At the deadline the uploads still running are cancelled (a multipart upload is
        aborted: the process's exit would wait for it) and :meth:`close` no longer waits for them."""
        if self._uploader is None:
            return True
        if self._sharded_uploads is not None:  # a collective: what every rank has uploaded by the deadline counts now
            self._sharded_uploads.report(wait=True, deadline=deadline)
            done = self._sharded_uploads.complete(deadline)
        else:
            done = self._uploader.wait_until(deadline) and self.outage is None
        if not done:  # the process is about to end: stop the uploads in flight, which its exit would wait for
            self.store.store.cancel_uploads()
            self._uploader = None
        return done

    def finish(self) -> None:
        if self._sharded_uploads is not None:
            self._sharded_uploads.finish()  # a collective: what every rank uploaded is committed
        if self._uploads is not None:
            self._uploads.finish()  # under keep_local with the store down: says which stay only locally
        elif self._uploader is not None:
            self._uploader.wait()

    def wait(self) -> None:
        if self._uploader is not None:
            self._uploader.wait()

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.close()

    def _one_file_uploads(self) -> CheckpointUploads:
        if self._uploads is None:
            self._uploads = CheckpointUploads(self.store, self.local_folder, *self._upload_arguments())
        return self._uploads

    def _shard_uploads(self) -> ShardedUploads:
        if self._sharded_uploads is None:
            self._sharded_uploads = ShardedUploads(self.store, self.local_folder, *self._upload_arguments())
        return self._sharded_uploads

    def _upload_arguments(self) -> tuple[str, str, int, BackgroundUploader, str]:
        """What both kinds of uploads are made with; the background uploader is made at the first."""
        if self._uploader is None:
            self._uploader = BackgroundUploader(
                self.store.store.options.max_pending_uploads, name="composer-checkpoint"
            )
        return self.pattern, self.run_name, self.keep, self._uploader, self.on_upload_failure
