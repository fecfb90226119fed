"""What ``grad_accum='auto'`` costs when nothing runs out of memory: step time against a fixed ``grad_accum=1``.

With ``'auto'`` the Trainer captures, before each batch, what a retry would need (the random states and the model's
buffers). This measures that price on a small model, where it weighs most: an MLP 256-512-512-10 with BatchNorm (so
there are buffers to capture), batch 64, SGD, one CPU thread. Each round trains a fresh Trainer of each kind for
``--steps`` steps from the same weights, in alternating order (the machine's speed drifts; interleaving spreads the
drift over both); a Trainer's time is its ``fit`` wall time over its steps. Reported: the median over rounds of the
per-step times and of the per-round ratio ('auto' / fixed).

Run:  .venv/bin/python benchmarks/auto_microbatch.py [--steps 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.models import ComposerClassifier

__all__: list[str] = []


def _model() -> ComposerClassifier:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.BatchNorm1d(512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.BatchNorm1d(512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    return ComposerClassifier(net, num_classes=10)


def _seconds_per_step(grad_accum: int | str, loader: DataLoader, steps: int) -> float:
    model = _model()
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{steps}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        grad_accum=grad_accum,
        progress_bar=False,
        seed=0,
        device="cpu",
    )
    started = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - started
    trainer.close()
    return seconds / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(6400, 256, generator=g), torch.randint(0, 10, (6400,), generator=g))
    loader = DataLoader(data, batch_size=64, shuffle=False)
    _seconds_per_step(1, loader, 50)  # warm up both paths once
    _seconds_per_step("auto", loader, 50)
    fixed, auto, ratios = [], [], []
    for round_ in range(args.rounds):
        order: list[int | str] = [1, "auto"] if round_ % 2 == 0 else ["auto", 1]
        times = {str(kind): _seconds_per_step(kind, loader, args.steps) for kind in order}
        fixed.append(times["1"])
        auto.append(times["auto"])
        ratios.append(times["auto"] / times["1"])
        print(
            f"round {round_ + 1}: grad_accum=1 {1e3 * times['1']:.3f} ms/step, 'auto' {1e3 * times['auto']:.3f} ms/step"
        )
    print(
        f"median over {args.rounds} rounds: grad_accum=1 {1e3 * statistics.median(fixed):.3f} ms/step, 'auto' "
        f"{1e3 * statistics.median(auto):.3f} ms/step; ratio 'auto' / fixed: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
