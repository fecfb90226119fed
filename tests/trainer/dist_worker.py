"""The program each rank runs in the multi-process tests of tests/distributed/test_distributed.py.

Usage: ``python -m torch.distributed.run --nproc_per_node 2 tests/trainer/dist_worker.py <scenario> <out_dir>``
(or two plain processes with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set). Each rank writes what it saw to
``<out_dir>/rank<r>.pt`` for the test to compare with single-process references. Scenarios:

* ``train``: several runs in one job (plain with evaluation and checkpoints, grad_accum=3, multi_auto_sync, a
  resume from the first checkpoint, LayerFreezing, ChannelsLast on a convolution), counting DDP all-reduces with a
  communication hook; then the collectives of composer.utils.dist.
* ``fault``: rank 1 raises at batch 3; ``hang``: rank 1 stops answering at batch 3 (dist_timeout=5): the
  Trainer's heartbeat ends both processes after dist_timeout, naming rank 1; ``kill``: rank 1 dies (SIGKILL) at
  batch 3, most likely having published no heartbeat since batch 0 (they are a second apart).

The data and models are built here, and imported by the test for its references.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import ChannelsLast, LayerFreezing
from composer.core import Callback
from composer.loggers import InMemoryLogger
from composer.models import ComposerClassifier
from composer.profiler.profiler import Profiler
from composer.utils import dist
from tests.common import SimpleModel

SEED = 17
PER_RANK_BATCH = 4
NUM_TRAIN = 48  # 6 batches of 8 per epoch on one rank, of 4 per rank on two
NUM_EVAL = 37  # odd: an unpadded split gives rank 0 19 samples and rank 1 18
EVAL_BATCH = 9  # rank 0 evaluates 3 batches, rank 1 2
LR, MOMENTUM = 0.1, 0.9
FAULT_BATCH = 3


# The files the plain run's checkpoints (save_interval="4ba", 12 batches over 2 epochs) leave in its folder.
# The final state (batch 12) is saved once, at its batch, not again when the epoch ends.
CHECKPOINT_FILES = ["ep0-ba4-rank0.pt", "ep1-ba12-rank0.pt", "ep1-ba8-rank0.pt", "latest-rank0.pt"]


def make_data(num_samples: int, seed: int) -> TensorDataset:
    """Seeded Gaussian features with labels from a fixed linear map (as tests.common.make_dataloader)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, 8, generator=g)
    w = torch.randn(8, 3, generator=torch.Generator().manual_seed(1234))
    return TensorDataset(x, (x @ w).argmax(dim=1))


def train_data() -> TensorDataset:
    return make_data(NUM_TRAIN, seed=0)


def eval_data() -> TensorDataset:
    return make_data(NUM_EVAL, seed=1)


def make_model(seed: int) -> SimpleModel:
    torch.manual_seed(seed)
    return SimpleModel()


def make_conv_model(seed: int) -> ComposerClassifier:
    """A convolution (whose 4d weight ChannelsLast converts) and a linear head, for 3x8x8 images."""
    torch.manual_seed(seed)
    layers = [torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    return ComposerClassifier(torch.nn.Sequential(*layers, torch.nn.Linear(4, 3)), num_classes=3)


def image_loader(batch_size: int = PER_RANK_BATCH, sampler: Any = None) -> DataLoader:
    g = torch.Generator().manual_seed(5)
    images = TensorDataset(torch.randn(32, 3, 8, 8, generator=g), torch.randint(0, 3, (32,), generator=g))
    return DataLoader(images, batch_size=batch_size, shuffle=sampler is None, sampler=sampler)


def sgd(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def count_allreduces(trainer: Trainer) -> list[int]:
    """Registers a DDP communication hook that counts the gradient all-reduces (one per bucket: this model has one)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    count = [0]

    def hook(state, bucket):  # type: ignore[no-untyped-def]  (DDP checks the annotations: leave them out)
        count[0] += 1
        return allreduce_hook(state, bucket)

    assert trainer.ddp_model is not None
    trainer.ddp_model.register_comm_hook(None, hook)
    return count


def trainer_for(model: SimpleModel, **kwargs: Any) -> Trainer:
    kwargs.setdefault("train_dataloader", DataLoader(train_data(), batch_size=PER_RANK_BATCH, shuffle=True))
    kwargs.setdefault("max_duration", "2ep")
    kwargs.setdefault("progress_bar", False)
    return Trainer(model=model, optimizers=sgd(model), seed=SEED, dist_timeout=30, **kwargs)


def run_train(out: dict[str, Any], folder: Path) -> None:
    rank = dist.get_global_rank()  # from the environment: the Trainer creates the process group
    # Each rank builds its model from its own seed: wrapping must broadcast rank 0's weights. A dropout mask drawn
    # after construction shows that each rank draws its own random numbers.
    memory = InMemoryLogger()
    model = make_model(seed=rank)
    trainer = trainer_for(
        model,
        eval_dataloader=DataLoader(eval_data(), batch_size=EVAL_BATCH),
        save_folder=str(folder / "checkpoints"),
        save_interval="4ba",
        progress_bar=True,
        log_to_console=True,
        loggers=[memory],
    )
    out["initial"] = weights(model)
    out["seed"], out["state_seed"] = trainer.seed, trainer.state.seed
    out["num_threads"] = torch.get_num_threads()
    out["mask"] = torch.nn.functional.dropout(torch.ones(64), 0.5)
    out["destinations"] = [type(d).__name__ for d in trainer.logger.destinations]
    out["train_sampler"] = type(trainer.state.train_dataloader.sampler).__name__  # type: ignore[union-attr]
    out["eval_sampler"] = type(trainer.state.evaluators[0].dataloader.dataloader.sampler).__name__  # type: ignore[attr-defined]
    out["find_unused"] = trainer.ddp_model.find_unused_parameters  # type: ignore[union-attr]
    count = count_allreduces(trainer)
    trainer.fit()
    out["plain"] = {
        "weights": weights(model),
        "allreduces": count[0],
        "batches": int(trainer.state.timer.batch),
        "samples": int(trainer.state.timer.sample),
        "losses": memory.values("loss/train"),
        "logged_eval": memory.values("metrics/eval/Accuracy"),
    }
    out["eval"] = trainer.eval()
    out["eval_batches"] = sum(1 for _ in trainer.state.evaluators[0].dataloader.dataloader)
    trainer.close()

    model = make_model(seed=rank)
    trainer = trainer_for(model, grad_accum=3)
    count = count_allreduces(trainer)
    trainer.fit()
    out["accum3"] = {"weights": weights(model), "allreduces": count[0], "batches": int(trainer.state.timer.batch)}

    model = make_model(seed=rank)
    trainer = trainer_for(model, grad_accum=3, ddp_sync_strategy="multi_auto_sync", max_duration="2ba")
    count = count_allreduces(trainer)
    trainer.fit()
    out["multi"] = {"allreduces": count[0], "batches": int(trainer.state.timer.batch)}

    # Batches the Trainer cannot shard (a list) and of a different size on each rank: counted with an all-reduce.
    model = make_model(seed=rank)
    x, y = train_data().tensors
    size = PER_RANK_BATCH - rank
    batches = [(x[i : i + size], y[i : i + size]) for i in range(0, 3 * size, size)]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "train_dataloader is a list")
        trainer = trainer_for(model, train_dataloader=batches, max_duration="1ep")
    trainer.fit()
    out["uneven"] = {"batches": int(trainer.state.timer.batch), "samples": int(trainer.state.timer.sample)}

    model = make_model(seed=100 + rank)  # the checkpoint must overwrite these weights
    trainer = trainer_for(model, load_path=folder / "checkpoints" / "ep0-ba4-rank0.pt")
    out["resumed_at"] = int(trainer.state.timer.sample)
    trainer.fit()
    out["resume"] = {"weights": weights(model), "samples": int(trainer.state.timer.sample)}

    # autoresume: rank 0 picks the newest checkpoint in the folder (here the one of batch 4), every rank loads it.
    auto = folder / "autoresume"
    if rank == 0:
        auto.mkdir()
        shutil.copy(folder / "checkpoints" / "ep0-ba4-rank0.pt", auto / "ep0-ba4-rank0.pt")
    dist.barrier()
    model = make_model(seed=100 + rank)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The checkpoint holds state for callbacks")
        trainer = trainer_for(model, save_folder=str(auto), run_name="auto", autoresume=True)
    out["autoresumed_from"] = str(trainer.checkpointing.loaded_path)
    trainer.fit()
    out["autoresume"] = {"weights": weights(model)}

    model = make_model(seed=rank)
    trainer = trainer_for(model, algorithms=[LayerFreezing(freeze_start=0.5)], grad_accum=2, max_duration="4ep")
    out["freeze_find_unused"] = trainer.ddp_model.find_unused_parameters  # type: ignore[union-attr]
    trainer.fit()
    out["freeze"] = {"weights": weights(model), "requires_grad": [p.requires_grad for p in model.parameters()]}

    # ChannelsLast converts the weights at FIT_START, after DDP wrapped the model: the Trainer wraps it anew, with
    # the communication hook, so that no gradient is copied for mismatched strides (PyTorch's warning).
    model = make_conv_model(seed=rank)
    trainer = trainer_for(model, train_dataloader=image_loader(), max_duration="4ba", algorithms=[ChannelsLast()])
    count, wrapper = count_allreduces(trainer), trainer.ddp_model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit()
    out["channels_last"] = {
        "weights": weights(model),
        "allreduces": count[0],
        "rewrapped": trainer.ddp_model is not wrapper,
        "warnings": [str(w.message) for w in caught if "stride" in str(w.message)],
        "channels_last": model.module[0].weight.is_contiguous(memory_format=torch.channels_last),
    }

    # The profiler: each rank writes its own trace and summary (tests/profiler/test_profiler.py).
    model = make_model(seed=rank)
    profiler = Profiler(wait=0, warmup=1, active=2, folder=str(folder / "profile"), print_summary=False)
    trainer = trainer_for(model, max_duration="3ba", profiler=profiler)
    trainer.fit()
    assert trainer.profiler is not None
    out["profile"] = {"traces": [path.name for path in trainer.profiler.traces]}


def run_dist_utilities(out: dict[str, Any]) -> None:
    """composer.utils.dist across the ranks (the group exists: the Trainer created it)."""
    rank = dist.get_global_rank()
    value = torch.tensor([rank + 2.0])
    out["all_reduce"] = {op: dist.all_reduce(value.clone(), op).item() for op in ("sum", "min", "max", "product")}
    out["broadcast"] = dist.broadcast(torch.tensor([10 * rank]), src=1).item()
    out["all_gather"] = [t.item() for t in dist.all_gather(torch.tensor([rank]))]
    out["all_gather_object"] = dist.all_gather_object({"rank": rank})
    out["broadcast_object_list"] = dist.broadcast_object_list([f"from rank {rank}"])
    dist.barrier()
    out["ranks"] = {
        "global": dist.get_global_rank(),
        "local": dist.get_local_rank(),
        "world": dist.get_world_size(),
        "local_world": dist.get_local_world_size(),
        "node": dist.get_node_rank(),
    }
    out["sampler"] = list(dist.get_sampler(list(range(10)), shuffle=True, seed=3))


class FailAt(Callback):
    """On rank 1, at batch FAULT_BATCH: raises (``fault``), stops answering (``hang``) or dies (``kill``)."""

    def __init__(self, how: str) -> None:
        self.how = how

    def batch_start(self, state: Any, logger: Any) -> None:
        del logger
        if state.rank == 1 and int(state.timer.batch) == FAULT_BATCH:
            print(f"FAILING AT {time.time():.3f}", file=sys.stderr, flush=True)
            if self.how == "hang":
                time.sleep(600)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure at batch {FAULT_BATCH}")


def end_job() -> None:
    """An orderly end of a worker: its Trainers closed, then every rank waits for the others, then the process group
    goes. A rank that exits with the group alive while another still uses it (rank 0 also hosts the store) can abort
    at interpreter exit ("terminate called without an active exception")."""
    gc.collect()  # Trainers close when collected, not at interpreter exit
    dist.barrier()
    torch_dist.destroy_process_group()


def main() -> None:
    scenario, folder = sys.argv[1], Path(sys.argv[2])
    if scenario in ("fault", "hang", "kill"):
        timeout = 5.0 if scenario == "hang" else 20.0
        model = make_model(seed=0)
        trainer = Trainer(
            model=model,
            train_dataloader=DataLoader(train_data(), batch_size=PER_RANK_BATCH),
            optimizers=sgd(model),
            max_duration="10ep",
            callbacks=[FailAt(scenario)],
            progress_bar=False,
            dist_timeout=timeout,
        )
        trainer.fit()
        return
    out: dict[str, Any] = {}
    run_train(out, folder)
    run_dist_utilities(out)
    torch.save(out, folder / f"rank{dist.get_global_rank()}.pt")
    end_job()


if __name__ == "__main__":
    main()
