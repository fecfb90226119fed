"""A callback for the streaming kill-and-resume test, registered when ``composer --import`` imports this module:
``KILL_AT=<batch>`` SIGKILLs the process at the end of that batch; at the end of the fit it writes the model's
weights to ``FINAL_WEIGHTS``."""

from __future__ import annotations

import os
import signal

import torch

from composer.config import register
from composer.core import Callback, State
from composer.loggers import Logger


class KillOrSave(Callback):
    """SIGKILLs at batch ``KILL_AT``; saves the weights to ``FINAL_WEIGHTS`` when the fit ends."""

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        if os.environ.get("KILL_AT") == str(state.timestamp.batch.value):
            os.kill(os.getpid(), signal.SIGKILL)

    def fit_end(self, state: State, logger: Logger) -> None:
        del logger
        torch.save({k: v.clone() for k, v in state.model.state_dict().items()}, os.environ["FINAL_WEIGHTS"])


register("callbacks", "kill_or_save", KillOrSave)
