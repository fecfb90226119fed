"""Logged values in a file: lines of text, or JSON lines for programs to read back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from composer.core.hparams import Hparams, hparams
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time
from composer.loggers.buffered_destination import BufferedDestination
from composer.loggers.log_path import check_writable, format_log_path, has_placeholders
from composer.loggers.log_value import format_record
from composer.loggers.record_buffer import Record

__all__ = ["FileLogger", "FileLoggerHparams"]

_FORMATS = ("text", "jsonl")
_ALIASES = {"json": "jsonl"}  # the file is JSON lines either way: one object per line


class FileLogger(BufferedDestination):
    """Writes logged values to a file, as text lines or as JSON lines.

    A text line reads ``[BATCH][epoch=0 batch=3]: loss/train: 1.0986`` (what :class:`ConsoleLogger` prints). A JSON
    line is one object per logged record::

        {"level": "batch", "epoch": 0, "batch": 3, "batch_in_epoch": 3, "sample": 12, "token": 0,
         "data": {"loss/train": 1.0986}}

    The file name may hold the fields ``save_folder`` takes, filled in at ``Event.INIT`` in the same way:
    ``FileLogger("out/{run_name}/log.txt")`` writes ``out/<the Trainer's run_name>/log.txt``, and ``{rank}`` is the
    process's rank (see :func:`~composer.loggers.log_path.format_log_path`); :attr:`filename` is the filled-in path
    from then on. The folder is checked when the logger is built and again at ``Event.INIT`` (an existing file is
    refused there too, unless ``overwrite``), so a path that cannot be written fails before training starts. The file itself is
    created at the first write: a Trainer whose construction fails before anything is logged (a corrupt
    ``load_path``, say) leaves no file behind, and re-running the same script fails the same way, not on a log file
    left over. Lines are written in batches (see :class:`BufferedDestination`) and flushed to disk at every epoch and
    evaluation end.

    Args:
        filename (str | PathLike): The file, with ``{run_name}``, ``{rank}``, ... filled in as in ``save_folder``;
            missing folders are created.
        format (str, optional): ``'text'`` or ``'jsonl'`` (``'json'`` is the same: JSON lines); default: ``'jsonl'``
            for a ``.jsonl`` or ``.json`` file, else ``'text'``.
        log_level (LogLevel | str): The most verbose level written (default: BATCH, so the training loss is kept,
            at ``log_interval``; ``'epoch'`` keeps only evaluation and other per-epoch values).
        log_interval (str | Time | int): Write BATCH values every this many batches (default: ``'10ba'``: batches 0,
            10, 20, ...), or only EPOCH values, every this many epochs (``'1ep'``). FIT and EPOCH values (the
            evaluation metrics) are always written with a batch interval.
        flush_interval (int): Write after this many records are pending.
        overwrite (bool): Replace an existing file (default: refuse, so that an earlier run's log is not lost).

    Example:
        >>> import json, pathlib, tempfile
        >>> from composer import Trainer
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   loggers=[FileLogger(path, log_interval="1ba")], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> [json.loads(line)["batch"] for line in path.read_text().splitlines() if "loss/train" in line]
        [0, 1]
    """

    def __init__(
        self,
        filename: str | os.PathLike[str],
        *,
        format: str | None = None,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "10ba",
        flush_interval: int = 100,
        overwrite: bool = False,
    ) -> None:
        super().__init__(log_level, log_interval, flush_interval)
        self._pattern = str(filename)
        self.filename = check_writable(filename, "filename", is_dir=False)
        if format is None:
            format = "jsonl" if self.filename.suffix in (".jsonl", ".json") else "text"
        format = _ALIASES.get(format, format)
        if format not in _FORMATS:
            raise ValueError(
                f"format={format!r} is not supported; expected one of {list(_FORMATS)} ('json' means 'jsonl'), or None "
                "to choose from the file's suffix."
            )
        if self.filename.exists() and not overwrite and not has_placeholders(filename):
            raise ValueError(
                f"filename={str(filename)!r} already exists; pass overwrite=True to replace it, or choose a new name."
            )
        self.format = format
        self.overwrite = overwrite
        self._file: IO[str] | None = None
        self._started = False  # between INIT and close: records are written (the file is opened at the first)

    def init(self, state: State, logger: Logger) -> None:
        del logger
        if self._started:
            return  # a second Trainer built with the same logger keeps appending
        if has_placeholders(self._pattern):
            self.filename = check_writable(format_log_path(self._pattern, state, "filename"), "filename", is_dir=False)
        Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
        if self.filename.exists() and not self.overwrite:
            raise ValueError(
                f"filename={str(self.filename)!r} already exists; pass overwrite=True to replace it, or choose a new "
                "name."
            )
        self._started = True

    def _open(self) -> IO[str]:
        try:
            return open(self.filename, "w" if self.overwrite else "x", encoding="utf-8")
        except OSError as error:
            raise ValueError(
                f"filename={str(self.filename)!r} cannot be opened for writing ({error}); choose another path."
            ) from error

    def write(self, records: list[Record]) -> None:
        if not self._started:
            return  # logged before INIT or after close: nowhere to write
        if self._file is None:
            self._file = self._open()
        if self.format == "text":
            lines = [format_record(r.timestamp, r.log_level, r.data) for r in records]
        else:
            lines = [json.dumps(_json_record(r)) for r in records]
        self._file.write("\n".join(lines) + "\n")

    def flush(self) -> None:
        super().flush()
        if self._file is not None:
            self._file.flush()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        self._started = False
        if self._file is not None:
            self._file.close()
            self._file = None


def _json_record(record: Record) -> dict[str, Any]:
    t = record.timestamp
    return {
        "level": record.log_level.name.lower(),
        "epoch": int(t.epoch),
        "batch": int(t.batch),
        "batch_in_epoch": int(t.batch_in_epoch),
        "sample": int(t.sample),
        "token": int(t.token),
        "data": record.data,
    }


@hparams
class FileLoggerHparams(Hparams):
    """Config for :class:`FileLogger` (YAML key ``file``)."""

    filename: str
    format: str | None = None
    log_level: str = "batch"
    log_interval: str = "10ba"
    flush_interval: int = 100
    overwrite: bool = False

    def initialize_object(self) -> FileLogger:
        return FileLogger(
            self.filename,
            format=self.format,
            log_level=self.log_level,
            log_interval=self.log_interval,
            flush_interval=self.flush_interval,
            overwrite=self.overwrite,
        )
