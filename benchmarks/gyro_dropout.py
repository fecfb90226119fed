"""Gyro Dropout against dropout (and none) on the built-in digits: held-out accuracy and step time.

A fully connected classifier (64 -> 512 -> 512 -> 10, ReLU, a dropout after each hidden layer, as the paper's FC
networks) trains on scikit-learn's 8x8 digits (1,437 training images, batches of 64, 23 steps an epoch) with SGD
(lr 0.05, momentum 0.9, cosine decay) for ``--epochs`` epochs, three ways: no dropout, ``nn.Dropout(p)``, and
:func:`~composer.functional.apply_gyro_dropout` (``p``, ``sigma``, ``tau``; the schedule over the run's
iterations). Every seed trains the three variants epoch by epoch in turn (interleaved, so drifts in the speed of a
shared machine hit all), from the same initial weights and data order. Reported: the held-out accuracy (360 images)
per variant, mean and min-max over seeds, and the median over epochs of the step-time ratio to plain dropout.

Run:  .venv/bin/python benchmarks/gyro_dropout.py [--epochs 30] [--seeds 0 1 2] [--p 0.5] [--sigma 256] [--tau 16]
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch
from torch import nn

from composer.datasets import digits_dataloaders
from composer.functional import apply_gyro_dropout

__all__: list[str] = []


def _mlp(p: float) -> nn.Module:
    hidden = [nn.Linear(64, 512), nn.ReLU(), nn.Dropout(p), nn.Linear(512, 512), nn.ReLU(), nn.Dropout(p)]
    return nn.Sequential(nn.Flatten(), *hidden, nn.Linear(512, 10))


def _accuracy(model: nn.Module, loader: torch.utils.data.DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return correct / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--p", type=float, default=0.5)
    parser.add_argument("--sigma", type=int, default=256)
    parser.add_argument("--tau", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = ("no dropout", "dropout", "gyro dropout")
    accuracies: dict[str, list[float]] = {name: [] for name in names}
    ratios: list[float] = []
    for seed in args.seeds:
        train, evaluation = digits_dataloaders(batch_size=64, seed=seed)
        total = args.epochs * len(train)
        torch.manual_seed(seed)
        base = _mlp(args.p)
        models = {
            "no dropout": copy.deepcopy(base),
            "dropout": copy.deepcopy(base),
            "gyro dropout": apply_gyro_dropout(copy.deepcopy(base), total, args.p, args.sigma, args.tau, seed=seed),
        }
        for module in models["no dropout"].modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        optimizers = {n: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for n, m in models.items()}
        schedulers = {
            n: torch.optim.lr_scheduler.LambdaLR(o, lambda s, t=total: 0.5 * (1 + math.cos(math.pi * s / t)))
            for n, o in optimizers.items()
        }
        torch.manual_seed(seed)  # plain dropout's masks come from the global generator
        for _ in range(args.epochs):
            seconds = {}
            for name, model in models.items():
                model.train()
                start = time.perf_counter()
                for x, y in train:
                    optimizers[name].zero_grad(set_to_none=True)
                    nn.functional.cross_entropy(model(x), y).backward()
                    optimizers[name].step()
                    schedulers[name].step()
                seconds[name] = time.perf_counter() - start
            ratios.append(seconds["gyro dropout"] / seconds["dropout"])
        for name, model in models.items():
            accuracies[name].append(_accuracy(model, evaluation))
    for name in names:
        values = accuracies[name]
        print(f"{name}: held-out accuracy {statistics.fmean(values):.4f} ({min(values):.4f}-{max(values):.4f})")
    print(f"step time gyro / dropout: {statistics.median(ratios):.3f} (median of {len(ratios)} epochs)")


if __name__ == "__main__":
    main()
