"""Saves checkpoints during training: when, under which name, how many to keep, and the 'latest' link."""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from composer.callbacks.nan_monitor import DeferredNaNMonitor
from composer.core.callback import Callback
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.utils.checkpoint import (
    DEFAULT_FILENAME,
    DEFAULT_LATEST_FILENAME,
    RemoteCheckpointFolder,
    check_upload_failure_policy,
    format_checkpoint_name,
    remove_stale_temporary_files,
    save_checkpoint,
)
from composer.utils.checkpoint.folders import CheckpointFolder, LocalFolder, RemoteFolder
from composer.utils.checkpoint.naming import refuse_folders_named_like_checkpoints

__all__ = ["CheckpointSaver", "CheckpointSaverHparams"]

log = logging.getLogger(__name__)

SaveInterval = str | Time[Any] | int | Callable[..., bool]


class CheckpointSaver(Callback):
    """Saves the training state at an interval, atomically, keeping the newest ``num_checkpoints_to_keep``.

    Rank 0 writes one at ``BATCH_CHECKPOINT`` or ``EPOCH_CHECKPOINT`` when ``save_interval`` says so and at the end;
    then ``latest`` points at it and the oldest beyond the number to keep go. The Trainer adds one for ``save_folder``.

    Args:
        folder (str): Where checkpoints go; ``{run_name}`` is filled in. Default: ``'checkpoints'``.
        filename (str): The name pattern over ``{run_name}``, ``{rank}``, ``{epoch}``, ``{batch}``, ``{sample}``,
            ``{token}``; ``.safetensors``: weights in that format. Default: ``'ep{epoch}-ba{batch}-rank{rank}.pt'``.
        latest_filename (str | None): A link to the newest checkpoint (None: none). Default: ``'latest-rank{rank}.pt'``.
        save_interval (str | Time | int | Callable): ``'1ep'``, ``'500ba'``, ``'10000sp'``, ``'0.25dur'``, an int
            (epochs), or a function ``(state) -> bool`` or ``(state, event) -> bool``. Default: ``'1ep'``.
        num_checkpoints_to_keep (int): Keep the newest this many checkpoints of ``filename``'s pattern (files of other
            names are never deleted); -1 keeps them all. The disk needs room for one more while the next is written.
        overwrite (bool): Allow saving into a folder that already holds checkpoints of this pattern (``autoresume``).
        weights_only (bool): Save only the model's weights (such checkpoints cannot resume training).
        run_name (str, optional): The run's name, for ``{run_name}``.
        metadata (Mapping, optional): The run's config (plain values), stored in every checkpoint.
        check_finite (bool): Refuse to write weights that hold a NaN or an infinity (``NonFiniteWeightsError``).
        remote (RemoteCheckpointFolder, optional): Also upload every checkpoint to this folder of an object store.
        sharded (bool): Write sharded checkpoints (FSDP): each is a folder named by ``filename`` into which every rank
            writes its shards (:mod:`composer.utils.checkpoint.sharded`).
        on_upload_failure (str): With ``remote``, an upload that fails for good: ``'raise'`` ends the run;
            ``'keep_local'`` warns once and trains on, keeping the checkpoints locally until the store answers.

    Attributes:
        folder_path (Path | None): The folder, once known (at ``INIT``), with ``{run_name}`` filled in.
        saved_checkpoints (list[Path]): The checkpoints this saver wrote that still exist, oldest first.

    Example:
        >>> import tempfile, composer, torch
        >>> saver = CheckpointSaver(folder=tempfile.mkdtemp(), save_interval="2ba", num_checkpoints_to_keep=1)
        >>> batches = [(torch.randn(4, 8), torch.randint(0, 3, (4,)))] * 4  # any iterable of batches
        >>> trainer = composer.Trainer(model=composer.ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3),
        ...                            train_dataloader=batches, max_duration="4ba", callbacks=[saver])
        >>> trainer.fit()
        >>> [p.name for p in saver.saved_checkpoints]
        ['ep0-ba4-rank0.pt']
        >>> trainer.close()
    """

    def __init__(
        self,
        folder: str = "checkpoints",
        filename: str = DEFAULT_FILENAME,
        latest_filename: str | None = DEFAULT_LATEST_FILENAME,
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
        self._destination: CheckpointFolder | None = None  # made at the first use
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
        self.destination.prepare()
        if self.overwrite:
            return
        existing = list(self.destination.newest_first())
        if existing:
            raise ValueError(
                f"The checkpoint folder {self.destination.location} already holds checkpoints of this run's pattern "
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
        if state.rank == 0:
            log.info("Saved checkpoint %s", path)
        # Every rank: the folder makes it count (a local folder's 'latest' link and pruning; a store's uploads).
        deleted = self.destination.commit(path)
        if deleted:
            self.saved_checkpoints = [p for p in self.saved_checkpoints if p == path or p not in deleted]
        return path if state.rank == 0 else None

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
        return self.destination.flush(deadline)

    @property
    def store_outage(self) -> str | None:
        """Under ``on_upload_failure='keep_local'``, why the store does not take checkpoints now (None while it does)."""
        return self.destination.outage

    @property
    def destination(self) -> CheckpointFolder:
        """The folder this saver commits its checkpoints to: the local ``folder``, or the store (``remote``), which
        they are written into ``folder`` for."""
        if self._destination is None:
            folder, keep = self._folder(), self.num_checkpoints_to_keep
            if self.remote is None:
                self._destination = LocalFolder(folder, self.filename, self.run_name, keep, self.latest_filename)
            else:
                self._destination = RemoteFolder(
                    self.remote,
                    folder,
                    self.filename,
                    self.run_name,
                    keep,
                    sharded=self.sharded,
                    on_upload_failure=self.on_upload_failure,
                )
        return self._destination

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self.destination.finish()  # fit returns once every checkpoint is committed, or raises why one is not

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._destination is not None:
            self._destination.close()

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


CheckpointSaverHparams = hparams_for(CheckpointSaver, exclude=("metadata", "sharded", "on_upload_failure"))
"""See :class:`CheckpointSaver`; the fields are its arguments (YAML key ``checkpoint_saver``).

``metadata``, ``sharded`` and ``on_upload_failure`` are the Trainer's to set.
"""
