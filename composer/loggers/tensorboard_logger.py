"""Logged values as TensorBoard event files."""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from typing import Any

from composer.core.hparams import Hparams, hparams
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time, Timestamp
from composer.loggers.buffered_destination import BufferedDestination
from composer.loggers.extras import is_package_available, require_package
from composer.loggers.log_path import check_writable
from composer.loggers.log_value import is_number
from composer.loggers.record_buffer import Record

__all__ = ["TensorboardLogger", "TensorboardLoggerHparams", "is_tensorboard_available"]


def is_tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package is installed (``pip install 'opencomposer[loggers]'``)."""
    return is_package_available("tensorboard")


class TensorboardLogger(BufferedDestination):
    """Writes logged values to TensorBoard event files under ``log_dir``.

    Numbers become scalars at step ``timestamp.batch`` (the batches trained when the value was logged); strings and
    other values become text; images from :class:`~composer.callbacks.ImageVisualizer` become images. Watch a run
    live with ``tensorboard --logdir <log_dir>``. Needs the ``loggers`` extra (``pip install
    'opencomposer[loggers]'``); without it, building the logger raises an ImportError that says so.

    Args:
        log_dir (str | PathLike, optional): The run's folder; default ``runs/<date>_<host>`` (TensorBoard's own
            default). Checked when the logger is built.
        log_level (LogLevel | str): The most verbose level written (default: BATCH).
        log_interval (str | Time | int): Write BATCH values every this many batches, or EPOCH values every this many
            epochs (``'1ep'``).
        flush_interval (int): Hand values to the writer after this many records are pending.

    Example:
        >>> import tempfile
        >>> from composer import Trainer
        >>> log_dir = tempfile.mkdtemp()
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   loggers=[TensorboardLogger(log_dir)], progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        >>> events = EventAccumulator(log_dir)
        >>> _ = events.Reload()
        >>> [event.step for event in events.Scalars("loss/train")]
        [0, 1]
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
    ) -> None:
        require_package("tensorboard", "TensorboardLogger")
        super().__init__(log_level, log_interval, flush_interval)
        if log_dir is None:
            log_dir = os.path.join("runs", f"{datetime.now():%Y%m%d-%H%M%S}_{socket.gethostname()}")
        self.log_dir = check_writable(log_dir, "log_dir", is_dir=True)
        self._writer: Any = None

    def init(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.log_dir))

    def write(self, records: list[Record]) -> None:
        writer = self._writer
        if writer is None:
            return
        for record in records:
            step = int(record.timestamp.batch)
            for name, value in record.data.items():
                if is_number(value):
                    writer.add_scalar(name, value, global_step=step)
                else:
                    text = value if isinstance(value, str) else json.dumps(value)
                    writer.add_text(name, text, global_step=step)

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Writes ``images``: one (C, H, W) image or a (N, C, H, W) batch, floats in [0, 1]."""
        del log_level
        self.flush()  # keep the file in logging order
        if self._writer is None:
            return
        step = int(timestamp.batch)
        if images.ndim == 4:
            self._writer.add_images(name, images, global_step=step, dataformats="NCHW")
        else:
            self._writer.add_image(name, images, global_step=step, dataformats="CHW")

    def flush(self) -> None:
        super().flush()
        if self._writer is not None:
            self._writer.flush()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        if self._writer is not None:
            self._writer.close()
            self._writer = None


@hparams
class TensorboardLoggerHparams(Hparams):
    """Config for :class:`TensorboardLogger` (YAML key ``tensorboard``)."""

    log_dir: str | None = None
    log_level: str = "batch"
    log_interval: str = "1ba"
    flush_interval: int = 100

    def initialize_object(self) -> TensorboardLogger:
        return TensorboardLogger(
            self.log_dir,
            log_level=self.log_level,
            log_interval=self.log_interval,
            flush_interval=self.flush_interval,
        )
