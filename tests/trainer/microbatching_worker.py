"""The program each rank runs in the 2-rank test of tests/trainer/test_microbatching.py.

Usage: ``python -m torch.distributed.run --nproc_per_node 2 tests/trainer/microbatching_worker.py auto <out_dir>``.
Only rank 1's model runs out of memory (above 2 samples per forward): both ranks must end at the same count and the
same weights, those of a run with that count fixed. Then rank 1 runs out of memory even with one sample per
microbatch: both ranks must raise. Each rank writes what it saw to ``<out_dir>/rank<r>.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.loggers import InMemoryLogger
from composer.trainer.microbatching import MicrobatchTooSmallError
from composer.utils import dist
from tests.trainer.dist_worker import end_job
from tests.trainer.test_microbatching import OOMClassifier, loader

PER_RANK_BATCH = 8
SEED = 11


def run(grad_accum: int | str, limit: int | None, memory: InMemoryLogger | None = None) -> Trainer:
    model = OOMClassifier(limit=limit, batchnorm=False)
    data: DataLoader = loader(batch_size=PER_RANK_BATCH, num_samples=64)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        max_duration="1ep",
        grad_accum=grad_accum,
        seed=SEED,
        progress_bar=False,
        loggers=[memory] if memory is not None else [],
        dist_timeout=60,
    )
    trainer.fit()
    return trainer


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.state.model.state_dict().items()}


def main() -> None:
    folder = Path(sys.argv[2])
    rank = dist.get_global_rank()
    memory = InMemoryLogger()
    auto = run("auto", limit=2 if rank == 1 else None, memory=memory)
    out: dict[str, Any] = {
        "auto_grad_accum": auto.state.grad_accum,
        "auto_weights": weights(auto),
        "logged": [value for _, _, value in memory.data.get("trainer/grad_accum", [])],
    }
    reference = run(4, limit=None)
    out["reference_weights"] = weights(reference)
    try:
        run("auto", limit=0 if rank == 1 else None)
    except MicrobatchTooSmallError as error:
        out["too_small"] = str(error)
    torch.save(out, folder / f"rank{rank}.pt")
    end_job()


if __name__ == "__main__":
    main()
