"""Optimizer step time on the CIFAR ResNet-20: the for-loop step against ``foreach`` and ``fused``.

The model is ``composer.models.cifar_resnet(depth=20)`` (0.27M parameters in 65 tensors), on the CPU with
``--threads`` threads. For each optimizer, the three step kinds each get their own copy of the model (same weights)
and optimizer, and run in turn, round after round (interleaved), so that a shared machine's changing load falls on all
three alike:

* ``optimizer.step()`` alone: fixed gradients (one backward pass on a random batch), ``--steps`` steps timed
  together per round;
* a whole training step: forward, loss, backward and ``optimizer.step()`` on a random batch of ``--batch-size``,
  one step timed per round (for ``--train-optimizers`` only, as it takes longer).

Reported per kind: the median over rounds of the time per step, and the median over rounds of that round's ratio to
the for-loop step (below 1: faster than the for-loop).

Run:  .venv/bin/python benchmarks/optimizer_step.py [--rounds 30] [--steps 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from composer.models import cifar_resnet
from composer.optim import OPTIMIZERS

__all__: list[str] = []

# Optimizer -> its fields (the digits recipes' SGDW, and the usual Adam settings).
OPTIMIZER_FIELDS: dict[str, dict[str, Any]] = {
    "decoupled_sgdw": {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True},
    "decoupled_adamw": {"lr": 1e-3, "weight_decay": 1e-2},
    "sgd": {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True},
    "adamw": {"lr": 1e-3, "weight_decay": 1e-2},
}
KINDS: dict[str, dict[str, bool]] = {
    "for-loop": {"foreach": False},
    "foreach": {"foreach": True},
    "fused": {"fused": True},
}


def _batch(batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch_size, 3, 32, 32, generator=generator), torch.randint(
        0, 10, (batch_size,), generator=generator
    )


def _setups(name: str, batch_size: int) -> dict[str, tuple[torch.nn.Module, torch.optim.Optimizer]]:
    torch.manual_seed(0)
    model = cifar_resnet(depth=20).module
    inputs, targets = _batch(batch_size, 0)
    F.cross_entropy(model(inputs), targets).backward()  # every kind starts from the same gradients
    setups = {}
    for kind, flags in KINDS.items():
        copied = copy.deepcopy(model)
        for source, target in zip(model.parameters(), copied.parameters(), strict=True):
            target.grad = source.grad.clone()  # deepcopy leaves the gradients behind
        config = OPTIMIZERS[name].from_dict({**OPTIMIZER_FIELDS[name], **flags})
        setups[kind] = (copied, config.initialize_object(copied.parameters()))
    return setups


def _interleave(rounds: int, timed: dict[str, Callable[[], float]]) -> dict[str, tuple[float, float]]:
    """Runs each kind once per round, in turn; returns per kind (median seconds, median ratio to the for-loop)."""
    times: dict[str, list[float]] = {kind: [] for kind in timed}
    for round_index in range(rounds):
        kinds = list(timed) if round_index % 2 == 0 else list(reversed(timed))  # no kind always runs first
        for kind in kinds:
            times[kind].append(timed[kind]())
    loop = times["for-loop"]
    return {
        kind: (statistics.median(values), statistics.median(v / b for v, b in zip(values, loop, strict=True)))
        for kind, values in times.items()
    }


def step_alone(name: str, rounds: int, steps: int, batch_size: int) -> dict[str, tuple[float, float]]:
    """``optimizer.step()`` on fixed gradients, ``steps`` steps per round."""
    setups = _setups(name, batch_size)

    def timer(optimizer: torch.optim.Optimizer) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            for _ in range(steps):
                optimizer.step()
            return (time.perf_counter() - start) / steps

        return run

    for _, optimizer in setups.values():  # untimed: creates the optimizer state
        optimizer.step()
    return _interleave(rounds, {kind: timer(optimizer) for kind, (_, optimizer) in setups.items()})


def train_step(name: str, rounds: int, batch_size: int) -> dict[str, tuple[float, float]]:
    """Forward, loss, backward and step on a fresh random batch, one step per round."""
    setups = _setups(name, batch_size)
    batches = [_batch(batch_size, seed) for seed in range(1, 5)]
    counter = {kind: 0 for kind in setups}

    def timer(kind: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[], float]:
        def run() -> float:
            inputs, targets = batches[counter[kind] % len(batches)]
            counter[kind] += 1
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            return time.perf_counter() - start

        return run

    for kind in setups:  # untimed warm-up step
        timer(kind, *setups[kind])()
    return _interleave(rounds, {kind: timer(kind, *setup) for kind, setup in setups.items()})


def _table(title: str, results: dict[str, dict[str, tuple[float, float]]], unit: str, scale: float) -> str:
    lines = [title, "", f"| optimizer | {' | '.join(KINDS)} |", "|---|" + "---|" * len(KINDS)]
    for name, by_kind in results.items():
        cells = [f"{by_kind[kind][0] * scale:.2f} {unit} ({by_kind[kind][1]:.2f}x)" for kind in KINDS]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizers", nargs="+", default=list(OPTIMIZER_FIELDS), choices=list(OPTIMIZER_FIELDS))
    parser.add_argument("--train-optimizers", nargs="*", default=["decoupled_sgdw", "decoupled_adamw"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per round (step alone)")
    parser.add_argument("--train-rounds", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s); medians over rounds, (ratio to the for-loop step)\n")
    alone = {name: step_alone(name, args.rounds, args.steps, args.batch_size) for name in args.optimizers}
    print(_table(f"optimizer.step() alone ({args.rounds} rounds x {args.steps} steps)", alone, "ms", 1e3) + "\n")
    if args.train_optimizers:
        train = {name: train_step(name, args.train_rounds, args.batch_size) for name in args.train_optimizers}
        title = f"whole training step, batch {args.batch_size} ({args.train_rounds} rounds)"
        print(_table(title, train, "ms", 1e3))


if __name__ == "__main__":
    main()
