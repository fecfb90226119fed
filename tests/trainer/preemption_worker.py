"""The program each rank runs in the 2-rank preemption tests of tests/trainer/test_preemption.py, under torchrun.

Usage: ``python -m torch.distributed.run --nproc_per_node 2 tests/trainer/preemption_worker.py <scenario> <folder>
<endpoint> <bucket> <ddp moment> <sharded moment>``, a moment being ``<batch>:<event>`` (the batch 1-based). Each rank
saves what it saw to ``<folder>/<scenario><rank>.pt``. Scenarios:

* ``signal``: four runs with ``autoresume``. DDP uninterrupted, then the same with rank 1 alone receiving SIGTERM at
  the DDP moment (every rank must stop after the same batch: the request travels on the periodic check, about every
  ``CHECK_EVERY`` seconds); then FSDP with sharded checkpoints in the S3-compatible store, uninterrupted, then the
  same with rank 0 sending SIGTERM to torchrun at the sharded moment, which passes it on to both workers (the request
  travels on the batch's counts, which these runs all-reduce every batch).
* ``rerun``: the two interrupted commands again, the sharded one on fresh local folders (it resumes from the store).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.core import Callback, DataSpec, Event, State
from composer.core.logging.logger import Logger
from composer.distributed.fsdp import full_model_state_dict
from composer.trainer.preemption import Preempted
from composer.utils import dist
from tests.distributed.test_fsdp_trainer import make_trainer, weights
from tests.trainer import dist_worker as worker
from tests.utils.checkpoint.test_sharded import SHARDED

CHECK_EVERY = 0.05  # seconds between the DDP runs' checks: with STEP_SLEEP, a check every few batches
STEP_SLEEP = 0.02  # seconds each DDP batch sleeps, so that the check's interval is a few batches, not one


class SignalAt(Callback):
    """At ``<batch>:<event>`` (the batch 1-based) sends ``signum`` to ``pid`` once; when that is this process's
    parent (torchrun, which passes it on), it then waits until this process's handler has seen it."""

    def __init__(self, moment: str, signum: signal.Signals, pid: int, trainer: list[Trainer]) -> None:
        batch, self.event = moment.split(":")
        self.batch, self.signum, self.pid, self.trainer = int(batch), signum, pid, trainer
        self.sent = False

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        current = state.timer.batch.value + (0 if event in (Event.BATCH_END, Event.BATCH_CHECKPOINT) else 1)
        if self.sent or event.value != self.event or current != self.batch:
            return
        self.sent = True
        os.kill(self.pid, self.signum)
        deadline = time.monotonic() + 20
        while not self.trainer[0].parallel.stop.requested and time.monotonic() < deadline:
            time.sleep(0.01)


class Sleep(Callback):
    def batch_end(self, state: State, logger: Logger) -> None:
        time.sleep(STEP_SLEEP)


def ddp_run(folder: Path, run_name: str, out: dict[str, Any], moment: str | None = None) -> None:
    """A DDP run of 3 epochs (18 batches) with autoresume, saving every 4 batches; ``moment``: rank 1 gets SIGTERM."""
    rank = dist.get_global_rank()
    holder: list[Trainer] = []
    callbacks: list[Callback] = [Sleep()]
    if moment is not None and rank == 1:
        callbacks.append(SignalAt(moment, signal.SIGTERM, os.getpid(), holder))
    model = worker.make_model(seed=rank)  # wrapping broadcasts rank 0's weights
    trainer = worker.trainer_for(
        model,
        max_duration="3ep",
        save_folder=str(folder / run_name),
        run_name=run_name,
        autoresume=True,
        save_interval="4ba",
        callbacks=callbacks,
    )
    holder.append(trainer)
    trainer.parallel.stop.check_every = CHECK_EVERY
    fit(trainer, out, run_name)
    out[f"{run_name}/weights"] = weights(model)
    trainer.close()


def sharded_run(store: tuple[str, str], prefix: str, local: Path, out: dict[str, Any], moment: str | None) -> None:
    """An FSDP run of 2 epochs (12 batches), sharded checkpoints every 4 batches in ``s3://<bucket>/<prefix>`` (``store``:
    the endpoint and the bucket), written first to ``local``; ``moment``: rank 0 sends SIGTERM to torchrun."""
    rank = dist.get_global_rank()
    holder: list[Trainer] = []
    callbacks = [SignalAt(moment, signal.SIGTERM, os.getppid(), holder)] if moment is not None and rank == 0 else []
    loader = DataLoader(worker.train_data(), batch_size=worker.PER_RANK_BATCH, shuffle=True)
    model = worker.make_model(seed=rank)
    trainer = make_trainer(
        model,
        # Samples counted by a function of its own: the Trainer all-reduces the counts every batch.
        DataSpec(loader, get_num_samples_in_batch=lambda batch: len(batch[0])),
        fsdp_config=SHARDED,
        save_folder=f"s3://{store[1]}/{prefix}",
        save_interval="4ba",
        save_num_checkpoints_to_keep=2,
        storage_options={"endpoint_url": store[0], "retry_budget": 10, "local_folder": str(local)},
        run_name="sharded",
        autoresume=True,
        callbacks=callbacks,
    )
    holder.append(trainer)
    fit(trainer, out, prefix)
    out[f"{prefix}/weights"] = full_model_state_dict(model)
    trainer.close()


def fit(trainer: Trainer, out: dict[str, Any], name: str) -> None:
    """Fits, recording where the run started and, if it was preempted, how."""
    loaded = trainer.checkpointing.loaded_path
    out[f"{name}/resumed_from"] = None if loaded is None else loaded.name
    try:
        trainer.fit()
    except Preempted as error:
        out[f"{name}/preempted"] = {
            "type": type(error).__name__,
            "signal": None if error.signal is None else error.signal.name,
            "batch": error.batch,
            "checkpoint": error.checkpoint,
            "complete": error.complete,
            "message": str(error),
        }


def main() -> None:
    scenario, folder, store, (ddp_moment, sharded_moment) = sys.argv[1], Path(sys.argv[2]), sys.argv[3:5], sys.argv[5:7]
    rank, out = dist.get_global_rank(), {}
    if scenario == "signal":
        ddp_run(folder, "ddp-base", out)
        ddp_run(folder, "ddp", out, ddp_moment)
        sharded_run((store[0], store[1]), "sharded-base", folder / "base", out, None)
        sharded_run((store[0], store[1]), "sharded", folder / "node", out, sharded_moment)
    else:  # the same commands again; a fresh machine for the sharded run: empty local folders
        ddp_run(folder, "ddp", out)
        sharded_run((store[0], store[1]), "sharded", folder / "fresh", out, None)
    torch.save(out, folder / f"{scenario}{rank}.pt")
    worker.end_job()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
