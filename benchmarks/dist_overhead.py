"""Per-step communication overhead of the Trainer's DistributedDataParallel on 2 CPU ranks.

The MLP 512-1024-1024-10 (1.59 M parameters: 6.3 MB of fp32 gradients), per-rank batch 64, plain SGD, in-memory
data, one thread per process. The 1-rank baseline is the Trainer in this process, not launched (no DDP); the 2-rank
figure is the same Trainer under ``torchrun --nproc_per_node 2`` (gloo), where each step all-reduces the gradients
and the batch's sample count. Both time ``fit`` over ``--steps`` steps per round, after a warm-up, and report the
median over ``--rounds`` rounds; baseline rounds run before and after the 2-rank job, so that drift in the
machine's speed shows. The overhead is the 2-rank median step time minus the 1-rank one.

To tell what that overhead is made of, the ranks also time, in the same interleaved rounds, a hand-written loop over
torch's ``DistributedDataParallel`` (what the Trainer should cost no more than) and a hand-written loop without DDP
(both ranks computing at once, no communication: what sharing the machine's cores and memory costs), both over the
same kind of DataLoader, plus a bare ``all_reduce`` of a tensor as large as the gradients and one of the 3 numbers
the Trainer reduces per batch (loss, samples, tokens).

Last, the cost of agreeing on the batch at which a SIGTERM stops every rank (``composer.trainer.preemption``): the
same Trainer in interleaved rounds (the order rotating) with no agreement at all (as before preemption was handled),
as shipped (these even batches carry no counts' all-reduce, so a check about every second), and with a check after
every batch (the naive way: one more all-reduce per step); the figure is each one's median per-round ratio to the
first. Measured with ``--steps 60 --rounds 15`` (2026-12-04, 2 cores shared with other work, at commit a46b71a): as
shipped 0.9989, a check every batch 1.0589 (a step of 43 ms; an all-reduce of 3 numbers takes 0.43 ms).

Run:  .venv/bin/python benchmarks/dist_overhead.py [--steps 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _torchrun import torchrun_command, worker_env  # benchmarks/_torchrun.py, next to this script
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.models import MLP, ComposerClassifier
from composer.utils import dist

__all__: list[str] = []

BATCH = 64
WIDTHS = (512, (1024, 1024), 10)


def make_data(steps_per_epoch: int) -> TensorDataset:
    """Random inputs and labels: ``steps_per_epoch`` batches for each rank."""
    g = torch.Generator().manual_seed(0)
    num_samples = steps_per_epoch * BATCH * dist.get_world_size()
    x = torch.randn(num_samples, WIDTHS[0], generator=g)
    return TensorDataset(x, torch.randint(0, WIDTHS[2], (num_samples,), generator=g))


def make_trainer(steps_per_epoch: int) -> Trainer:
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(*WIDTHS), num_classes=WIDTHS[2])
    return Trainer(
        model=model,
        train_dataloader=DataLoader(make_data(steps_per_epoch), batch_size=BATCH),  # the Trainer shards it
        max_duration="1ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        device="cpu",
        progress_bar=False,
        seed=0,
    )


def step_times_ms(trainer: Trainer, steps: int, rounds: int, warm_up: bool = True) -> list[float]:
    """Per-step times (ms) of ``rounds`` calls of ``fit`` for ``steps`` more batches each."""
    if warm_up:
        trainer.fit(duration="10ba")  # allocator, kernels, DDP's buckets
    times = []
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        trainer.fit(duration=f"{steps}ba")
        times.append((time.perf_counter() - start) / steps * 1e3)
    return times


# How the ranks agree on stopping after a signal: None, none at all; else StopAgreement.check_every (seconds).
AGREEMENTS = {"no agreement (before)": None, "as shipped (a check about every 1 s)": 1.0, "a check every batch": 0.0}


def agreement_step_times(trainer: Trainer, steps: int, rounds: int) -> dict[str, list[float]]:
    """Per-step times (ms) of ``fit`` under each way of agreeing on a stop, one per round each, in rotating order."""
    stop, names = trainer.parallel.stop, list(AGREEMENTS)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            every = AGREEMENTS[name]
            stop.launched, stop.check_every = every is not None, every or 0.0  # not launched: it never communicates
            times[name] += step_times_ms(trainer, steps, rounds=1, warm_up=False)
    stop.launched, stop.check_every = True, 1.0
    return times


def hand_loop_ms(ddp: bool, steps: int) -> float:
    """One round of a hand-written loop (with or without torch's DDP) on the same model and batch size."""
    torch.manual_seed(0)
    model = MLP(*WIDTHS)
    forward = DistributedDataParallel(model) if ddp else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = make_data(steps + 10)
    loader = DataLoader(data, batch_size=BATCH, sampler=dist.get_sampler(data, shuffle=False))
    batches = iter(loader)

    def run(n: int) -> None:
        for _, (x, y) in zip(range(n), batches):
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(forward(x), y).backward()
            optimizer.step()

    run(10)
    dist.barrier()
    start = time.perf_counter()
    run(steps)
    return (time.perf_counter() - start) / steps * 1e3


def all_reduce_ms(num_elements: int, rounds: int) -> list[float]:
    tensor = torch.ones(num_elements)
    times = []
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def worker(args: argparse.Namespace) -> None:
    """One rank of the 2-rank job: writes its step and all-reduce times to ``args.out`` (rank 0)."""
    trainer = make_trainer(steps_per_epoch=args.steps * (4 * args.rounds + 1))
    steps, hand_ddp, hand_local = [], [], []
    for _ in range(args.rounds):
        steps += step_times_ms(trainer, args.steps, rounds=1, warm_up=not steps)
        hand_ddp.append(hand_loop_ms(ddp=True, steps=args.steps))
        hand_local.append(hand_loop_ms(ddp=False, steps=args.steps))
    num_params = sum(p.numel() for p in trainer.state.model.parameters())
    reduces = all_reduce_ms(num_params, rounds=5 * args.rounds)
    counts = all_reduce_ms(3, rounds=50 * args.rounds)  # the batch's loss, samples and tokens
    times = {"steps": steps, "hand_ddp": hand_ddp, "hand_local": hand_local, "all_reduce": reduces, "counts": counts}
    times["agreement"] = agreement_step_times(trainer, args.steps, args.rounds)  # type: ignore[assignment]
    gathered = dist.all_gather_object({**times, "params": num_params})
    if dist.get_global_rank() == 0:
        Path(args.out).write_text(json.dumps(gathered))
    trainer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if "WORLD_SIZE" in os.environ:
        worker(args)
        return

    baseline = make_trainer(steps_per_epoch=args.steps * (2 * args.rounds + 2))
    before = step_times_ms(baseline, args.steps, args.rounds)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "times.json"
        command = torchrun_command(__file__, f"--steps={args.steps}", f"--rounds={args.rounds}", f"--out={out}")
        subprocess.run(command, check=True, env=worker_env())
        ranks = json.loads(out.read_text())
    after = step_times_ms(baseline, args.steps, args.rounds)
    baseline.close()

    one_rank = statistics.median(before + after)
    two_rank = statistics.median(ranks[0]["steps"])
    megabytes = ranks[0]["params"] * 4 / 2**20
    print(f"1-rank step (no DDP), median of {2 * args.rounds} rounds: {one_rank:.2f} ms")
    print(f"  rounds before: {[round(t, 2) for t in before]}, after: {[round(t, 2) for t in after]}")
    print(f"2-rank DDP step (gloo), median of {args.rounds} rounds: {two_rank:.2f} ms")
    print(f"  rank 0 rounds: {[round(t, 2) for t in ranks[0]['steps']]}")
    print(f"  rank 1 rounds: {[round(t, 2) for t in ranks[1]['steps']]}")
    print(f"per-step communication overhead (2-rank minus 1-rank): {two_rank - one_rank:.2f} ms")
    hand_ddp, hand_local = statistics.median(ranks[0]["hand_ddp"]), statistics.median(ranks[0]["hand_local"])
    print("what it is made of (rank 0, medians of the interleaved rounds):")
    print(f"  hand-written loop, 2 ranks at once, no DDP: {hand_local:.2f} ms (sharing the machine)")
    print(f"  hand-written loop over torch DDP:           {hand_ddp:.2f} ms (torch's DDP on gloo)")
    print(f"  Trainer minus hand-written DDP loop:        {two_rank - hand_ddp:.2f} ms (the Trainer's own share)")
    print(f"  bare all_reduce of {megabytes:.1f} MB:               {statistics.median(ranks[0]['all_reduce']):.2f} ms")
    print(f"  all_reduce of 3 numbers (per-batch counts):  {statistics.median(ranks[0]['counts']):.3f} ms")
    agreement = ranks[0]["agreement"]
    baseline = agreement["no agreement (before)"]
    print("agreeing on the batch a SIGTERM stops at (rank 0, interleaved rounds):")
    for name, values in agreement.items():
        ratio = statistics.median(t / b for t, b in zip(values, baseline, strict=True))
        print(f"  {name:<38} {statistics.median(values):.2f} ms per step, median ratio {ratio:.4f}")


if __name__ == "__main__":
    main()
