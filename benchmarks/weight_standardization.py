"""WeightStandardization on the digits CNN: step-time cost and accuracy delta.

Step time: forward, backward and an SGD step of the digits recipe's model (SimpleCNN, widths 16/32/64, batch 32 of
1x32x32) with and without its three convolutions standardized, interleaved in rotating order over ``--rounds``; the
ratio is the median over rounds of variant / baseline. Accuracy: ``recipes/digits_baseline.yaml`` with and without
``weight_standardization``, ``--epochs`` epochs, ``--seeds``, interleaved by seed (held-out accuracy; ``fit()`` time
ratio, median over seeds).

With ``--groupnorm``, the same for the paper's pairing: the model with each BatchNorm replaced by GroupNorm (4
groups), with and without weight standardization, trained through the Trainer with the recipe's data, optimizer
(DecoupledSGDW, lr 0.4, momentum 0.9, Nesterov, weight decay 5e-4) and schedule (linear decay after a 10% warmup).

Run:  .venv/bin/python benchmarks/weight_standardization.py --threads 1 [--rounds 15] [--epochs 4] [--seeds 0 1]
          [--groupnorm]
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for _interleaved, run as a script

from _interleaved import digits_runs, print_runs, print_times, sgd_step, time_interleaved

from composer import Trainer
from composer.datasets import digits_dataloaders
from composer.functional import apply_weight_standardization
from composer.models import ComposerClassifier, simple_cnn
from composer.optim import DecoupledSGDW
from composer.optim.scheduler_functions import linear_with_warmup_scheduler

__all__: list[str] = []


def _groupnorm_net(standardized: bool) -> nn.Module:
    net = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10).module
    for i, layer in enumerate(net.features):
        if isinstance(layer, nn.BatchNorm2d):
            net.features[i] = nn.GroupNorm(4, layer.num_features)
    return apply_weight_standardization(net) if standardized else net


def _groupnorm_accuracy(standardized: bool, epochs: int, seed: int) -> float:
    train_dl, eval_dl = digits_dataloaders(batch_size=32, eval_batch_size=512, image_size=32, seed=seed)
    torch.manual_seed(seed)
    model = ComposerClassifier(_groupnorm_net(standardized), num_classes=10)
    optimizer = DecoupledSGDW(model.parameters(), lr=0.4, momentum=0.9, weight_decay=5e-4, nesterov=True)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        max_duration=f"{epochs}ep",
        optimizers=optimizer,
        schedulers=[functools.partial(linear_with_warmup_scheduler, warmup_time="0.1dur")],
        device="cpu",
        seed=seed,
        progress_bar=False,
        log_to_console=False,
    )
    trainer.fit()
    accuracy = float(trainer.eval(eval_dl)["metrics/eval/Accuracy"])
    trainer.close()
    return accuracy


def groupnorm(rounds: int, epochs: int, seeds: list[int]) -> None:
    torch.manual_seed(0)
    nets = {"groupnorm": _groupnorm_net(False), "groupnorm + weight_standardization": _groupnorm_net(True)}
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 1, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    print(f"\nGroupNorm digits CNN: forward + backward + SGD step, batch 32, {rounds} rounds of 5 steps")
    print_times(time_interleaved({n: sgd_step(m, x, y) for n, m in nets.items()}, rounds, 5), "groupnorm")
    if epochs:
        print(f"\nGroupNorm digits CNN, the recipe's training, {epochs} epochs, seeds {seeds}: held-out accuracy")
        results: dict[str, list[float]] = {name: [] for name in nets}
        for i, seed in enumerate(seeds):
            for name in list(nets)[i % 2 :] + list(nets)[: i % 2]:
                results[name].append(_groupnorm_accuracy("weight" in name, epochs, seed))
        for name, values in results.items():
            mean = sum(values) / len(values)
            print(f"  {name:<36} {mean:.4f} ({min(values):.4f}-{max(values):.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=4, help="digits training epochs (0: skip accuracy)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--groupnorm", action="store_true", help="also GroupNorm without and with standardization")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10).module
    nets = {"baseline": base, "weight_standardization": apply_weight_standardization(copy.deepcopy(base))}
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 1, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    print(f"digits CNN: forward + backward + SGD step, batch 32, {args.rounds} rounds of 5 steps")
    steps = {name: sgd_step(net, x, y) for name, net in nets.items()}
    print_times(time_interleaved(steps, args.rounds, 5), "baseline")
    if args.epochs:
        variants = {"baseline": [], "weight_standardization": ["algorithms.weight_standardization={}"]}
        print(f"\ndigits recipe, {args.epochs} epochs, seeds {args.seeds}:")
        print_runs(digits_runs(variants, f"{args.epochs}ep", args.seeds), "baseline")
    if args.groupnorm:
        groupnorm(args.rounds, args.epochs, args.seeds)


if __name__ == "__main__":
    main()
