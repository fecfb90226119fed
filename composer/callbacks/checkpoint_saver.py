"""Saves checkpoints during training: when, under which name, how many to keep, and the 'latest' link."""

from __future__ import annotations

import inspect
import logging
import math
import shutil
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from composer.callbacks.nan_monitor import DeferredNaNMonitor
from composer.core.callback import Callback
from composer.core.event import Event
from composer.core.hparams import Hparams, hparams
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.utils import dist
from composer.utils.checkpoint import (
    find_checkpoints,
    format_checkpoint_name,
    link_latest,
    prune_checkpoints,
    remove_stale_temporary_files,
    save_checkpoint,
)
from composer.utils.checkpoint.naming import refuse_folders_named_like_checkpoints
from composer.utils.checkpoint.sharded import DCP_INDEX, STATE_FILE, shard_files
from composer.utils.object_store import (
    BackgroundUploader,
    CheckpointUploads,
    RemoteCheckpointFolder,
    UploadError,
    check_upload_failure_policy,
)

__all__ = ["CheckpointSaver", "CheckpointSaverHparams"]

log = logging.getLogger(__name__)

SaveInterval = str | Time[Any] | int | Callable[..., bool]


class CheckpointSaver(Callback):
    """Saves the training state at an interval, atomically, keeping the newest ``num_checkpoints_to_keep``.

    A checkpoint is written at ``BATCH_CHECKPOINT`` or ``EPOCH_CHECKPOINT`` when the interval says so, and once
    more at the last ``EPOCH_CHECKPOINT`` of the run (at its last ``BATCH_CHECKPOINT`` when the run stops in the
    middle of an epoch, which stays open: ``State.fit_ends_mid_epoch``), so the final state is always saved; never
    twice after the same
    batch (a batch interval that saved an epoch's last batch is not followed by a save of the same weights when the
    epoch ends). Each file is written by
    :func:`composer.utils.checkpoint.save_checkpoint` (temporary file, fsync, rename; with a checksum); then the
    ``latest`` link is pointed at it, and the oldest checkpoints beyond ``num_checkpoints_to_keep`` are deleted (found
    in the folder by this saver's file name pattern, so a run killed between the two steps leaves nothing for ever:
    the next save deletes it; see :func:`~composer.utils.checkpoint.prune_checkpoints`). The
    state is replicated across processes, so only rank 0 writes. The Trainer adds one of these for you when given
    ``save_folder``.

    With ``remote`` (the Trainer passes one for an ``s3://`` ``save_folder``), ``folder`` is where each checkpoint is
    written first, exactly as above; a worker thread then uploads it (with its SHA-256 as object metadata) and,
    once the upload is complete, deletes the oldest objects beyond ``num_checkpoints_to_keep`` from the store (read
    from the store's listing, so what a run killed before its pruning left goes then) and the local copies older
    than it. Training waits only when ``max_pending_uploads`` checkpoints are already waiting. An upload that fails
    for good (after ``retry_budget`` seconds of retries) raises :class:`~composer.utils.object_store.UploadError`,
    naming the object and the cause, at the next save or at the end of ``fit`` (``close`` logs it); its local file,
    and the newest checkpoint uploaded before it, stay in ``folder``. With ``on_upload_failure='keep_local'``,
    training goes on instead (see :mod:`~composer.utils.object_store.checkpoint_uploads`). No 'latest' link is made
    in the store.

    Args:
        folder (str): Where checkpoints go; ``{run_name}`` is filled in. Default: ``'checkpoints'``.
        filename (str): The file name pattern (it may contain ``/``), over ``{run_name}``, ``{rank}``, ``{epoch}``,
            ``{batch}``, ``{sample}``, ``{token}`` and their ``*_in_epoch`` forms. A ``.safetensors`` name saves the
            weights in that format (with ``weights_only``). Default: ``'ep{epoch}-ba{batch}-rank{rank}.pt'``.
        latest_filename (str | None): The name of the symbolic link to the newest checkpoint (``{run_name}`` and
            ``{rank}`` allowed); None for no link. Default: ``'latest-rank{rank}.pt'``.
        save_interval (str | Time | int | Callable): ``'1ep'``, ``'500ba'``, ``'10000sp'``, ``'0.25dur'``, an int
            (epochs), or a function ``(state) -> bool`` or ``(state, event) -> bool`` asked at both checkpoint
            events. Default: ``'1ep'``.
        num_checkpoints_to_keep (int): Keep the newest this many checkpoints of this file name pattern in the folder
            (the one just written always among them); -1 keeps them all. Files of other names are never deleted.
            Keeping N needs room for N+1 on the disk: each new checkpoint is written before the oldest is deleted
            (a save that does not fit raises :class:`~composer.utils.checkpoint.DiskFullError`, and loses nothing).
        overwrite (bool): Allow saving into a folder that already holds checkpoints of this pattern (needed to
            continue a run; the Trainer sets it with ``autoresume``).
        weights_only (bool): Save only the model's weights (such checkpoints cannot resume training).
        run_name (str, optional): The run's name, for ``{run_name}``.
        metadata (Mapping, optional): The run's config (plain values), stored in every checkpoint.
        check_finite (bool): Refuse to write weights that hold a NaN or an infinity (raising
            :class:`~composer.utils.checkpoint.NonFiniteWeightsError`, which names the weight). Whatever it is set
            to, a :class:`~composer.callbacks.nan_monitor.DeferredNaNMonitor` in the run (the Trainer's default)
            checks the losses since its last check before every write, and raises if one was not finite.
        remote (RemoteCheckpointFolder, optional): Upload every checkpoint to this folder of an object store, in
            the background (see above).
        sharded (bool): Write sharded checkpoints (a model sharded with FSDP): each checkpoint is a folder into
            which every rank writes its own shards (:mod:`composer.utils.checkpoint.sharded`); ``filename`` then
            names the folder. The Trainer sets it from ``fsdp_config``'s ``state_dict_type``.
        on_upload_failure (str): With ``remote``, what an upload that fails for good does: ``'raise'`` ends the run;
            ``'keep_local'`` warns once and trains on, keeping the newest ``num_checkpoints_to_keep`` checkpoints
            not uploaded locally until the store answers again (one-file checkpoints only).

    Attributes:
        folder_path (Path | None): The folder, once known (at ``INIT``), with ``{run_name}`` filled in.
        saved_checkpoints (list[Path]): The checkpoints this saver wrote that still exist, oldest first.

    Example:
        >>> import tempfile
        >>> from composer import Trainer
        >>> saver = CheckpointSaver(folder=tempfile.mkdtemp(), save_interval="2ba", num_checkpoints_to_keep=1)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   callbacks=[saver], progress_bar=False)
        >>> trainer.fit()
        >>> [p.name for p in saver.saved_checkpoints]
        ['ep0-ba4-rank0.pt']
        >>> trainer.close()
    """

    def __init__(
        self,
        folder: str = "checkpoints",
        filename: str = "ep{epoch}-ba{batch}-rank{rank}.pt",
        latest_filename: str | None = "latest-rank{rank}.pt",
        save_interval: SaveInterval = "1ep",
        num_checkpoints_to_keep: int = -1,
        overwrite: bool = False,
        weights_only: bool = False,
        run_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        check_finite: bool = True,
        remote: RemoteCheckpointFolder | None = None,
        sharded: bool = False,
        on_upload_failure: str = "raise",
    ) -> None:
        if "{run_name}" in folder + filename + (latest_filename or "") and run_name is None:
            raise ValueError(
                f"The checkpoint folder {folder!r} or file name {filename!r} uses {{run_name}} but run_name is None; "
                "pass run_name= (the Trainer passes its own), or drop {run_name} from the pattern."
            )
        for pattern in (folder, filename, latest_filename or ""):
            format_checkpoint_name(pattern)  # raises on unknown fields
        if not isinstance(num_checkpoints_to_keep, int) or num_checkpoints_to_keep == 0 or num_checkpoints_to_keep < -1:
            raise ValueError(
                f"num_checkpoints_to_keep={num_checkpoints_to_keep!r} must be a positive number of checkpoints, or -1 "
                "to keep them all."
            )
        self.folder = folder
        self.filename = filename
        self.latest_filename = latest_filename
        self.num_checkpoints_to_keep = num_checkpoints_to_keep
        self.overwrite = overwrite
        self.weights_only = weights_only
        self.run_name = run_name or ""
        self.metadata = dict(metadata or {})
        self.check_finite = check_finite
        self.sharded = sharded
        self.remote = remote
        self.on_upload_failure = check_upload_failure_policy(on_upload_failure)
        if on_upload_failure == "keep_local" and sharded:
            raise ValueError(
                "on_upload_failure='keep_local' does not support sharded checkpoints yet (fsdp_config's "
                "state_dict_type='sharded'); use on_upload_failure='raise'."
            )
        self._uploader: BackgroundUploader | None = None
        self._uploads: CheckpointUploads | None = None  # one-file checkpoints' uploads, made at the first
        self._uploading_lock = threading.Lock()
        # Sharded: checkpoints saved and not yet counted in the store (local path, name), oldest first; and the names
        # of those whose shards this rank has uploaded (added by the worker thread).
        self._awaiting_commit: list[tuple[Path, str]] = []
        self._shards_uploaded: set[str] = set()
        self.folder_path: Path | None = None
        self.saved_checkpoints: list[Path] = []
        self._interval_function, self._interval = _parse_interval(save_interval)
        # The batch count of the last save. Not (epoch, batch): at an epoch's end the epoch count moves on while the
        # weights stay those of its last batch, which a batch interval may have saved already.
        self._last_saved: int | None = None
        self._bucket: int | None = None  # for sample, token and duration intervals: which multiple we are past

    # ---- events ------------------------------------------------------------------------------------------------

    def init(self, state: State, logger: Logger) -> None:
        del logger
        folder = self._folder()
        if state.rank != 0:
            return
        for path in remove_stale_temporary_files(folder):
            log.info("Removed %s, left by a save that was interrupted.", path)
        if not self.sharded:
            refuse_folders_named_like_checkpoints(folder, self.filename, self.run_name)  # saving over one would fail
        if self.remote is not None:
            self.remote.clean_up_unfinished_uploads()
        if self.overwrite:
            return
        if self.remote is not None:
            where, existing = str(self.remote.url), self.remote.newest_first(self.filename, self.run_name)
        else:
            where, existing = str(folder), [p.name for p in find_checkpoints(folder, self.filename, self.run_name)]
        if existing:
            raise ValueError(
                f"The checkpoint folder {where} already holds checkpoints of this run's pattern "
                f"{self.filename!r} (newest: {existing[0]}). To continue that run, pass autoresume=True to the "
                "Trainer; to write over them, save_overwrite=True (CheckpointSaver: overwrite=True); otherwise "
                "choose another run_name or save_folder."
            )

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        if self._interval is not None and self._interval.unit not in (TimeUnit.EPOCH, TimeUnit.BATCH):
            self._bucket = self._bucket_of(state, self._interval)

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        if self._due(state, Event.BATCH_CHECKPOINT):
            self.save(state)

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        if self._due(state, Event.EPOCH_CHECKPOINT):
            self.save(state)

    # ---- saving ------------------------------------------------------------------------------------------------

    def save(self, state: State) -> Path | None:
        """Saves a checkpoint now, updates the 'latest' link and deletes the oldest beyond the limit.

        Launched on several processes, every rank calls it: rank 0 writes the file and handles the link and the
        old files, the others contribute their random states and wait until the file is in place.

        Returns:
            Path | None: The file written (None on ranks other than 0, which write nothing).

        Raises:
            NonFiniteLossError: If a DeferredNaNMonitor in the run finds that a loss since its last check was NaN
                or infinite; nothing is written.
            NonFiniteWeightsError: With ``check_finite``, if a weight holds a NaN or an infinity; nothing is written.
        """
        for callback in state.callbacks:
            if isinstance(callback, DeferredNaNMonitor):
                callback.check(state)  # a loss that went non-finite since its last check stops the run here
        folder = self._folder()
        path = folder / format_checkpoint_name(self.filename, state, run_name=self.run_name)
        if self.remote is not None and self.sharded:
            self._commit_sharded_uploads(state, wait=False)  # a collective: what every rank has uploaded counts now
        previous = (self._last_saved, list(self.saved_checkpoints))
        # Recorded before saving, so that the checkpoint lists itself and not the files about to be deleted: a run
        # resumed from it prunes exactly what this one would have.
        self._last_saved = state.timer.batch.value
        kept = [p for p in self.saved_checkpoints if p != path] + [path]
        keep = self.num_checkpoints_to_keep
        stale = kept[:-keep] if keep > 0 else []
        self.saved_checkpoints = kept[len(stale) :]
        try:
            save_checkpoint(
                state,
                path,
                weights_only=self.weights_only,
                metadata=self.metadata,
                check_finite=self.check_finite,
                sharded=self.sharded,
            )
        except BaseException:
            self._last_saved, self.saved_checkpoints = previous
            raise
        if self.remote is not None and self.sharded:
            self._upload_shards_later(path, folder, state.rank)
        if state.rank != 0:
            return None
        log.info("Saved checkpoint %s", path)
        if self.remote is not None and self.sharded:
            return path
        if self.remote is not None:
            self._upload_later(path, folder)
            return path
        protect: list[Path] = []
        if self.latest_filename is not None:
            link = folder / format_checkpoint_name(self.latest_filename, run_name=self.run_name)
            try:
                link_latest(link, path)
            except OSError as e:
                warnings.warn(f"Could not point {link} at {path} ({e}); the checkpoint itself is saved.", stacklevel=2)
                if link.is_symlink():
                    protect.append(link)  # the file it still names stays, so that it does not dangle
        if keep > 0:  # only once the new checkpoint is safely on disk
            # From the folder, not from the list this saver keeps: a run killed after its rename and before this
            # step left a checkpoint that no list names, and this is where it goes.
            for old in prune_checkpoints(folder, self.filename, keep, path, run_name=self.run_name, protect=protect):
                log.info("Deleted %s (num_checkpoints_to_keep=%d).", old, keep)
            self.saved_checkpoints = [p for p in self.saved_checkpoints if p == path or p.exists()]
        return path

    def save_now(self, state: State, deadline: float) -> bool:
        """For a job told to stop (:mod:`composer.trainer.preemption`): saves this batch's checkpoint, unless one was
        saved at this batch, then waits for the uploads until ``time.monotonic()`` reaches ``deadline`` at the latest.

        Every rank calls it. At the deadline the uploads still running are cancelled (a multipart upload is aborted:
        the process's exit would wait for it) and :meth:`close` no longer waits for them: the checkpoint stays in the
        local folder.

        Returns:
            bool: Whether the checkpoint is complete in the store (as this rank knows; True without a store).

        Raises:
            UploadError: If an upload failed for good.
        """
        if self._last_saved != state.timer.batch.value:
            self.save(state)
        if self.remote is None or self._uploader is None:
            return True
        if self.sharded:  # a collective: what every rank has uploaded by the deadline counts now
            self._commit_sharded_uploads(state, wait=True, deadline=deadline)
        done = self._uploader.wait_until(deadline) and not self._awaiting_commit and self.store_outage is None
        if not done:  # the process is about to end: stop the uploads in flight, which its exit would wait for
            self.remote.store.cancel_uploads()
            self._uploader = None
        return done

    @property
    def store_outage(self) -> str | None:
        """Under ``on_upload_failure='keep_local'``, why the store does not take checkpoints now (None while it does)."""
        return self._uploads.outage if self._uploads is not None else None

    # ---- uploading ---------------------------------------------------------------------------------------------

    def _upload_later(self, path: Path, folder: Path) -> None:
        """Queues the upload of ``path`` (see :class:`~composer.utils.object_store.CheckpointUploads`)."""
        self._one_file_uploads(folder).submit(path)

    def upload_missing(self, paths: list[Path]) -> None:
        """Uploads in the background the local checkpoints ``paths`` that the store lacks (autoresume found them,
        left by a run whose uploads failed), newest first, then prunes the store. Rank 0's call."""
        if self.remote is not None and paths:
            self._one_file_uploads(self._folder()).upload_missing(paths)

    def _one_file_uploads(self, folder: Path) -> CheckpointUploads:
        assert self.remote is not None
        if self._uploader is None:
            self._uploader = BackgroundUploader(
                self.remote.store.options.max_pending_uploads, name="composer-checkpoint"
            )
        if self._uploads is None:
            self._uploads = CheckpointUploads(
                self.remote,
                folder,
                self.filename,
                self.run_name,
                self.num_checkpoints_to_keep,
                self._uploader,
                self.on_upload_failure,
            )
        return self._uploads

    # ---- uploading sharded checkpoints -------------------------------------------------------------------------
    # Every rank uploads its own shard files (on several nodes, no rank has the others' files). A checkpoint counts
    # in the store once its composer.pt is there, and rank 0 uploads that (and DCP's index) only once every rank has
    # reported its shards uploaded: at the next save, or at the end of fit (collectives every rank reaches).

    def _upload_shards_later(self, path: Path, folder: Path, rank: int) -> None:
        remote = self.remote
        assert remote is not None
        if self._uploader is None:
            self._uploader = BackgroundUploader(remote.store.options.max_pending_uploads, name="composer-checkpoint")
        name = path.relative_to(folder).as_posix()
        files = [f for f in shard_files(path, rank) if f != DCP_INDEX]  # the index goes with composer.pt, last
        self._awaiting_commit.append((path, name))
        self._uploader.submit(
            lambda: self._upload_shards(path, name, files),
            f"Uploading rank {rank}'s shards of checkpoint {name} to {remote.url.join(name)}",
            note=f"The checkpoint stays at {path}; the store keeps the checkpoints uploaded before it.",
        )

    def _upload_shards(self, path: Path, name: str, files: list[str]) -> None:
        assert self.remote is not None
        self.remote.upload_files(path, name, files)
        with self._uploading_lock:
            self._shards_uploaded.add(name)

    def _commit_sharded_uploads(self, state: State, wait: bool, deadline: float | None = None) -> None:
        """Every rank says which checkpoints it has uploaded its shards of (``wait``: after its uploads finish, or
        ``deadline`` comes); rank 0 queues the upload of DCP's index and composer.pt of those that every rank has,
        oldest first, then the pruning. An upload that failed on any rank raises :class:`UploadError` on every rank."""
        if not self._awaiting_commit:
            return
        failure = None
        try:
            if self._uploader is not None and wait and deadline is not None:
                self._uploader.wait_until(deadline)
            elif self._uploader is not None:
                self._uploader.wait() if wait else self._uploader.check()
        except UploadError as e:
            failure = f"rank {state.rank}: {e}"
        with self._uploading_lock:
            uploaded = set(self._shards_uploaded)
        reports = dist.all_gather_object((sorted(uploaded), failure))
        failures = [f for _, f in reports if f is not None]
        if failures:
            self._awaiting_commit.clear()
            raise UploadError("; ".join(failures))
        while self._awaiting_commit and all(self._awaiting_commit[0][1] in names for names, _ in reports):
            path, name = self._awaiting_commit.pop(0)
            with self._uploading_lock:
                self._shards_uploaded.discard(name)
            if state.rank == 0:
                assert self._uploader is not None and self.remote is not None
                self._uploader.submit(
                    lambda path=path, name=name: self._commit_sharded(path, name),  # type: ignore[misc]
                    f"Uploading {STATE_FILE} of checkpoint {name} to {self.remote.url.join(name)}",
                    note=f"The checkpoint stays at {path}; the store keeps the checkpoints uploaded before it.",
                )
            elif dist.get_local_rank() == 0 and not (path / DCP_INDEX).exists():
                self._drop_local_before(path)  # a node without rank 0's disk: its copies older than this one go

    def _commit_sharded(self, path: Path, name: str) -> None:
        """On rank 0's worker thread: DCP's index and composer.pt (which makes the checkpoint count), then pruning."""
        remote = self.remote
        assert remote is not None
        remote.upload_files(path, name, [DCP_INDEX, STATE_FILE])
        log.info("Uploaded %s to %s", path, remote.url.join(name))
        if self.num_checkpoints_to_keep > 0:
            remote.prune(self.filename, self.num_checkpoints_to_keep, name, self.run_name)
        self._drop_local_before(path)

    def _drop_local_before(self, path: Path) -> None:
        """Deletes this saver's local checkpoints older than ``path`` (the newest in the store now)."""
        waiting = {p for p, _ in self._awaiting_commit}
        local = find_checkpoints(self._folder(), self.filename, self.run_name)
        for old in local[local.index(path) + 1 :] if path in local else []:
            if old not in waiting:
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)

    def _finish_uploads(self) -> None:
        if self._uploads is not None:
            self._uploads.finish()  # under keep_local with the store down: says which stay only locally
        elif self._uploader is not None:
            self._uploader.wait()

    def fit_end(self, state: State, logger: Logger) -> None:
        del logger
        if self.remote is not None and self.sharded:
            self._commit_sharded_uploads(state, wait=True)
        self._finish_uploads()  # fit returns once every checkpoint is in the store, or raises why one is not

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._uploader is not None:
            self._uploader.close()

    def _folder(self) -> Path:
        if self.folder_path is None:
            self.folder_path = Path(format_checkpoint_name(self.folder, run_name=self.run_name))
        return self.folder_path

    def _due(self, state: State, event: Event) -> bool:
        timer = state.timer
        if self._last_saved == timer.batch.value:
            return False  # already saved after this batch (a batch interval ending the epoch, then the epoch event)
        if event is Event.EPOCH_CHECKPOINT and (
            state.stop_requested or timer.get(state.max_duration.unit) >= state.max_duration
        ):
            return True  # the run is over: always keep its final state
        if event is Event.BATCH_CHECKPOINT and state.fit_ends_mid_epoch:
            return True  # the run is over in the middle of an epoch (no EPOCH_CHECKPOINT comes): its final state
        if self._interval_function is not None:
            return bool(self._interval_function(state, event))
        interval = self._interval
        assert interval is not None
        if interval.unit == TimeUnit.EPOCH:
            return event is Event.EPOCH_CHECKPOINT and timer.epoch.value % interval.value == 0
        if event is not Event.BATCH_CHECKPOINT:
            return False
        if interval.unit == TimeUnit.BATCH:
            return bool(timer.batch.value % interval.value == 0)
        bucket = self._bucket_of(state, interval)
        crossed = self._bucket is not None and bucket > self._bucket
        self._bucket = bucket
        return crossed

    @staticmethod
    def _bucket_of(state: State, interval: Time[Any]) -> int:
        # How many whole intervals lie behind us; a save is due whenever this grows.
        if interval.unit == TimeUnit.DURATION:
            return math.floor(float(state.get_elapsed_duration().value) / float(interval.value) + 1e-9)
        return int(state.timer.get(interval.unit).value // interval.value)

    # ---- serialization -----------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        folder = self._folder()
        return {
            "saved_checkpoints": [
                p.relative_to(folder).as_posix() if p.is_relative_to(folder) else str(p) for p in self.saved_checkpoints
            ],
            "last_saved": self._last_saved,
            "bucket": self._bucket,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        folder = self._folder()
        self.saved_checkpoints = [folder / p for p in state.get("saved_checkpoints", [])]
        last = state.get("last_saved")
        if isinstance(last, (list, tuple)):  # written before the batch count alone: (epoch, batch)
            last = last[-1]
        self._last_saved = int(last) if last is not None else None
        self._bucket = state.get("bucket")


def _parse_interval(save_interval: SaveInterval) -> tuple[Callable[[State, Event], bool] | None, Time[Any] | None]:
    if callable(save_interval) and not isinstance(save_interval, (str, Time)):
        function = save_interval
        try:
            takes_event = len(inspect.signature(function).parameters) >= 2
        except (TypeError, ValueError):
            takes_event = True
        if takes_event:
            return function, None
        return (lambda state, event: function(state)), None
    try:
        interval = Time.from_input(save_interval, default_unit=TimeUnit.EPOCH)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"save_interval={save_interval!r} is not a time: use '1ep', '500ba', '10000sp', '2048tok', '0.25dur', an "
            f"int (epochs), or a function (state) -> bool. ({e})"
        ) from None
    if not interval.value > 0:
        raise ValueError(f"save_interval={save_interval!r} must be positive, for example '1ep' or '500ba'.")
    if interval.unit == TimeUnit.DURATION and interval.value > 1:
        raise ValueError(f"save_interval={save_interval!r} is more than the whole run; use at most '1dur'.")
    return None, interval


@hparams
class CheckpointSaverHparams(Hparams):
    """Config for :class:`CheckpointSaver` (YAML key ``checkpoint_saver``)."""

    folder: str = "checkpoints"
    filename: str = "ep{epoch}-ba{batch}-rank{rank}.pt"
    latest_filename: str | None = "latest-rank{rank}.pt"
    save_interval: str = "1ep"
    num_checkpoints_to_keep: int = -1
    overwrite: bool = False
    weights_only: bool = False
    run_name: str | None = None
    check_finite: bool = True

    def initialize_object(self) -> CheckpointSaver:
        return CheckpointSaver(
            folder=self.folder,
            filename=self.filename,
            latest_filename=self.latest_filename,
            save_interval=self.save_interval,
            num_checkpoints_to_keep=self.num_checkpoints_to_keep,
            overwrite=self.overwrite,
            weights_only=self.weights_only,
            run_name=self.run_name,
            check_finite=self.check_finite,
        )
