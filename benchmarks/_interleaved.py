"""Shared by the method benchmarks of issue 21: interleaved step timing, multiply-add counts, digits training runs.

* :func:`time_interleaved` times several step functions in rounds, in an order that rotates from round to round, so
  drift in machine speed (a loaded, shared CPU) hits all of them; :func:`print_times` reports the median and best
  time per step and the median over rounds of each variant's ratio to the baseline of the same round.
* :func:`sgd_step` makes such a step function: forward, backward and an SGD step of a classifier on one batch.
* :func:`count_macs` counts the multiply-adds of a model's ``Conv2d`` and ``Linear`` layers for one input.
* :func:`digits_runs` trains ``recipes/digits_baseline.yaml`` with overrides (one variant each), interleaved by seed,
  through ``composer compare``'s measurement (only ``fit()`` timed, one evaluation after training).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "DIGITS_BASELINE",
    "count_macs",
    "digits_runs",
    "load_average",
    "print_runs",
    "print_times",
    "sgd_step",
    "time_interleaved",
]

DIGITS_BASELINE = Path(__file__).resolve().parents[1] / "recipes" / "digits_baseline.yaml"


def time_interleaved(steps: Mapping[str, Callable[[], None]], rounds: int, per_round: int) -> dict[str, list[float]]:
    """Seconds per step of each variant, one entry per round; the variants run in a rotating order each round."""
    names = list(steps)
    for name in names:  # warm-up: allocator, kernels, lazy initialisation
        steps[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            for _ in range(per_round):
                steps[name]()
            times[name].append((time.perf_counter() - start) / per_round)
    return times


def print_times(times: Mapping[str, list[float]], baseline: str, unit: str = "ms / step") -> dict[str, float]:
    """Prints a table of median and best times and the median per-round ratio; returns the ratios by name."""
    ratios = {
        name: statistics.median(t / b for t, b in zip(values, times[baseline], strict=True))
        for name, values in times.items()
    }
    width = max(len(name) for name in times)
    print(f"| {'variant':<{width}} | {unit} (median) | {unit} (best) | time ratio to {baseline} (median of rounds) |")
    print(f"|{'-' * (width + 2)}|---:|---:|---:|")
    for name, values in times.items():
        print(
            f"| {name:<{width}} | {1000 * statistics.median(values):.2f} | {1000 * min(values):.2f} | "
            f"{ratios[name]:.3f} |"
        )
    return ratios


def sgd_step(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """A step function for :func:`time_interleaved`: forward, cross-entropy backward and an SGD step (lr 0.01,
    momentum 0.9) of ``net`` on the batch ``x``, ``y``."""
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()

    return step


def count_macs(model: nn.Module, *inputs: Any) -> int:
    """Multiply-adds of the ``Conv2d`` and ``Linear`` layers of ``model`` on ``inputs`` (one forward, no grad)."""
    total = [0]

    def hook(module: nn.Module, args: Any, output: torch.Tensor) -> None:
        if isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            total[0] += output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, nn.Linear):
            total[0] += output.numel() * module.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return total[0]


def digits_runs(
    variants: Mapping[str, Sequence[str]], duration: str, seeds: Sequence[int]
) -> dict[str, list[tuple[float, float]]]:
    """``{variant: [(fit seconds, eval accuracy) per seed]}``: the digits baseline recipe with each variant's
    overrides, interleaved by seed (every variant once per seed, in a rotating order), after an untimed warm-up."""
    from composer.cli.compare import measure

    names = list(variants)
    for name in names:
        measure(DIGITS_BASELINE, "2ba", seeds[0], "Accuracy", variants[name])
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for i, seed in enumerate(seeds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            results[name].append(measure(DIGITS_BASELINE, duration, seed, "Accuracy", variants[name]))
            print(
                f"  seed {seed} {name}: {results[name][-1][0]:.1f} s, accuracy {results[name][-1][1]:.4f}", flush=True
            )
    return results


def print_runs(results: Mapping[str, list[tuple[float, float]]], baseline: str) -> None:
    """Prints accuracy (mean, min-max) and the median per-seed ratio of ``fit()`` time to the baseline's."""
    base = results[baseline]
    print(f"| variant | accuracy, mean (min-max) | accuracy delta | fit time ratio to {baseline} (median of seeds) |")
    print("|---|---|---:|---:|")
    base_mean = statistics.mean(a for _, a in base)
    for name, runs in results.items():
        accuracies = [a for _, a in runs]
        ratio = statistics.median(s / b for (s, _), (b, _) in zip(runs, base, strict=True))
        mean = statistics.mean(accuracies)
        print(
            f"| {name} | {mean:.4f} ({min(accuracies):.4f}-{max(accuracies):.4f}) | {mean - base_mean:+.4f} | "
            f"{ratio:.3f} |"
        )


def load_average() -> str:
    """The host's load averages over 1, 5 and 15 minutes, and its CPU count, for a benchmark's report."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
