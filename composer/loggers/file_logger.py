"""Logged values in a file: lines of text, or JSON lines for programs to read back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import LogLevel
from composer.core.time import Time, Timestamp
from composer.loggers.file_destination import FileDestination, rewrite_atomically, warn_if_short
from composer.loggers.log_value import format_record
from composer.loggers.record_buffer import Record

__all__ = ["FileLogger", "FileLoggerHparams"]

_FORMATS = ("text", "jsonl")
_ALIASES = {"json": "jsonl"}  # the file is JSON lines either way: one object per line


class FileLogger(FileDestination):
    """Writes logged values to a file, as text lines or as JSON lines.

    A text line reads ``[BATCH][epoch=0 batch=3]: loss/train: 1.0986`` (what :class:`ConsoleLogger` prints). A JSON
    line is one object per logged record::

        {"level": "batch", "epoch": 0, "batch": 3, "batch_in_epoch": 3, "sample": 12, "token": 0,
         "data": {"loss/train": 1.0986}}

    The file name may hold the fields ``save_folder`` takes (``{run_name}``, ``{rank}``, ...). A fresh run refuses
    an existing file unless ``overwrite``; a resumed run continues its file. The monitoring guide
    (``docs/guides/monitoring.md``) says when the file is created, flushed and rewritten.

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
        overwrite (bool): Replace an existing file in a fresh run (default: refuse, so that an earlier run's log is
            not lost). A resumed run always continues its file.

    Example:
        >>> import json, pathlib, tempfile, torch
        >>> from composer import ComposerClassifier, Trainer
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> model = ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   loggers=[FileLogger(path, log_interval="1ba")], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> [json.loads(line)["batch"] for line in path.read_text().splitlines() if "loss/train" in line]
        [0, 1]
    """

    count_key = "lines"

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
        super().__init__(filename, log_level, log_interval, flush_interval, overwrite)
        if format is None:
            format = "jsonl" if self.filename.suffix in (".jsonl", ".json") else "text"
        format = _ALIASES.get(format, format)
        if format not in _FORMATS:
            raise ValueError(
                f"format={format!r} is not supported; expected one of {list(_FORMATS)} ('json' means 'jsonl'), or None "
                "to choose from the file's suffix."
            )
        self.format = format

    def keep_records(self, path: Path, resumed_from: dict[str, Any] | None) -> int:
        return keep_lines(path, resumed_from, "filename")

    def write(self, records: list[Record]) -> None:
        if self._state is None:
            return  # logged before INIT or after close: nowhere to write
        file = self._file or self.open_file(self._state)
        if self.format == "text":
            lines = [format_record(r.timestamp, r.log_level, r.data) for r in records]
        else:
            lines = [json.dumps(_json_record(r)) for r in records]
        text = "\n".join(lines) + "\n"
        file.write(text)
        self._count += text.count("\n")

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Writes ``text`` as the value of ``name`` (a JSON string in a ``.jsonl`` file), in logging order."""
        self.log_metric(timestamp, log_level, {name: text})


def keep_lines(path: Path, resumed_from: dict[str, Any] | None, argument: str) -> int:
    """Keeps the first ``resumed_from['lines']`` lines of ``path`` (all without a count), rewritten atomically.

    Returns how many lines the file holds now (0 without a file). Fewer lines than the checkpoint counted (a file
    removed or cut short in between) are kept as they are, with a warning: the records logged before the checkpoint
    that are missing are not logged again.
    """
    wanted = None if resumed_from is None else resumed_from.get("lines")
    found = 0
    if path.exists():
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
        lines = text.split("\n")  # the last part follows the final newline: '' or a line the interruption cut short
        found = len(lines) - 1 if wanted is None else min(wanted, len(lines) - 1)
        kept = "".join(line + "\n" for line in lines[:found])
        if kept != text:
            rewrite_atomically(path, kept)
    warn_if_short(argument, path, found, wanted, "lines")
    return found


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


FileLoggerHparams = hparams_for(FileLogger)
"""See :class:`FileLogger`; the fields are its arguments (YAML key ``file``)."""
