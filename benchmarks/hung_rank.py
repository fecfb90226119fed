"""How long a torchrun job takes to end when one rank stops answering, and whether the error names that rank.

Each run launches ``torchrun --nproc_per_node 2`` on this script: two CPU ranks (gloo, one thread each) train a small
MLP with the Trainer, ``dist_timeout=--timeout``; at batch ``--hang-batch`` rank 1 sleeps for ever inside a callback
(a stand-in for a deadlock or a stuck read). The parent notes the moment rank 1 stops (it prints the time) and the
moment ``torchrun`` exits, and reports the median, over ``--runs`` runs, of that time and of what it exceeds
``dist_timeout`` by. It also checks, for each run, that the output names rank 1 as the rank that stopped answering,
and that no worker process is left once ``torchrun`` has exited (each worker prints its process id).

Run:  .venv/bin/python benchmarks/hung_rank.py [--runs 5] [--timeout 5] [--hang-batch 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
from _torchrun import torchrun_command, worker_env  # benchmarks/_torchrun.py, next to this script
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.core import Callback
from composer.models import MLP, ComposerClassifier

__all__: list[str] = []

NAMED = "rank 1 stopped answering"


class HangAt(Callback):
    """On rank 1, at batch ``batch``: prints the time and sleeps for ever."""

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def batch_start(self, state: Any, logger: Any) -> None:
        del logger
        if state.rank == 1 and int(state.timer.batch) == self.batch:
            print(f"HANG AT {time.time():.4f}", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)


def worker(args: argparse.Namespace) -> None:
    print(f"WORKER PID {os.getpid()}", file=sys.stderr, flush=True)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 32, generator=g), torch.randint(0, 4, (256,), generator=g))
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(32, (64,), 4), num_classes=4)
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="10ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        callbacks=[HangAt(args.hang_batch)],
        progress_bar=False,
        dist_timeout=args.timeout,
    )
    trainer.fit()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def one_run(args: argparse.Namespace) -> tuple[float, float, bool, list[int]]:
    """(seconds from the hang to torchrun's exit, and to the first rank's decision to end; whether the output names
    rank 1; worker pids still alive)."""
    command = torchrun_command(__file__, f"--timeout={args.timeout}", f"--hang-batch={args.hang_batch}")
    env = worker_env()
    # Lines are read as they come, so that the moment the first rank decides to end is known too.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines, decided = [], float("nan")
    assert process.stdout is not None
    for line in process.stdout:
        if "ending this process" in line and decided != decided:
            decided = time.time()
        lines.append(line)
    returncode = process.wait(timeout=args.timeout + 120)
    ended = time.time()
    output = "".join(lines)
    match = re.search(r"HANG AT ([0-9.]+)", output)
    if match is None or returncode == 0:
        raise RuntimeError(f"The job did not hang as planned (exit {returncode}):\n{output[-5000:]}")
    pids = [int(p) for p in re.findall(r"WORKER PID (\d+)", output)]
    hung_at = float(match.group(1))
    return ended - hung_at, decided - hung_at, NAMED in output, [p for p in pids if alive(p)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=5.0, help="dist_timeout, seconds")
    parser.add_argument("--hang-batch", type=int, default=3)
    args = parser.parse_args()
    if "WORLD_SIZE" in os.environ:
        worker(args)
        return
    times, decisions, named, left = [], [], 0, []
    for i in range(args.runs):
        seconds, decided, names_it, alive_pids = one_run(args)
        times.append(seconds)
        decisions.append(decided)
        named += names_it
        left += alive_pids
        print(
            f"run {i + 1}: {seconds:.2f} s from the hang to the job's exit ({decided:.2f} s to the first rank's "
            f"decision to end); rank 1 named: {names_it}",
            flush=True,
        )
    median = statistics.median(times)
    print(f"dist_timeout={args.timeout:g} s, {args.runs} runs, 2 CPU ranks, rank 1 hangs at batch {args.hang_batch}")
    print(f"hang to job exit: median {median:.2f} s (dist_timeout + {median - args.timeout:.2f} s), ", end="")
    print(f"min {min(times):.2f} s, max {max(times):.2f} s")
    print(f"hang to the first rank's decision to end: median {statistics.median(decisions):.2f} s")
    print(f"the hung rank named in the output: {named} of {args.runs} runs")
    print(f"worker processes left after torchrun exited: {len(left)} {left if left else ''}".rstrip())


if __name__ == "__main__":
    main()
