"""Logged values in a CSV file, one row per value, for spreadsheets and ``pandas.read_csv``."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time
from composer.loggers.file_destination import FileDestination, rewrite_atomically, warn_if_short
from composer.loggers.record_buffer import Record

__all__ = ["CSVLogger", "CSVLoggerHparams"]

COLUMNS = ("epoch", "batch", "batch_in_epoch", "sample", "token", "level", "name", "value")


class CSVLogger(FileDestination):
    """Writes every logged value as one CSV row: ``epoch,batch,batch_in_epoch,sample,token,level,name,value``.

    The long ("tidy") layout needs no header change when a new name appears mid-run, so rows stream to disk as they
    come. Pivot it for one column per name: ``pandas.read_csv(path).pivot_table(index="batch", columns="name",
    values="value")``. Numbers are written as numbers, strings as they are, anything else as JSON.

    The file is created at the first write, so a Trainer whose construction fails leaves nothing that blocks a rerun.
    A fresh run refuses an existing file (at ``Event.FIT_START``, or at the first write when nothing is trained),
    unless ``overwrite``. A run that resumes from a checkpoint (``autoresume``, or ``load_path`` with the whole
    state) continues the same file, whatever ``overwrite`` says: it keeps the rows written before the checkpoint
    (every checkpoint writes the pending rows first), drops those the interrupted run wrote after it (they are
    written again), and appends; the file is rewritten through a temporary file and a rename.

    The file name may hold the fields ``save_folder`` takes (``{run_name}``, ``{rank}``, ...), filled in at
    ``Event.INIT`` as :class:`~composer.loggers.file_logger.FileLogger` does: ``CSVLogger("metrics-{run_name}.csv")``
    writes ``metrics-<the Trainer's run_name>.csv``, and :attr:`filename` is the filled-in path from then on.

    Args:
        filename (str | PathLike): The file, with ``{run_name}``, ``{rank}``, ... filled in as in ``save_folder``;
            missing folders are created.
        log_level (LogLevel | str): The most verbose level written (default: BATCH).
        log_interval (str | Time | int): Write BATCH values every this many batches, or EPOCH values every this many
            epochs (``'1ep'``).
        flush_interval (int): Write after this many records are pending.
        overwrite (bool): Replace an existing file in a fresh run (default: refuse). A resumed run always continues
            its file.

    Example:
        >>> import csv, pathlib, tempfile, torch
        >>> from composer import ComposerClassifier, Trainer
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.csv"
        >>> model = ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3)
        >>> train_dataloader = [(torch.randn(4, 8), torch.randint(0, 3, (4,)))] * 4  # any iterable of batches
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   loggers=[CSVLogger(path)], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> [(row["batch"], row["name"]) for row in csv.DictReader(path.read_text().splitlines())]
        [('0', 'trainer/algorithms'), ('0', 'loss/train'), ('1', 'loss/train')]
    """

    count_key = "rows"

    def __init__(
        self,
        filename: str | os.PathLike[str],
        *,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
        overwrite: bool = False,
    ) -> None:
        super().__init__(filename, log_level, log_interval, flush_interval, overwrite)
        self._writer: Any = None

    def keep_records(self, path: Path, resumed_from: dict[str, Any] | None) -> int:
        return _keep_rows(path, resumed_from)

    def write(self, records: list[Record]) -> None:
        if self._state is None:
            return  # logged before INIT or after close: nowhere to write
        if self._writer is None:
            file = self.open_file(self._state)
            self._writer = csv.writer(file)
            if file.tell() == 0:  # a new file, or an empty one a resumed run continues
                self._writer.writerow(COLUMNS)
        rows = []
        for record in records:
            t = record.timestamp
            prefix = (int(t.epoch), int(t.batch), int(t.batch_in_epoch), int(t.sample), int(t.token))
            level = record.log_level.name.lower()
            for name, value in record.data.items():
                if not isinstance(value, (int, float, str)) or isinstance(value, bool):
                    value = json.dumps(value)
                rows.append((*prefix, level, name, value))
        self._writer.writerows(rows)
        self._count += len(rows)

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        self._writer = None


def _keep_rows(path: Path, resumed_from: dict[str, Any] | None) -> int:
    """Keeps the header and the first ``resumed_from['rows']`` rows of ``path`` (all without a count), atomically.

    Returns how many data rows the file holds now (0 without a file); fewer than the checkpoint counted are kept as
    they are, with a warning.
    """
    wanted = None if resumed_from is None else resumed_from.get("rows")
    found = 0
    if path.exists():
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
        rows = list(csv.reader(io.StringIO(text)))
        data = rows[1:] if rows and tuple(rows[0]) == COLUMNS else rows
        complete = [row for row in data if len(row) == len(COLUMNS)]  # a row the interruption cut short is dropped
        found = len(complete) if wanted is None else min(wanted, len(complete))
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        writer.writerows(complete[:found])
        if out.getvalue() != text:
            rewrite_atomically(path, out.getvalue())
    warn_if_short("filename", path, found, wanted, "rows")
    return found


CSVLoggerHparams = hparams_for(CSVLogger)
"""See :class:`CSVLogger`; the fields are its arguments (YAML key ``csv``)."""
