"""Do even image sizes make progressive resizing faster? Step time per side length, and the cost of a whole schedule.

``resize_inputs`` shrinks a side of length ``H`` to ``int(H * scale)`` pixels (the seed's formula); with
``size_multiple=2`` it rounds that down to an even number. This script measures whether the rounding pays off:

1. Step time (forward + loss + backward + SGD update) of a CIFAR ResNet (``--depth``, default 20) on a batch of
   ``--batch`` random images at every side length from ``--min-side`` to ``--side``, on one CPU thread. Sizes are
   timed in turn within each round (interleaved, so drift in machine speed hits all of them); the best step of all
   rounds is reported, as load on a shared machine can only inflate it. Odd sides are compared with the mean of the
   two even neighbours' time per pixel: if odd sizes were slow kernels, that ratio would be well above 1.
2. The sizes a run sees with ``ProgressiveResizing(initial_scale, finetune_fraction)`` over ``--run-steps`` batches,
   for ``size_multiple`` 1 and 2: how many distinct shapes (each new shape costs a cuDNN autotune under
   ``torch.backends.cudnn.benchmark`` and, for a model compiled with static shapes, a recompilation), and the
   summed step time of the schedule predicted from the table of part 1.

Run:  .venv/bin/python benchmarks/progressive_resizing_sizes.py [--rounds 3] [--steps 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from composer.algorithms.progressive_resizing import resize_scale, scaled_size
from composer.models.resnet_cifar import cifar_resnet

__all__: list[str] = []


def _step_time(model: torch.nn.Module, optimizer: torch.optim.Optimizer, X: torch.Tensor, y: torch.Tensor) -> float:
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(X), y)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def measure(depth: int, batch: int, sides: list[int], rounds: int, steps: int) -> list[dict[int, float]]:
    """Per round, the best seconds per step at each side length (the sides run back to back within a round)."""
    torch.manual_seed(0)
    model = cifar_resnet(depth).module.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    data = {s: (torch.randn(batch, 3, s, s, generator=g), torch.randint(0, 10, (batch,), generator=g)) for s in sides}
    for s in sides:  # warm-up: first-call allocations at every size
        _step_time(model, optimizer, *data[s])
    per_round = []
    for r in range(rounds):
        # Alternate the direction so that neither end of the size range always runs first.
        order = sides if r % 2 == 0 else sides[::-1]
        per_round.append({s: min(_step_time(model, optimizer, *data[s]) for _ in range(steps)) for s in order})
    return per_round


def _odd_ratios(times: dict[int, float], batch: int) -> dict[int, float]:
    # Time per pixel at an odd side over the mean time per pixel of its two even neighbours.
    per_pixel = {s: t / (s * s * batch) for s, t in times.items()}
    return {
        s: per_pixel[s] / ((per_pixel[s - 1] + per_pixel[s + 1]) / 2)
        for s in per_pixel
        if s % 2 and s - 1 in per_pixel and s + 1 in per_pixel
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--min-side", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--initial-scale", type=float, default=0.5)
    parser.add_argument("--finetune-fraction", type=float, default=0.2)
    parser.add_argument("--run-steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)

    sides = list(range(args.min_side, args.side + 1))
    per_round = measure(args.depth, args.batch, sides, args.rounds, args.steps)
    best = {s: min(r[s] for r in per_round) for s in sides}
    round_ratios = [_odd_ratios(r, args.batch) for r in per_round]
    print(f"CIFAR ResNet-{args.depth}, batch {args.batch}, 1 CPU thread, {args.rounds} rounds of {args.steps} step(s)")
    print("| side | best ms / step | best us / pixel / sample | odd side: per-pixel time / even neighbours' (median) |")
    print("|---:|---:|---:|---:|")
    for s in sides:
        ratio = f"{statistics.median(r[s] for r in round_ratios):.3f}" if s in round_ratios[0] else ""
        print(f"| {s} | {best[s] * 1e3:.1f} | {best[s] / (s * s * args.batch) * 1e6:.3f} | {ratio} |")
    all_ratios = [value for r in round_ratios for value in r.values()]
    if all_ratios:
        quartiles = statistics.quantiles(all_ratios, n=4)
        print(
            f"odd/even per-pixel ratio over all rounds and odd sides: median {statistics.median(all_ratios):.3f}, "
            f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}"
        )

    print(
        f"\nSchedule: side {args.side}, initial_scale={args.initial_scale}, "
        f"finetune_fraction={args.finetune_fraction}, {args.run_steps} batches"
    )
    for multiple in (1, 2):
        seen = [
            scaled_size(
                args.side,
                resize_scale(b / args.run_steps, args.initial_scale, args.finetune_fraction),
                size_multiple=multiple,
            )
            for b in range(args.run_steps)
        ]
        predicted = sum(best.get(s, best[args.side]) for s in seen)
        print(
            f"size_multiple={multiple}: {len(set(seen))} distinct sizes, mean side {statistics.mean(seen):.2f}, "
            f"predicted time {predicted:.1f} s"
        )


if __name__ == "__main__":
    main()
