"""NoOpModel on the digits task: how many batches per second the data pipeline and the Trainer allow, against the
real model.

Each round trains, through the Trainer, one epoch of the digits recipe's data (scikit-learn digits at 32x32, batch 32,
45 batches, DataLoader in the main process) once with the recipe's model (SimpleCNN, widths 16/32/64; SGD) and once
with ``NoOpModel`` (its one-parameter stand-in, the same loss and metrics), in an order that alternates from round to
round. The figure is the median over ``--rounds`` of batches per second of ``fit()``, and the median per-round ratio.
NoOpModel's rate is the ceiling the data pipeline and the loop put on this run.

Run:  .venv/bin/python benchmarks/no_op_model.py --threads 1 [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from composer import Trainer
from composer.algorithms import NoOpModel
from composer.datasets import digits_dataloaders
from composer.models import simple_cnn

__all__: list[str] = []


def epoch_seconds(no_op: bool, seed: int) -> tuple[float, int]:
    """Seconds of one ``fit()`` epoch and its number of batches."""
    train_dl, _ = digits_dataloaders(batch_size=32, image_size=32, seed=seed)
    torch.manual_seed(seed)
    model = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        max_duration="1ep",
        algorithms=[NoOpModel()] if no_op else [],
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        device="cpu",
        seed=seed,
        progress_bar=False,
        log_to_console=False,
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    batches = int(trainer.state.timer.batch)
    trainer.close()
    return seconds, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = {"simple_cnn (real model)": False, "NoOpModel": True}
    for no_op in names.values():
        epoch_seconds(no_op, 0)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        order = list(names) if r % 2 == 0 else list(reversed(names))
        for name in order:
            seconds, batches = epoch_seconds(names[name], r)
            rates[name].append(batches / seconds)
        print(f"round {r}: " + ", ".join(f"{n} {rates[n][-1]:.1f} batches/s" for n in names), flush=True)
    real, no_op = rates.values()
    ratio = statistics.median(n / m for n, m in zip(no_op, real, strict=True))
    print("| model | batches/s (median) | batches/s (best) |\n|---|---:|---:|")
    for name, values in rates.items():
        print(f"| {name} | {statistics.median(values):.1f} | {max(values):.1f} |")
    print(f"NoOpModel / real model (median of per-round ratios): {ratio:.2f}x")


if __name__ == "__main__":
    main()
