"""WeightStandardization on the digits CNN: step-time cost and accuracy delta.

Step time: forward, backward and an SGD step of the digits recipe's model (SimpleCNN, widths 16/32/64, batch 32 of
1x32x32) with and without its three convolutions standardized, interleaved in rotating order over ``--rounds``; the
ratio is the median over rounds of variant / baseline. Accuracy: ``recipes/digits_baseline.yaml`` with and without
``weight_standardization``, ``--epochs`` epochs, ``--seeds``, interleaved by seed (held-out accuracy; ``fit()`` time
ratio, median over seeds).

Run:  .venv/bin/python benchmarks/weight_standardization.py --threads 1 [--rounds 15] [--epochs 4] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for _interleaved, run as a script

from _interleaved import digits_runs, print_runs, print_times, time_interleaved

from composer.functional import apply_weight_standardization
from composer.models import simple_cnn

__all__: list[str] = []


def _sgd_step(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=4, help="digits training epochs (0: skip accuracy)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10).module
    nets = {"baseline": base, "weight_standardization": apply_weight_standardization(copy.deepcopy(base))}
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 1, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    print(f"digits CNN: forward + backward + SGD step, batch 32, {args.rounds} rounds of 5 steps")
    steps = {name: _sgd_step(net, x, y) for name, net in nets.items()}
    print_times(time_interleaved(steps, args.rounds, 5), "baseline")
    if args.epochs:
        variants = {"baseline": [], "weight_standardization": ["algorithms.weight_standardization={}"]}
        print(f"\ndigits recipe, {args.epochs} epochs, seeds {args.seeds}:")
        print_runs(digits_runs(variants, f"{args.epochs}ep", args.seeds), "baseline")


if __name__ == "__main__":
    main()
