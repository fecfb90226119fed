"""Logged values in a CSV file, one row per value, for spreadsheets and ``pandas.read_csv``."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import IO, Any

from composer.core.hparams import Hparams, hparams
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time
from composer.loggers.buffered_destination import BufferedDestination
from composer.loggers.log_path import check_writable
from composer.loggers.record_buffer import Record

__all__ = ["CSVLogger", "CSVLoggerHparams"]

COLUMNS = ("epoch", "batch", "batch_in_epoch", "sample", "token", "level", "name", "value")


class CSVLogger(BufferedDestination):
    """Writes every logged value as one CSV row: ``epoch,batch,batch_in_epoch,sample,token,level,name,value``.

    The long ("tidy") layout needs no header change when a new name appears mid-run, so rows stream to disk as they
    come. Pivot it for one column per name: ``pandas.read_csv(path).pivot_table(index="batch", columns="name",
    values="value")``. Numbers are written as numbers, strings as they are, anything else as JSON.

    Args:
        filename (str | PathLike): The file; missing folders are created.
        log_level (LogLevel | str): The most verbose level written (default: BATCH).
        log_interval (str | Time | int): Write BATCH values every this many batches, or EPOCH values every this many
            epochs (``'1ep'``).
        flush_interval (int): Write after this many records are pending.
        overwrite (bool): Replace an existing file (default: refuse).

    Example:
        >>> import csv, pathlib, tempfile
        >>> from composer import Trainer
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.csv"
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   loggers=[CSVLogger(path)], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> [(row["batch"], row["name"]) for row in csv.DictReader(path.read_text().splitlines())]
        [('0', 'trainer/algorithms'), ('0', 'loss/train'), ('1', 'loss/train')]
    """

    def __init__(
        self,
        filename: str | os.PathLike[str],
        *,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
        overwrite: bool = False,
    ) -> None:
        super().__init__(log_level, log_interval, flush_interval)
        self.filename = check_writable(filename, "filename", is_dir=False)
        if self.filename.exists() and not overwrite:
            raise ValueError(
                f"filename={str(filename)!r} already exists; pass overwrite=True to replace it, or choose a new name."
            )
        self.overwrite = overwrite
        self._file: IO[str] | None = None
        self._writer: Any = None

    def init(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._file is not None:
            return
        Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file = open(self.filename, "w" if self.overwrite else "x", encoding="utf-8", newline="")  # noqa: SIM115
        except OSError as error:
            raise ValueError(
                f"filename={str(self.filename)!r} cannot be opened for writing ({error}); choose another path."
            ) from error
        self._writer = csv.writer(self._file)
        self._writer.writerow(COLUMNS)

    def write(self, records: list[Record]) -> None:
        if self._writer is None:
            return
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

    def flush(self) -> None:
        super().flush()
        if self._file is not None:
            self._file.flush()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None


@hparams
class CSVLoggerHparams(Hparams):
    """Config for :class:`CSVLogger` (YAML key ``csv``)."""

    filename: str
    log_level: str = "batch"
    log_interval: str = "1ba"
    flush_interval: int = 100
    overwrite: bool = False

    def initialize_object(self) -> CSVLogger:
        return CSVLogger(
            self.filename,
            log_level=self.log_level,
            log_interval=self.log_interval,
            flush_interval=self.flush_interval,
            overwrite=self.overwrite,
        )
