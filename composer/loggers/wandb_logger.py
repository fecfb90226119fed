"""Logged values in a Weights & Biases run (offline by default: nothing leaves the machine until ``wandb sync``)."""

from __future__ import annotations

import os
import sys
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

__all__ = ["WandBLogger", "WandBLoggerHparams", "is_wandb_available"]

_MODES = ("offline", "online", "disabled", "shared")


def is_wandb_available() -> bool:
    """Whether the ``wandb`` package is installed (``pip install 'opencomposer[loggers]'``).

    Returns:
        bool: True when ``wandb`` can be imported.
    """
    return is_package_available("wandb")


class WandBLogger(OpenedOnFitDestination):
    """Writes logged values to a Weights & Biases run.

    Numbers go to the run's history at step ``timestamp.batch`` (values logged at the same step share a row);
    strings and other values go to the run's config; images become ``wandb.Image``. The run is created at
    ``Event.FIT_START`` (or at the first value logged, when nothing is trained), once any checkpoint is loaded, with
    ``reinit='create_new'`` (several loggers may coexist; the global ``wandb.run`` is not used)
    and finished when the trainer closes, with exit code 1 if training raised. The default ``mode='offline'``
    writes the run under ``dir`` only; upload it later with ``wandb sync``, or pass ``mode='online'`` to stream it.
    W&B's console capture is off, so ``sys.stdout`` is left alone. Needs the ``loggers`` extra.

    A run that resumes from a checkpoint (``autoresume``, or ``load_path`` with the whole state) continues the same
    W&B run: checkpoints save the run's id, and the resumed run calls ``wandb.init(id=<that id>, resume='allow')``
    (an ``id`` or ``resume`` in ``init_params`` wins). It logs by step, from the checkpoint's batch on, so the steps
    the interrupted run logged after its last checkpoint are logged twice. Online, W&B keeps the first value at a
    step and ignores, with a warning, steps below the run's newest one: those steps keep the interrupted run's
    values (the same values when training is deterministic) and the resumed run's history continues after them.
    Offline, each launch writes its own ``offline-run-*-<id>`` folder under the same id; ``wandb sync`` uploads
    them in order into that run, with the same rule.

    Args:
        project (str, optional): The W&B project.
        name (str, optional): The run's display name.
        entity (str, optional): The W&B entity (user or team).
        group (str, optional): The run's group.
        tags (Sequence[str], optional): The run's tags.
        mode (str): ``'offline'``, ``'online'``, ``'disabled'`` or ``'shared'``.
        dir (str | PathLike, optional): The folder under which W&B writes ``wandb/<run>``; default: the current
            folder. Checked when the logger is built.
        init_params (dict, optional): More keyword arguments for ``wandb.init`` (they win over the ones above).
        log_level (LogLevel | str): The most verbose level written (default: BATCH).
        log_interval (str | Time | int): Write BATCH values every this many batches, or EPOCH values every this many
            epochs (``'1ep'``).
        flush_interval (int): Send after this many records are pending.

    Attributes:
        run (wandb.Run | None): The W&B run, from ``FIT_START`` (or the first value logged) until the trainer closes.
        run_id (str | None): The run's id, once created, or restored from a checkpoint.
    """

    def __init__(
        self,
        project: str | None = None,
        *,
        name: str | None = None,
        entity: str | None = None,
        group: str | None = None,
        tags: list[str] | None = None,
        mode: str = "offline",
        dir: str | os.PathLike[str] | None = None,
        init_params: dict[str, Any] | None = None,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
    ) -> None:
        require_package("wandb", "WandBLogger")
        super().__init__(log_level, log_interval, flush_interval)
        if mode not in _MODES:
            raise ValueError(f"mode={mode!r} is not a W&B mode; expected one of {list(_MODES)}.")
        if dir is not None:
            check_writable(dir, "dir", is_dir=True)
        self.init_params: dict[str, Any] = {
            "project": project,
            "name": name,
            "entity": entity,
            "group": group,
            "tags": list(tags) if tags is not None else None,
            "mode": mode,
            "dir": os.fspath(dir) if dir is not None else None,
            "reinit": "create_new",
            **(init_params or {}),
        }
        self.run: Any = None
        self.run_id: str | None = None  # the W&B run's id, once created (saved in checkpoints)

    def resume_state(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.run_id = state.get("run_id")  # the run is resumed at FIT_START

    def _open(self) -> Any:
        """The run, created, or the checkpoint's run resumed, on the first call after INIT."""
        if self.run is not None or not self._started:
            return self.run
        import wandb

        params = dict(self.init_params)
        resumed_id = None if self.resumed_from is None else self.resumed_from.get("run_id")
        if resumed_id is not None and "id" not in params:
            params["id"] = resumed_id
            params.setdefault("resume", "allow")
        if params.get("dir") is not None:
            os.makedirs(params["dir"], exist_ok=True)
        if "settings" not in params:
            params["settings"] = wandb.Settings(console="off")
        self.run = wandb.init(**params)
        self.run_id = self.run.id
        return self.run

    def write(self, records: list[Record]) -> None:
        run = self._open()
        if run is None:
            return
        config: dict[str, Any] = {}
        for record in records:
            numbers = {}
            for name, value in record.data.items():
                if is_number(value):
                    numbers[name] = value
                else:
                    config[name] = value
            if numbers:
                run.log(numbers, step=int(record.timestamp.batch))
        if config:
            run.config.update(config, allow_val_change=True)

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Logs ``images`` (one (C, H, W) image or a (N, C, H, W) batch, floats in [0, 1]) as ``wandb.Image``."""
        del log_level
        self.flush()  # W&B drops a step older than one already logged: keep logging order
        if self._open() is None:
            return
        import wandb

        batch = images if images.ndim == 4 else images[None]
        # wandb.Image takes (H, W, C) arrays.
        pictures = [wandb.Image(image.detach().clamp(0, 1).permute(1, 2, 0).cpu().numpy()) for image in batch]
        self.run.log({name: pictures if len(pictures) > 1 else pictures[0]}, step=int(timestamp.batch))

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Logs ``text`` as a one-cell ``wandb.Table`` (column ``text``) at step ``timestamp.batch``."""
        del log_level
        self.flush()  # keep logging order (W&B drops a step older than one already logged)
        if self._open() is None:
            return
        import wandb

        self.run.log({name: wandb.Table(columns=["text"], data=[[text]])}, step=int(timestamp.batch))

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        if self.run is not None:
            self.run.finish(exit_code=1 if sys.exc_info()[0] is not None else 0)
            self.run = None


WandBLoggerHparams = hparams_for(WandBLogger)
"""See :class:`WandBLogger`; the fields are its arguments (YAML key ``wandb``)."""
