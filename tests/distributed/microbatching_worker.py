"""The program each rank runs in the 2-rank tests of tests/distributed/test_microbatching.py.

Usage: ``python -m torch.distributed.run --nproc_per_node 2 tests/distributed/microbatching_worker.py <scenario> <out_dir>``
with ``<scenario>`` ``ddp`` or ``fsdp``. Only rank 1 runs out of memory; both ranks must end at the same count and
the same weights, those of a run with that count fixed. Then rank 1 runs out of memory even with one sample per
microbatch: both ranks must raise. Each rank writes what it saw to ``<out_dir>/rank<r>.pt``.

``ddp`` (:func:`main_ddp`): rank 1's model runs out of memory above 2 samples per forward pass.

``fsdp`` (:func:`main_fsdp`): every Linear is an FSDP unit, so each forward and backward pass is a chain of
all-gathers (and, on the syncing microbatch, reduce-scatters). Rank 1 runs out of memory at a gate placed *between*
two units: in the forward pass (:class:`ForwardGate`, after the first unit), in the backward pass
(:class:`BackwardGate`, between the second and third units' backward), in evaluation, or once while allocating the
buffer of an all-gather it then never joins (:func:`fail_one_gather_allocation`). Rank 0 goes on to its next FSDP
collective, where it must learn of the failure instead of waiting there for ever.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist
from torch.utils.data import DataLoader

from composer import Trainer
from composer.core import Callback, Event, State
from composer.core.logging.logger import Logger
from composer.distributed.microbatching import MicrobatchTooSmallError
from composer.distributed.oom_agreement import PeerOutOfMemoryError
from composer.loggers import InMemoryLogger
from composer.models import ComposerClassifier
from composer.utils import dist
from tests.common import EventRecorder
from tests.distributed.test_microbatching import OOMClassifier, loader
from tests.trainer.dist_worker import end_job

PER_RANK_BATCH = 8
SEED = 11


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.state.model.state_dict().items()}


def too_small(run: Callable[[], object]) -> str:
    """The error of a run in which rank 1 runs out of memory even with one sample per microbatch."""
    try:
        run()
    except MicrobatchTooSmallError as error:
        return str(error)
    raise AssertionError("the run trained although rank 1 runs out of memory on one sample")


class HeartbeatProgress(Callback):
    """Records the heartbeat's count of forward passes after every batch and evaluation: equal on every rank when
    the failed attempts' passes were taken back."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.progress: list[int] = []

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        beat = None if self.trainer is None else self.trainer.parallel.beat  # None outside fit
        if event in (Event.BATCH_END, Event.EVAL_END) and beat is not None:
            self.progress.append(beat.progress)


def watch_heartbeat(trainer: Trainer) -> None:
    """Gives ``trainer``'s HeartbeatProgress callbacks the trainer whose heartbeat they read."""
    for callback in trainer.state.callbacks:
        if isinstance(callback, HeartbeatProgress):
            callback.trainer = trainer


# ---- DDP ---------------------------------------------------------------------------------------------------------


def run_ddp(
    grad_accum: int | str, limit: int | None, memory: InMemoryLogger | None = None, progress: Callback | None = None
) -> Trainer:
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
        callbacks=[progress] if progress is not None else [],
        dist_timeout=60,
    )
    watch_heartbeat(trainer)
    trainer.fit()
    return trainer


def main_ddp(folder: Path, rank: int) -> dict[str, Any]:
    memory, progress = InMemoryLogger(), HeartbeatProgress()
    auto = run_ddp("auto", limit=2 if rank == 1 else None, memory=memory, progress=progress)
    out: dict[str, Any] = {
        "heartbeat": progress.progress,
        "auto_grad_accum": auto.state.grad_accum,
        "auto_weights": weights(auto),
        "logged": [value for _, _, value in memory.data.get("trainer/grad_accum", [])],
    }
    reference = run_ddp(4, limit=None)
    out["reference_weights"] = weights(reference)
    out["too_small"] = too_small(lambda: run_ddp("auto", limit=0 if rank == 1 else None))
    return out


# ---- FSDP --------------------------------------------------------------------------------------------------------


UNITS = {"module_classes": ["Linear"], "min_params": None}


def out_of_memory(n: int, limit: int) -> torch.cuda.OutOfMemoryError:
    return torch.cuda.OutOfMemoryError(f"CUDA out of memory: {n} samples (limit {limit}).")


class ForwardGate(torch.nn.Module):
    """Runs out of memory on more than ``limit`` samples in a forward pass of the given mode (train or eval)."""

    def __init__(self, limit: int | None, training: bool) -> None:
        super().__init__()
        self.limit, self.when_training = limit, training

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.limit is not None and self.training == self.when_training and x.shape[0] > self.limit:
            raise out_of_memory(x.shape[0], self.limit)
        return x


class _RaiseInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, limit: int) -> torch.Tensor:
        ctx.limit = limit
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        if grad.shape[0] > ctx.limit:
            raise out_of_memory(grad.shape[0], ctx.limit)
        return grad, None


class BackwardGate(torch.nn.Module):
    """Runs out of memory in the backward pass through it, on more than ``limit`` samples."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.limit is None or not self.training else _RaiseInBackward.apply(x, self.limit)


def make_model(forward: int | None = None, backward: int | None = None, evaluation: int | None = None) -> Any:
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        ForwardGate(forward, training=True),
        ForwardGate(evaluation, training=False),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(16, 16),
        BackwardGate(backward),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 3),
    )
    return ComposerClassifier(module, num_classes=3)


def fail_one_gather_allocation(trainer: Trainer) -> None:
    """On rank 1, the second all-gather buffer FSDP allocates (the middle unit's, in the first forward pass) runs out
    of memory: the rank fails after passing its last checkpoint, before joining the gather it allocates for."""
    from torch.distributed.fsdp import FSDPModule

    if dist.get_global_rank() != 1:
        return
    unit = next(m for m in trainer.state.model.modules() if isinstance(m, FSDPModule) and m is not trainer.state.model)
    comm = unit._get_fsdp_state()._fsdp_param_groups[0]._all_gather_comm  # shared by every unit
    allocate, calls = comm.allocate, []

    def failing(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(1)
        if len(calls) == 2:
            raise out_of_memory(PER_RANK_BATCH, 0)
        return allocate(*args, **kwargs)

    comm.allocate = failing


def run_fsdp(
    grad_accum: int | str, rank_1_limits: dict[str, int], gather_fails: bool = False, **kwargs: Any
) -> Trainer:
    model = make_model(**(rank_1_limits if dist.get_global_rank() == 1 else {}))
    trainer = Trainer(
        model=model,
        train_dataloader=loader(batch_size=PER_RANK_BATCH, num_samples=64),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        max_duration="1ep",
        grad_accum=grad_accum,
        fsdp_config=UNITS,
        seed=SEED,
        progress_bar=False,
        dist_timeout=30,  # a rank left in a collective fails the job within the test's time
        **kwargs,
    )
    if gather_fails:
        fail_one_gather_allocation(trainer)
    watch_heartbeat(trainer)
    count_checkpoints(trainer)
    trainer.fit()
    return trainer


COUNTS = {"collectives": 0, "checkpoints": 0, "stopped": 0}


def count_collectives() -> None:
    """Counts every FSDP all-gather and reduce-scatter this rank runs (FSDP's communication calls these two)."""
    for name in ("all_gather_single", "reduce_scatter_single"):
        collective = getattr(torch_dist, name)

        def counted(*args: Any, _collective: Any = collective, **kwargs: Any) -> Any:
            COUNTS["collectives"] += 1
            return _collective(*args, **kwargs)

        setattr(torch_dist, name, counted)


def count_checkpoints(trainer: Trainer) -> None:
    """Counts the checkpoints of ``trainer``'s agreement, and those that stopped the attempt (no collective after)."""
    for key in COUNTS:
        COUNTS[key] = 0
    agreement = trainer.parallel.oom_agreement
    checkpoint = agreement.checkpoint

    def counted() -> None:
        COUNTS["checkpoints"] += 1
        try:
            checkpoint()
        except PeerOutOfMemoryError:
            COUNTS["stopped"] += 1
            raise

    agreement.checkpoint = counted  # type: ignore[method-assign]


def full_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.full_tensor() for k, v in weights(trainer).items()}  # type: ignore[attr-defined]


def main_fsdp(folder: Path, rank: int) -> dict[str, Any]:
    count_collectives()
    out: dict[str, Any] = {}
    for where, limit in [("forward", 2), ("backward", 4), ("gather", 0)]:
        memory, recorder, progress = InMemoryLogger(), EventRecorder(), HeartbeatProgress()
        limits = {} if where == "gather" else {where: limit}
        auto = run_fsdp(
            "auto", limits, gather_fails=where == "gather", loggers=[memory], callbacks=[recorder, progress]
        )
        out[where] = {
            "heartbeat": progress.progress,
            "grad_accum": auto.state.grad_accum,
            "weights": full_weights(auto),
            "logged": [value for _, _, value in memory.data.get("trainer/grad_accum", [])],
            "batch_events": [recorder.events.count(e) for e in (Event.BATCH_START, Event.AFTER_TRAIN_BATCH)],
            **COUNTS,
        }
        out[where]["reference"] = full_weights(run_fsdp(out[where]["grad_accum"], {}))
    # Evaluation: 25 samples in batches of 6, 13 on rank 0 (6, 6, 1) and 12 on rank 1 (6, 6), which pads once;
    # rank 1 runs out of memory above 2 samples, so both ranks go to 2 parts, then 4 (of 2, 2, 1, 1).
    # The same evaluation also runs inside fit, at its end, where the heartbeat counts its forward passes.
    memory, progress = InMemoryLogger(), HeartbeatProgress()
    evaluated = run_fsdp(
        "auto",
        {"evaluation": 2},
        loggers=[memory],
        callbacks=[progress],
        eval_dataloader=loader(batch_size=6, num_samples=25, seed=3),
        eval_interval="1ep",
    )
    out["eval_heartbeat"] = progress.progress
    out["eval"] = evaluated.eval(loader(batch_size=6, num_samples=25, seed=3))
    out["eval_logged"] = [value for _, _, value in memory.data.get("trainer/eval_microbatches/eval", [])]
    plain = run_fsdp(1, {})
    plain.state.model.load_state_dict(evaluated.state.model.state_dict())
    out["eval_reference"] = plain.eval(loader(batch_size=6, num_samples=25, seed=3))
    out["too_small"] = too_small(lambda: run_fsdp("auto", {"forward": 0}))
    hopeless = run_fsdp("auto", {"evaluation": 0})  # rank 1 cannot evaluate even one sample
    out["eval_too_small"] = too_small(lambda: hopeless.eval(loader(batch_size=6, num_samples=25, seed=3)))
    return out


def main() -> None:
    scenario, folder = sys.argv[1], Path(sys.argv[2])
    rank = dist.get_global_rank()
    out = {"ddp": main_ddp, "fsdp": main_fsdp}[scenario](folder, rank)
    torch.save(out, folder / f"rank{rank}.pt")
    end_job()


if __name__ == "__main__":
    main()
