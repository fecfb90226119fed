"""Cost and effect of the training-dynamics methods (SAM, SWA, EMA, GradientClipping, ScaleSchedule) on real data.

An MLP 64-128-128-10 on scikit-learn's handwritten digits (1,437 training and 360 held-out images, batch 64, 23 steps
per epoch), DecoupledSGDW (lr 0.1, momentum 0.9, weight decay 5e-4) with a cosine schedule, one CPU thread. Each
round trains the baseline and every method once with the same seed (interleaved, so drift in machine speed hits
all of them alike); rounds use seeds 0, 1, 2, ... The report gives, per configuration, the median wall time of a
run relative to the baseline's, and the mean and spread of the held-out accuracy over the rounds.

Run:  .venv/bin/python benchmarks/optim_methods.py [--epochs 15] [--rounds 5]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import torch

from composer import Trainer
from composer.algorithms import EMA, SAM, SWA, GradientClipping, ScaleSchedule
from composer.core.algorithm import Algorithm
from composer.datasets import digits_dataloaders
from composer.models import MLP, ComposerClassifier
from composer.optim import DecoupledSGDW, cosine_annealing_scheduler

__all__: list[str] = []

CONFIGS: dict[str, Callable[[], list[Algorithm]]] = {
    "baseline": lambda: [],
    "SAM(rho=0.05)": lambda: [SAM(rho=0.05)],
    "SAM(rho=0.05, interval=4)": lambda: [SAM(rho=0.05, interval=4)],
    "SWA(swa_start=0.7, swa_lr=0.02)": lambda: [SWA(swa_start=0.7, anneal_epochs=2, swa_lr=0.02)],
    "EMA(half_life='50ba')": lambda: [EMA(half_life="50ba")],
    "GradientClipping(adaptive, 0.05)": lambda: [GradientClipping("adaptive", 0.05)],
    "ScaleSchedule(0.5)": lambda: [ScaleSchedule(0.5)],
}


def run(name: str, epochs: int, seed: int) -> tuple[float, float]:
    """Trains one configuration; returns (wall seconds of fit, held-out accuracy)."""
    torch.manual_seed(seed)
    train_dl, eval_dl = digits_dataloaders(batch_size=64, seed=seed)
    model = ComposerClassifier(MLP(in_features=64, hidden=(128, 128), num_classes=10), num_classes=10)
    optimizer = DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        eval_dataloader=eval_dl,
        eval_interval=f"{epochs}ep",  # once, at the end (in the timed fit, like the averaged-weight swap)
        max_duration=f"{epochs}ep",
        optimizers=optimizer,
        schedulers=functools.partial(cosine_annealing_scheduler),
        algorithms=CONFIGS[name](),
        seed=seed,
        progress_bar=False,
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    accuracy = trainer.eval()["metrics/eval/Accuracy"]
    trainer.close()
    return seconds, accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)

    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    accuracies: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for seed in range(args.rounds):
        for name in CONFIGS:
            seconds, accuracy = run(name, args.epochs, seed)
            times[name].append(seconds)
            accuracies[name].append(accuracy)

    base = statistics.median(times["baseline"])
    print(f"{args.epochs} epochs, {args.rounds} rounds (seeds 0..{args.rounds - 1}); baseline median {base:.2f} s/run")
    print(f"{'configuration':36s} {'time vs baseline':>17s} {'accuracy mean':>14s} {'(stdev)':>8s}")
    for name in CONFIGS:
        ratio = statistics.median(times[name]) / base
        mean = statistics.fmean(accuracies[name])
        spread = statistics.stdev(accuracies[name]) if len(accuracies[name]) > 1 else 0.0
        print(f"{name:36s} {ratio:16.2f}x {mean:14.4f} {spread:8.4f}")


if __name__ == "__main__":
    main()
