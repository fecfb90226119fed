"""Per-step overhead of the Trainer against a hand-written PyTorch loop.

The MLP 256-512-512-10, batch 64, plain SGD, on an in-memory TensorDataset, one CPU thread. Each round times one
hand-written loop and one Trainer run of the same number of steps (interleaved, so drift in machine speed hits both);
the Trainer runs with no algorithms, no loggers and no progress bar. A second comparison runs the Trainer with what
a user watching a run turns on: a progress bar (drawing its bars, to a null device so that the timing does not
depend on the terminal), a SpeedMonitor and an LRMonitor; it is timed in the same rounds, against the same hand loop.

Two statistics. The best-run ratio divides the fastest Trainer run by the fastest hand-loop run. The median per-step
overhead compares single steps: both loops read the same loader through a wrapper that notes the time of every
batch, so each run yields 2000 step durations; the overhead is the median Trainer step minus the median hand-loop step
over all rounds. A shared machine's bursts of load move whole-run totals by several percent, but they touch few of
the 20,000 steps, so the per-step medians stay put.

Run:  .venv/bin/python benchmarks/trainer_overhead.py [--steps 2000] [--rounds 10]
Targets: best-run ratio (Trainer / hand loop) <= 1.03 and median per-step overhead <= 75 us;
         with the progress bar, SpeedMonitor and LRMonitor: best-run ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.callbacks import LRMonitor, SpeedMonitor
from composer.loggers import ProgressBarLogger
from composer.models import MLP, ComposerClassifier

__all__: list[str] = []


def make_loader(num_batches: int, batch_size: int = 64) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(num_batches * batch_size, 256, generator=g)
    y = torch.randint(0, 10, (num_batches * batch_size,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


class Stamped:
    """The loader, noting the time each batch is handed out (the same wrapper for both loops)."""

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader
        self.stamps: list[float] = []

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        stamps = self.stamps
        for batch in self.loader:
            stamps.append(time.perf_counter())
            yield batch

    def step_seconds(self) -> list[float]:
        """The time between consecutive batches: one training step each."""
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]


def hand_loop(loader: Any, steps: int) -> float:
    torch.manual_seed(0)
    model = MLP(256, (512, 512), 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    start = time.perf_counter()
    done = 0
    while done < steps:
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            done += 1
            if done == steps:
                break
    return time.perf_counter() - start


def trainer_loop(loader: Any, steps: int, monitored: bool = False) -> float:
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(256, (512, 512), 10), num_classes=10)
    with open(os.devnull, "w") as null:
        trainer = Trainer(
            model=model,
            train_dataloader=loader,
            max_duration=f"{steps}ba",
            optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
            device="cpu",
            progress_bar=False,
            loggers=[ProgressBarLogger(enabled=True, stream=null)] if monitored else None,
            callbacks=[SpeedMonitor(), LRMonitor()] if monitored else None,
            seed=0,
        )
        start = time.perf_counter()
        trainer.fit()
        elapsed = time.perf_counter() - start
        trainer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loader = make_loader(num_batches=100)
    hand_loop(loader, 50)  # warm up allocator and kernels
    trainer_loop(loader, 50)
    trainer_loop(loader, 50, monitored=True)
    hands, trainers, monitored = [], [], []
    steps: dict[str, list[float]] = {"hand": [], "trainer": [], "monitored": []}
    for r in range(args.rounds):
        for name, run, totals in (
            ("hand", hand_loop, hands),
            ("trainer", trainer_loop, trainers),
            ("monitored", lambda lo, n: trainer_loop(lo, n, monitored=True), monitored),
        ):
            stamped = Stamped(loader)
            totals.append(run(stamped, args.steps))
            steps[name].extend(stamped.step_seconds())
        print(f"round {r}: hand {hands[-1]:.3f}s  trainer {trainers[-1]:.3f}s  ratio {trainers[-1] / hands[-1]:.4f}")
        print(f"round {r}: monitored trainer {monitored[-1]:.3f}s  ratio {monitored[-1] / hands[-1]:.4f}")
    median_us = {name: statistics.median(values) * 1e6 for name, values in steps.items()}
    print(f"hand loop step (best run): {min(hands) / args.steps * 1e6:.1f} us; median step {median_us['hand']:.1f} us")
    print(f"best-run ratio: {min(trainers) / min(hands):.4f} (target <= 1.03)")
    print(
        f"median per-step overhead: {median_us['trainer'] - median_us['hand']:.1f} us "
        f"(median Trainer step {median_us['trainer']:.1f} us; target <= 75 us)"
    )
    print(
        f"with progress bar + SpeedMonitor + LRMonitor: best-run ratio {min(monitored) / min(hands):.4f} "
        "(target <= 1.05)"
    )
    print(
        "with progress bar + SpeedMonitor + LRMonitor: median per-step overhead "
        f"{median_us['monitored'] - median_us['hand']:.1f} us (median step ratio "
        f"{median_us['monitored'] / median_us['hand']:.4f})"
    )


if __name__ == "__main__":
    main()
