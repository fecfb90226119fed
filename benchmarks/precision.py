"""Training-step time and loss of ``precision='fp32'``, ``'bf16'`` and ``'amp'`` on this machine's CPU.

Each step is what the Trainer runs for one batch at that precision: forward and loss inside the precision's
context (``composer.trainer.precision.precision_context``: nothing for fp32, ``torch.autocast`` to bfloat16 or
float16 otherwise), backward (through the gradient scaler for ``amp``, ``make_grad_scaler``), and the optimizer
step. Two models:

* ``cnn``: the main job's model, ``simple_cnn(1, (16, 32, 64))``, on batches of 32 digits at 32x32 (DecoupledSGDW);
* ``gpt``: the built-in GPT (4 layers, width 128), on 8 sequences of 128 bytes of the built-in text (AdamW).

The three precisions take turns (``benchmarks/_interleaved.py``: the order rotates every round, so a shared
machine's drift hits all alike); the table gives the median and best ms per step and the median over rounds of
each one's time ratio to fp32. Each model also reports how far the loss of one batch under bf16 and fp16 autocast
lies from the fp32 loss, on the same weights, and the loss after the timed steps (every variant trained from the
same initial weights on the same batch).

Run:  .venv/bin/python benchmarks/precision.py [--rounds 7] [--steps 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Callable
from typing import Any

import torch
from _interleaved import print_times, time_interleaved  # benchmarks/_interleaved.py, next to this

from composer.core.precision import Precision
from composer.datasets import digits_datasets, load_python_docs
from composer.models import GPT, GPTConfig, simple_cnn
from composer.optim import DecoupledSGDW
from composer.trainer.precision import make_grad_scaler, precision_context

__all__: list[str] = []

CPU = torch.device("cpu")


def cnn() -> tuple[Any, Any, Callable[[Any], torch.optim.Optimizer]]:
    """The digits model, one batch of 32 training digits at 32x32, and its optimizer."""
    torch.manual_seed(0)
    train_set, _ = digits_datasets(image_size=32)
    batch = (train_set.images[:32].float() / 255.0, train_set.labels[:32])
    model = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10)
    return model, batch, lambda m: DecoupledSGDW(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)


def gpt() -> tuple[Any, Any, Callable[[Any], torch.optim.Optimizer]]:
    """The built-in GPT, one batch of 8 x 128 bytes, and its optimizer."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=4, n_head=4, n_embd=128, max_sequence_length=128))
    batch = {"input_ids": load_python_docs("train")[: 8 * 128].long().view(8, 128)}
    return model, batch, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3)


MODELS = {"cnn": cnn, "gpt": gpt}
PRECISIONS = [Precision.FP32, Precision.BF16, Precision.AMP]


def training_step(model: Any, batch: Any, optimizer: torch.optim.Optimizer, precision: Precision) -> Callable[[], None]:
    """One training step at ``precision``, as the Trainer runs it; the last loss is kept in ``step.losses``."""
    context = precision_context(precision, CPU)
    scaler = make_grad_scaler(precision, CPU)
    losses: list[float] = []

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with context():
            loss = model.loss(model(batch), batch)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(float(loss.detach()))

    step.losses = losses  # type: ignore[attr-defined]
    return step


def loss_error(model: Any, batch: Any, precision: Precision) -> float:
    """``|loss at precision - loss in fp32|`` for one batch on the same weights, without gradients."""
    with torch.no_grad():
        reference = float(model.loss(model(batch), batch))
        with precision_context(precision, CPU)():
            low = float(model.loss(model(batch), batch))
    return abs(low - reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for name in args.models:
        base, batch, make_optimizer = MODELS[name]()
        errors = ", ".join(f"{p.value} {loss_error(base, batch, p):.2e}" for p in PRECISIONS[1:])
        steps, tracked = {}, {}
        for precision in PRECISIONS:
            model = copy.deepcopy(base)
            step = training_step(model, batch, make_optimizer(model), precision)
            steps[precision.value], tracked[precision.value] = step, step.losses  # type: ignore[attr-defined]
        print(f"\n{name}: {args.rounds} rounds of {args.steps} steps each; |loss - fp32 loss| on one batch: {errors}")
        print_times(time_interleaved(steps, rounds=args.rounds, per_round=args.steps), baseline="fp32")
        print("loss after the timed steps: " + ", ".join(f"{k} {v[-1]:.4f}" for k, v in tracked.items()))
    print(f"\nload after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
