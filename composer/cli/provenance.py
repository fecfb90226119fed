"""Which checkpoint a command's Trainer loaded, in one line: where it is, and the epoch and batch it holds.

``composer eval`` names the checkpoint it scored; ``composer train`` with ``autoresume`` names the one it resumed from
and whether it came from a local folder or from the object store.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.trainer import Trainer

__all__ = ["checkpoint_time", "resumption_line"]


def checkpoint_time(trainer: Trainer, weights_only: bool) -> str:
    """``'epoch E, batch B'`` of the checkpoint the Trainer loaded: the timer it restored, or with ``weights_only``
    (which restores no timer) the one the file holds.

    Args:
        trainer (Trainer): A Trainer built with ``load_path`` or ``autoresume``.
        weights_only (bool): Whether only the weights were loaded.

    Returns:
        str: The epoch and batch, or why there are none (a checkpoint saved with its weights only).
    """
    if not weights_only:
        timer = trainer.state.timer
        return f"epoch {int(timer.epoch)}, batch {int(timer.batch)}"
    from composer.utils.checkpoint import read_checkpoint

    loaded = trainer.checkpointing.loaded_path
    saved = read_checkpoint(loaded)["state"].get("timer") if loaded is not None and loaded.exists() else None
    if saved is None:
        return "saved with its weights only: no epoch or batch recorded"
    return f"epoch {saved['epoch']}, batch {saved['batch']}"


def resumption_line(trainer: Trainer) -> str | None:
    """``'autoresume: resumed from WHERE (epoch E, batch B), from the store'`` (or ``'from the local folder'``) when
    ``autoresume`` found a checkpoint of the run; None when it did not (a fresh start, or ``load_path``).

    Args:
        trainer (Trainer): The Trainer, built (the checkpoint is loaded by its constructor).

    Returns:
        str | None: The line to print.
    """
    checkpointing = trainer.checkpointing
    loaded = checkpointing.loaded_path
    if not checkpointing.autoresume or loaded is None:
        return None
    remote = checkpointing.remote
    folder = Path(checkpointing.save_folder or "") if remote is None else remote.local_folder
    try:
        name = loaded.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return None  # not one of the run's checkpoints: autoresume found none and load_path was loaded
    where, origin = (str(loaded), "the local folder") if remote is None else (str(remote.url.join(name)), "the store")
    return f"autoresume: resumed from {where} ({checkpoint_time(trainer, False)}), from {origin}"
