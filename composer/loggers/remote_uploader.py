"""The run's log files in an object store: what FileLogger, CSVLogger and TensorboardLogger write, uploaded."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LoggerDestination
from composer.core.time import Time, TimeUnit
from composer.loggers.csv_logger import CSVLogger
from composer.loggers.file_logger import FileLogger
from composer.loggers.log_path import has_placeholders
from composer.loggers.tensorboard_logger import TensorboardLogger

if TYPE_CHECKING:
    from composer.core.state import State
    from composer.utils.object_store import BackgroundUploader, ObjectStoreURL, S3ObjectStore

__all__ = ["RemoteUploader", "RemoteUploaderHparams"]

log = logging.getLogger(__name__)


class RemoteUploader(LoggerDestination):
    """Uploads the run's log files to a folder of an S3-compatible object store, in the background.

    The files are those of the run's :class:`FileLogger`, :class:`CSVLogger` and :class:`TensorboardLogger`. At every ``upload_interval``, at the end of ``fit`` and at ``close``, each of those destinations is flushed and
    every file of theirs that changed since its last upload is read and handed to a worker thread, which writes it
    to ``remote_folder/<file name>`` (a TensorBoard folder's files under ``<its folder name>/``). Give the
    checkpoints' ``save_interval`` to upload the logs with every checkpoint. The store is checked at ``Event.INIT``,
    inside the Trainer's constructor (the URL, the credentials, the bucket, write access). A file that exists in the
    store but not here (a run resumed on a fresh machine) is downloaded at ``Event.INIT``, so a resumed log
    continues the same file. An upload that fails for good raises at the next upload, at the end of ``fit``, or (as
    a logged error) at ``close``. List it after the loggers whose files it uploads. In a recipe it is
    ``loggers: {remote_uploader: {remote_folder: s3://BUCKET/PREFIX, storage_options: {...}}}``.

    Args:
        remote_folder (str): ``s3://BUCKET/PREFIX``; ``{run_name}`` and the other ``save_folder`` fields are filled in.
        storage_options (Mapping, optional): As the Trainer's (``endpoint_url``, ``retry_budget``, ...).
        upload_interval (str | Time | int): ``'1ep'`` (default), ``'100ba'``; an int counts epochs.

    Example:
        >>> RemoteUploader("gs://logs/run")
        Traceback (most recent call last):
        ...
        ValueError: remote_folder='gs://logs/run' uses the scheme 'gs://', which is not supported ...
    """

    def __init__(
        self,
        remote_folder: str,
        storage_options: Mapping[str, Any] | None = None,
        upload_interval: str | Time[Any] | int = "1ep",
    ) -> None:
        from composer.utils.object_store import ObjectStoreURL, StorageOptions, parse_location

        if not isinstance(parse_location(remote_folder, "remote_folder"), ObjectStoreURL):
            raise ValueError(
                f"remote_folder={remote_folder!r} is a local path; give s3://BUCKET/PREFIX (local loggers already "
                "write their files locally)."
            )
        self.remote_folder = remote_folder
        self.storage_options = StorageOptions.from_input(storage_options)
        self.upload_interval = Time.from_input(upload_interval, default_unit=TimeUnit.EPOCH)
        if self.upload_interval.unit not in (TimeUnit.EPOCH, TimeUnit.BATCH) or not self.upload_interval.value > 0:
            raise ValueError(f"upload_interval={upload_interval!r} must be a positive number of epochs or batches.")
        self.url: ObjectStoreURL | None = None
        self._store: S3ObjectStore | None = None
        self._uploader: BackgroundUploader | None = None
        self._sources: list[FileLogger | CSVLogger | TensorboardLogger] = []
        self._uploaded: dict[Path, tuple[int, int]] = {}  # file -> (size, mtime_ns) at its last upload

    def init(self, state: State, logger: Logger) -> None:
        del logger
        if state.rank != 0:
            return
        from composer.utils.checkpoint import format_checkpoint_name
        from composer.utils.object_store import BackgroundUploader, ObjectStoreURL, S3ObjectStore, parse_location

        # Filled in as the string it is (a path would fold the '//' of the scheme).
        filled = format_checkpoint_name(self.remote_folder, state, run_name=state.run_name or "", rank=state.rank)
        location = parse_location(filled, "remote_folder")
        if not isinstance(location, ObjectStoreURL):  # the filled-in fields turned it into something else
            raise ValueError(f"remote_folder={self.remote_folder!r} must stay an s3:// URL once filled in.")
        self.url = location
        self._store = S3ObjectStore(location.bucket, self.storage_options)
        self._store.probe(location, "remote_folder", write=True)
        self._uploader = BackgroundUploader(self.storage_options.max_pending_uploads, name="composer-log-upload")
        self._sources = [c for c in state.callbacks if isinstance(c, (FileLogger, CSVLogger, TensorboardLogger))]
        self._download_missing()

    def _files(self) -> dict[str, Path]:
        """Name in the remote folder -> local file, for every file of the run's file-writing destinations."""
        files: dict[str, Path] = {}
        for source in self._sources:
            if isinstance(source, TensorboardLogger):
                folder = Path(source.log_dir)
                if not has_placeholders(str(folder)) and folder.is_dir():
                    for path in sorted(folder.rglob("*")):
                        if path.is_file():
                            files[f"{folder.name}/{path.relative_to(folder).as_posix()}"] = path
            elif not has_placeholders(str(source.filename)):
                files[Path(source.filename).name] = Path(source.filename)
        return files

    def _download_missing(self) -> None:
        assert self._store is not None and self.url is not None
        for name, path in self._files().items():
            if not path.exists() and self._store.head(self.url.key(name)) is not None:
                self._store.download(self.url.key(name), path)
                log.info("Downloaded %s from %s to continue it.", path, self.url.join(name))

    def upload(self) -> None:
        """Flushes the file-writing destinations and queues the upload of every file changed since its last upload.

        Raises:
            UploadError: If an earlier upload failed for good.
        """
        if self._uploader is None or self._store is None or self.url is None:
            return
        for source in self._sources:
            source.flush()
        for name, path in self._files().items():
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            version = (stat.st_size, stat.st_mtime_ns)
            if self._uploaded.get(path) == version:
                continue
            data = path.read_bytes()  # a snapshot: the file goes on growing while it is uploaded
            self._uploaded[path] = version
            store, key = self._store, self.url.key(name)
            self._uploader.submit(
                lambda store=store, data=data, key=key: store.upload_bytes(data, key),  # type: ignore[misc]
                f"Uploading {path} to {self.url.join(name)}",
            )

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        if self.upload_interval.unit == TimeUnit.BATCH and state.timer.batch.value % self.upload_interval.value == 0:
            self.upload()

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        del logger
        if self.upload_interval.unit == TimeUnit.EPOCH and state.timer.epoch.value % self.upload_interval.value == 0:
            self.upload()

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self.upload()
        if self._uploader is not None:
            self._uploader.wait()

    def post_close(self) -> None:
        # After every destination's close, so their files are complete: upload them, and wait.
        if self._uploader is None:
            return
        try:
            self.upload()
        finally:
            uploader, self._uploader = self._uploader, None
            uploader.close()


RemoteUploaderHparams = hparams_for(RemoteUploader)
"""See :class:`RemoteUploader`; the fields are its arguments (YAML key ``remote_uploader``)."""
