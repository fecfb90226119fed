"""Cost (and, optionally, effect) of the model-surgery methods on CIFAR-style ResNets, CPU.

Cost: forward + backward time of a CIFAR ResNet-56 (batch 32, 3x32x32 random inputs, training mode) without and with
each of BlurPool, ChannelsLast, GhostBatchNorm, Squeeze-and-Excitation and Stochastic Depth (applied with the plain
functions, as a user's own loop would). Every variant starts from the same initial weights. Each round times every
variant for ``--steps`` steps, in an order that rotates from round to round, so drift in machine speed hits all of
them; the table gives the median and best time per step and the median over rounds of the ratio to the baseline of
the same round.

Effect (``--effect``): trains a CIFAR ResNet-8 on scikit-learn's 8x8 digits (1 channel) with each method through the
Trainer for ``--epochs`` epochs over ``--seeds`` and reports held-out accuracy (mean and spread). A small, fast task:
it shows that each method trains, not its ImageNet-scale gain.

Run:  .venv/bin/python benchmarks/vision_surgery_methods.py [--steps 3] [--rounds 5] [--threads 1]
      .venv/bin/python benchmarks/vision_surgery_methods.py --effect [--epochs 10] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from composer.algorithms import Algorithm, BlurPool, ChannelsLast, GhostBatchNorm, SqueezeExcite, StochasticDepth
from composer.functional import (
    apply_blurpool,
    apply_channels_last,
    apply_ghost_batchnorm,
    apply_se,
    apply_stochastic_depth,
)
from composer.models.resnet_cifar import CIFARResNet

__all__: list[str] = []

# name -> surgery on a CIFAR ResNet (in place). Settings that touch a ResNet-56 (whose widest layers have 64 channels).
SURGERIES: dict[str, Callable[[nn.Module], object]] = {
    "baseline": lambda model: None,
    "blurpool(blur_first=True)": lambda model: apply_blurpool(model, blur_first=True),
    "blurpool(blur_first=False)": lambda model: apply_blurpool(model, blur_first=False),
    "channels_last": apply_channels_last,
    "ghost_batchnorm(ghost_batch_size=8)": lambda model: apply_ghost_batchnorm(model, ghost_batch_size=8),
    "squeeze_excite(latent=0.25, min_channels=32)": lambda model: apply_se(
        model, latent_channels=0.25, min_channels=32
    ),
    "stochastic_depth(block, linear, 0.2)": lambda model: apply_stochastic_depth(
        model, "block", "ResNetBasicBlock", drop_rate=0.2, generator=torch.Generator().manual_seed(0)
    ),
    "stochastic_depth(sample, linear, 0.2)": lambda model: apply_stochastic_depth(
        model, "sample", "ResNetBasicBlock", drop_rate=0.2, generator=torch.Generator().manual_seed(0)
    ),
}

# name -> algorithms for the effect runs (ResNet-8: widths 16/32/64, one block per stage).
ALGORITHMS: dict[str, Callable[[], list[Algorithm]]] = {
    "baseline": lambda: [],
    "blurpool": lambda: [BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)],
    "channels_last": lambda: [ChannelsLast()],
    "ghost_batchnorm(16)": lambda: [GhostBatchNorm(ghost_batch_size=16)],
    "squeeze_excite(0.25, 32)": lambda: [SqueezeExcite(latent_channels=0.25, min_channels=32)],
    "stochastic_depth(block, 0.2)": lambda: [
        StochasticDepth(stochastic_method="block", target_layer_name="ResNetBasicBlock", drop_rate=0.2)
    ],
}


def time_steps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """Seconds per forward + backward step (after one untimed warm-up step)."""
    model.train()
    F.cross_entropy(model(x), y).backward()
    start = time.perf_counter()
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
    return (time.perf_counter() - start) / steps


def measure_cost(steps: int, rounds: int, batch_size: int) -> None:
    torch.manual_seed(0)
    base = CIFARResNet(depth=56, num_classes=10)
    models = {}
    for name, surgery in SURGERIES.items():
        model = copy.deepcopy(base)
        surgery(model)
        models[name] = model
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (batch_size,), generator=g)
    names = list(models)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            times[name].append(time_steps(models[name], x, y, steps))
    base_times = times["baseline"]
    print(f"CIFAR ResNet-56, batch {batch_size}, forward+backward, {torch.get_num_threads()} thread(s), CPU")
    print(f"{rounds} rounds x {steps} steps; median over rounds\n")
    print("| method | ms / step (median) | ms / step (best) | ratio to baseline (median of per-round ratios) |")
    print("|---|---:|---:|---:|")
    for name in names:
        ratio = statistics.median(t / b for t, b in zip(times[name], base_times))
        median, best = 1000 * statistics.median(times[name]), 1000 * min(times[name])
        print(f"| {name} | {median:.0f} | {best:.0f} | {ratio:.2f} |")


def measure_effect(epochs: int, seeds: list[int]) -> None:
    from composer import Trainer
    from composer.datasets import digits_dataloaders
    from composer.models import ComposerClassifier
    from composer.optim import DecoupledSGDW

    print(f"CIFAR ResNet-8 on 8x8 digits, {epochs} epochs, batch 64, seeds {seeds}: held-out accuracy\n")
    print("| method | accuracy (mean) | min | max | train s (mean) |")
    print("|---|---:|---:|---:|---:|")
    for name, make in ALGORITHMS.items():
        accuracies, seconds = [], []
        for seed in seeds:
            torch.manual_seed(seed)
            train_dl, eval_dl = digits_dataloaders(batch_size=64, seed=seed)
            model = ComposerClassifier(CIFARResNet(depth=8, num_classes=10, in_channels=1), num_classes=10)
            trainer = Trainer(
                model=model,
                train_dataloader=train_dl,
                max_duration=f"{epochs}ep",
                optimizers=DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
                algorithms=make(),
                seed=seed,
                progress_bar=False,
            )
            start = time.perf_counter()
            trainer.fit()
            seconds.append(time.perf_counter() - start)
            model.eval()
            correct = total = 0
            with torch.no_grad():
                for inputs, targets in eval_dl:
                    correct += int((model((inputs, targets)).argmax(1) == targets).sum())
                    total += len(targets)
            accuracies.append(correct / total)
            trainer.close()
        print(
            f"| {name} | {statistics.mean(accuracies):.4f} | {min(accuracies):.4f} | {max(accuracies):.4f} | "
            f"{statistics.mean(seconds):.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--effect", action="store_true", help="train ResNet-8 on digits instead of timing ResNet-56")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.effect:
        measure_effect(args.epochs, args.seeds)
    else:
        measure_cost(args.steps, args.rounds, args.batch_size)


if __name__ == "__main__":
    main()
