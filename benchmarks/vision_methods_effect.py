"""Effect and cost of the vision augmentations on a small real task: ResNet-8 on scikit-learn's 8x8 digits, CPU.

Trains the same model, optimizer and schedule with no method and with each of LabelSmoothing, MixUp, CutMix, CutOut
and ColOut (batch mode), over several seeds, and reports held-out accuracy (mean and spread over seeds) and training
time relative to the baseline run with the same seed. This is a small, fast task where a regulariser's effect is
modest and noisy; it shows that each method trains and what it costs, not its ImageNet-scale gain.

Run:  .venv/bin/python benchmarks/vision_methods_effect.py [--epochs 15] [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import torch

from composer import Trainer
from composer.algorithms import Algorithm, ColOut, CutMix, CutOut, LabelSmoothing, MixUp
from composer.datasets import digits_dataloaders
from composer.models import ComposerClassifier
from composer.models.resnet_cifar import CIFARResNet
from composer.optim import DecoupledSGDW, cosine_annealing_with_warmup_scheduler

__all__: list[str] = []

METHODS: dict[str, Callable[[], list[Algorithm]]] = {
    "baseline": lambda: [],
    "label_smoothing(alpha=0.1)": lambda: [LabelSmoothing(alpha=0.1)],
    "mixup(alpha=0.2)": lambda: [MixUp(alpha=0.2)],
    "cutmix(alpha=1.0)": lambda: [CutMix(alpha=1.0)],
    "cutout(n_holes=1, length=3)": lambda: [CutOut(n_holes=1, length=3)],
    "colout(p=0.1, batch)": lambda: [ColOut(p_row=0.1, p_col=0.1, batch=True)],  # 8x8 -> 7x7
    "colout(p=0.15, batch)": lambda: [ColOut(p_row=0.15, p_col=0.15, batch=True)],  # 8x8 -> 6x6
}


def run(algorithms: list[Algorithm], epochs: int, seed: int) -> tuple[float, float]:
    """Trains once; returns (held-out accuracy, training seconds)."""
    torch.manual_seed(seed)
    train_dl, eval_dl = digits_dataloaders(batch_size=64, seed=seed)
    model = ComposerClassifier(CIFARResNet(depth=8, num_classes=10, in_channels=1), num_classes=10)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        max_duration=f"{epochs}ep",
        optimizers=DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
        schedulers=functools.partial(cosine_annealing_with_warmup_scheduler, warmup_time="1ep"),
        algorithms=algorithms,
        device="cpu",
        seed=seed,
        progress_bar=False,
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    accuracy = trainer.eval(eval_dl)["metrics/eval/Accuracy"]
    trainer.close()
    return accuracy, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in METHODS}
    for seed in args.seeds:  # seeds outermost, so machine-speed drift hits every method alike
        for name, make in METHODS.items():
            results[name].append(run(make(), args.epochs, seed))
    print(f"ResNet-8 on digits (1,437 train / 360 held out), {args.epochs} epochs, seeds {args.seeds}, CPU")
    print(f"{'method':<30}{'accuracy (mean)':>16}{'min..max':>16}{'time vs baseline':>18}")
    base_times = [seconds for _, seconds in results["baseline"]]
    for name, runs in results.items():
        accuracies = [accuracy for accuracy, _ in runs]
        time_ratio = statistics.median(s / b for (_, s), b in zip(runs, base_times))
        spread = f"{min(accuracies):.4f}..{max(accuracies):.4f}"
        print(f"{name:<30}{statistics.mean(accuracies):>16.4f}{spread:>16}{time_ratio:>17.2f}x")


if __name__ == "__main__":
    main()
