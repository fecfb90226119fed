"""Per-step overhead of the Trainer against a hand-written PyTorch loop.

The MLP 256-512-512-10, batch 64, plain SGD, on an in-memory TensorDataset, one CPU thread. Each round times one
hand-written loop and one Trainer run of the same number of steps (interleaved, so drift in machine speed hits both);
the Trainer runs with no algorithms, no loggers and no progress bar. A second comparison runs the Trainer with what
a user watching a run turns on: a progress bar (drawing its bars, to a null device so that the timing does not
depend on the terminal), a SpeedMonitor and an LRMonitor; it is timed in the same rounds, against the same hand loop.

Run:  .venv/bin/python benchmarks/trainer_overhead.py [--steps 2000] [--rounds 10]
Targets: best-run ratio (Trainer / hand loop) <= 1.03 and median per-step overhead <= 75 us;
         with the progress bar, SpeedMonitor and LRMonitor: best-run ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

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


def hand_loop(loader: DataLoader, steps: int) -> float:
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


def trainer_loop(loader: DataLoader, steps: int, monitored: bool = False) -> float:
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
    for r in range(args.rounds):
        hands.append(hand_loop(loader, args.steps))
        trainers.append(trainer_loop(loader, args.steps))
        monitored.append(trainer_loop(loader, args.steps, monitored=True))
        print(f"round {r}: hand {hands[-1]:.3f}s  trainer {trainers[-1]:.3f}s  ratio {trainers[-1] / hands[-1]:.4f}")
        print(f"round {r}: monitored trainer {monitored[-1]:.3f}s  ratio {monitored[-1] / hands[-1]:.4f}")
    best_ratio = min(trainers) / min(hands)
    overheads_us = [(t - h) / args.steps * 1e6 for h, t in zip(hands, trainers)]
    print(f"hand loop step (best): {min(hands) / args.steps * 1e6:.1f} us")
    print(f"best-run ratio: {best_ratio:.4f} (target <= 1.03)")
    print(f"median per-step overhead: {statistics.median(overheads_us):.1f} us (target <= 75 us)")
    monitored_overheads_us = [(m - h) / args.steps * 1e6 for h, m in zip(hands, monitored)]
    print(
        f"with progress bar + SpeedMonitor + LRMonitor: best-run ratio {min(monitored) / min(hands):.4f} "
        "(target <= 1.05)"
    )
    print(
        "with progress bar + SpeedMonitor + LRMonitor: median per-step overhead "
        f"{statistics.median(monitored_overheads_us):.1f} us"
    )


if __name__ == "__main__":
    main()
