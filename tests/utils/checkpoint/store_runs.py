"""The runs the store tests train (against moto's S3 server on loopback, tests/common/s3_server.py), and the
callbacks that time their saves and act at chosen batches (a store that hangs: tests/common/store_proxy.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from composer import Callback, Trainer
from composer.callbacks import CheckpointSaver
from tests.common import SimpleModel, make_dataloader
from tests.common.s3_server import S3Server

BUDGET = 2.0  # retry_budget of faults_trainer, in seconds
KEEP_LOCAL = r"on_upload_failure='keep_local': training goes on"


def options(server: S3Server, local_folder: Path, **more) -> dict:
    return {"endpoint_url": server.endpoint_url, "local_folder": str(local_folder), "retry_budget": 5, **more}


def remote_trainer(save_folder=None, max_duration="2ep", model=None, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = model if model is not None else SimpleModel()
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        save_folder=save_folder,
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def faults_trainer(save_folder: str, local: Path, endpoint_url: str, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),  # 4 batches per epoch
        max_duration=kwargs.pop("max_duration", "16ba"),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        save_folder=save_folder,
        save_interval="2ba",
        save_num_checkpoints_to_keep=2,
        storage_options={"endpoint_url": endpoint_url, "local_folder": str(local), "retry_budget": BUDGET},
        run_name="faults",
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def wait_for_uploads(state) -> None:
    for callback in state.callbacks:
        if isinstance(callback, CheckpointSaver):
            callback.destination.wait()


class At(Callback):
    """At the end of the given batches: waits until no upload is pending, then calls the action."""

    def __init__(self, actions: dict[int, Callable[[], object]]) -> None:
        self.actions = actions

    def batch_end(self, state, logger):
        action = self.actions.get(state.timer.batch.value)
        if action is not None:
            wait_for_uploads(state)
            action()


class SaveTimes(Callback):
    """How long each save kept the training thread (from BATCH_CHECKPOINT, where the saver runs after this
    callback, to the next BATCH_START)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.durations: list[float] = []

    def batch_checkpoint(self, state, logger):
        self.started = time.monotonic()

    def batch_start(self, state, logger):
        if self.started is not None:
            self.durations.append(time.monotonic() - self.started)
            self.started = None


def local_checkpoints(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ep*-ba*-rank0.pt"))
