"""Logged values as TensorBoard event files."""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from typing import Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time, Timestamp
from composer.loggers.buffered_destination import OpenedOnFitDestination
from composer.loggers.log_path import check_writable
from composer.loggers.log_value import is_number
from composer.loggers.optional_packages import is_package_available, require_package
from composer.loggers.record_buffer import Record

__all__ = ["TensorboardLogger", "TensorboardLoggerHparams", "is_tensorboard_available"]


def is_tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package is installed (``pip install 'opencomposer[loggers]'``).

    Returns:
        bool: True when ``tensorboard`` can be imported.
    """
    return is_package_available("tensorboard")


class TensorboardLogger(OpenedOnFitDestination):
    """Writes logged values to TensorBoard event files under ``log_dir``.

    Numbers become scalars at step ``timestamp.batch`` (the batches trained when the value was logged); strings and
    other values become text; images from :class:`~composer.callbacks.ImageVisualizer` become images. Watch a run
    live with ``tensorboard --logdir <log_dir>``. Needs the ``loggers`` extra (``pip install
    'opencomposer[loggers]'``); without it, building the logger raises an ImportError that says so.

    A run that resumes from a checkpoint (``autoresume``, or ``load_path`` with the whole state) writes a new event
    file in the same ``log_dir`` with TensorBoard's ``purge_step``: readers drop what the interrupted run wrote from
    the last step it had written when the checkpoint was saved (every checkpoint writes the pending values first).
    The values of that step written before the checkpoint are saved in it and written again, so each step holds
    what an uninterrupted run's does. Images are not saved that way: those of that step are dropped.

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
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
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
        self._step: int | None = None  # the last step written, and what was written at it (saved in checkpoints)
        self._at_step: list[dict[str, Any]] = []

    def _open(self) -> Any:
        """The writer, opened once the checkpoint (if any) is loaded: purging what came after it when resuming."""
        if self._writer is None and self._started:
            from torch.utils.tensorboard import SummaryWriter

            resumed = self.resumed_from
            purge_step = None if resumed is None else int(resumed.get("step") or 0)
            self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
            self._step, self._at_step = None, []
            if resumed is not None and resumed.get("step") is not None:
                self._write_values(self._writer, int(resumed["step"]), resumed.get("at_step", []))
        return self._writer

    def resume_state(self) -> dict[str, Any]:
        return {"step": self._step, "at_step": list(self._at_step)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._step = state.get("step")
        self._at_step = list(state.get("at_step", []))

    def write(self, records: list[Record]) -> None:
        writer = self._open()
        if writer is None:
            return
        for record in records:
            self._write_values(writer, int(record.timestamp.batch), [record.data])

    def _write_values(self, writer: Any, step: int, values: list[dict[str, Any]]) -> None:
        if step != self._step:
            self._step, self._at_step = step, []
        for data in values:
            self._at_step.append(data)
            for name, value in data.items():
                if is_number(value):
                    writer.add_scalar(name, value, global_step=step)
                else:
                    text = value if isinstance(value, str) else json.dumps(value)
                    writer.add_text(name, text, global_step=step)

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Writes ``images``: one (C, H, W) image or a (N, C, H, W) batch, floats in [0, 1]."""
        del log_level
        self.flush()  # keep the file in logging order
        writer = self._open()
        if writer is None:
            return
        step = int(timestamp.batch)
        if images.ndim == 4:
            writer.add_images(name, images, global_step=step, dataformats="NCHW")
        else:
            writer.add_image(name, images, global_step=step, dataformats="CHW")

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Writes ``text`` with ``add_text`` at step ``timestamp.batch`` (buffered with the other values)."""
        self.log_metric(timestamp, log_level, {name: text})

    def flush(self) -> None:
        super().flush()
        if self._writer is not None:
            self._writer.flush()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        if self._writer is not None:
            self._writer.close()
            self._writer = None


TensorboardLoggerHparams = hparams_for(TensorboardLogger)
"""See :class:`TensorboardLogger`; the fields are its arguments (YAML key ``tensorboard``)."""
