"""A callback for the kill-and-resume runs of ``composer train`` (tests/datasets/kill_resume.py), registered when
``composer --import`` imports this module: ``KILL_AT=<batch>`` SIGKILLs each rank at the end of that batch; when the
fit ends, rank 0 writes the model's weights, the batches of an epoch and the batch the fit started from to
``FINAL_WEIGHTS``. With ``SAMPLES_LOG=<prefix>``, each rank appends every training batch's samples (epoch, batch,
token ids) as a JSON line to ``<prefix>.rank<N>.jsonl``."""

from __future__ import annotations

import json
import os
import signal

import torch

from composer.config import register
from composer.core import Callback, State
from composer.loggers import Logger


class KillOrSave(Callback):
    """SIGKILLs at batch ``KILL_AT``; saves the weights to ``FINAL_WEIGHTS`` (rank 0) when the fit ends."""

    started_at = 0

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        self.started_at = state.timestamp.batch.value  # after autoresume: the checkpoint's batch

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger
        prefix = os.environ.get("SAMPLES_LOG")
        if prefix:
            line = [state.timestamp.epoch.value, state.timestamp.batch.value, state.batch["input_ids"].tolist()]
            with open(f"{prefix}.rank{state.rank}.jsonl", "a") as log:
                log.write(json.dumps(line) + "\n")

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        if os.environ.get("KILL_AT") == str(state.timestamp.batch.value):
            os.kill(os.getpid(), signal.SIGKILL)

    def fit_end(self, state: State, logger: Logger) -> None:
        del logger
        if state.rank == 0:
            weights = {k: v.clone() for k, v in state.model.state_dict().items()}
            saved = {"weights": weights, "steps_per_epoch": state.steps_per_epoch, "started_at": self.started_at}
            torch.save(saved, os.environ["FINAL_WEIGHTS"])


register("callbacks", "kill_or_save", KillOrSave)
