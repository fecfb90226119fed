"""Step time of the training-dynamics methods against a plain step, on CIFAR ResNet-56 on one CPU thread.

One step is forward + loss + backward + SGD update of a CIFAR ResNet-56 (``cifar_resnet(56)``) on a batch of 128
random 3x32x32 images, in a hand-written loop that calls the methods' pure functions (so the figures are the methods'
own cost, without the Trainer's per-step overhead of well under a millisecond). Configurations:

* ``full``: the plain step at 32x32.
* ``progressive_resizing``: ``resize_inputs(X, y, 0.5)`` (bilinear, 16x16) then the step: the scale at the start
  of a run with ``initial_scale=0.5``.
* ``selective_backprop``: ``select_using_loss(X, y, model, keep=0.5, scale_factor=0.5)`` (a no-grad forward on
  16x16 inputs, then 64 samples drawn) then the step on the kept 64.
* ``layer_freezing``: the first half of the layers frozen (``freeze_layers`` at half of a run with
  ``freeze_start=0, freeze_level=1``), then the step. Forward, backward and update are also timed separately.

Each round runs every configuration for ``--steps`` steps, in turn (interleaved, so drift in machine speed hits all
of them). Two statistics of the ratio to ``full`` are reported: the ratio of the best (minimum) step times, which
load on a shared machine can only inflate, and the median over rounds of the ratio within each round.

Run:  .venv/bin/python benchmarks/training_dynamics.py [--steps 1] [--rounds 8]
Targets: progressive_resizing <= 0.40x full; selective_backprop <= 0.75x full; layer_freezing backward < full backward.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from composer.functional import freeze_layers, resize_inputs, select_using_loss
from composer.models import ComposerClassifier
from composer.models.resnet_cifar import cifar_resnet

__all__: list[str] = []

BATCH = 128
Transform = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class Setup:
    """A model, its optimizer and the batch transform of one configuration, plus its timings."""

    def __init__(self, name: str, transform: Transform | None = None, freeze_half: bool = False) -> None:
        torch.manual_seed(0)
        self.name = name
        self.model: ComposerClassifier = cifar_resnet(56)
        self.model.train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        if freeze_half:
            freeze_layers(self.model, self.optimizer, 1, 2, freeze_start=0.0, freeze_level=1.0)
        self.transform = transform
        self.step_times: list[float] = []  # per round: seconds per step
        self.phase_times: dict[str, list[float]] = {"select": [], "forward": [], "backward": [], "update": []}

    def run(self, X: torch.Tensor, y: torch.Tensor, steps: int) -> None:
        phases = dict.fromkeys(self.phase_times, 0.0)
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            Xs, ys = self.transform(X, y) if self.transform is not None else (X, y)
            t1 = time.perf_counter()
            self.optimizer.zero_grad(set_to_none=True)
            batch = (Xs, ys)
            loss = self.model.loss(self.model(batch), batch)
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            self.optimizer.step()
            t4 = time.perf_counter()
            for key, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                phases[key] += seconds
        self.step_times.append((time.perf_counter() - start) / steps)
        for key, total in phases.items():
            self.phase_times[key].append(total / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1, help="steps per configuration per round")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(BATCH, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (BATCH,), generator=g)

    selection_rng = torch.Generator().manual_seed(0)
    sb = Setup("selective_backprop")
    sb.transform = lambda X, y: select_using_loss(X, y, sb.model, 0.5, 0.5, generator=selection_rng)
    setups = [
        Setup("full"),
        Setup("progressive_resizing", transform=lambda X, y: resize_inputs(X, y, 0.5, mode="resize")),
        sb,
        Setup("layer_freezing", freeze_half=True),
    ]
    frozen = sum(not p.requires_grad for p in setups[-1].model.parameters())
    print(f"layer_freezing: {frozen} of {sum(1 for _ in setups[-1].model.parameters())} parameter tensors frozen")

    for setup in setups:  # warm-up: allocator, kernel selection
        setup.run(X, y, 1)
        setup.step_times.clear()
        for times in setup.phase_times.values():
            times.clear()
    for r in range(args.rounds):
        for setup in setups:
            setup.run(X, y, args.steps)
        print(f"round {r}: " + "  ".join(f"{s.name} {s.step_times[-1] * 1e3:.0f} ms" for s in setups), flush=True)

    full = setups[0]
    print(f"\nstep time and ratio to full, {args.rounds} rounds of {args.steps} steps (batch {BATCH}, 1 thread):")
    print(f"  {'':22s} {'best':>8s} {'ratio':>6s}  {'median':>8s} {'ratio':>6s}   phases (best)")
    for setup in setups:
        ratios = [t / f for t, f in zip(setup.step_times, full.step_times)]
        phases = ", ".join(f"{k} {min(v) * 1e3:.0f} ms" for k, v in setup.phase_times.items())
        print(
            f"  {setup.name:22s} {min(setup.step_times) * 1e3:6.0f}ms {min(setup.step_times) / min(full.step_times):6.3f}"
            f"  {statistics.median(setup.step_times) * 1e3:6.0f}ms {statistics.median(ratios):6.3f}   ({phases})"
        )
    frozen_bw, full_bw = setups[-1].phase_times["backward"], full.phase_times["backward"]
    median_bw = statistics.median(b / f for b, f in zip(frozen_bw, full_bw))
    print(
        f"  layer_freezing backward / full backward: best {min(frozen_bw) / min(full_bw):.3f}, median {median_bw:.3f}"
    )
    print("targets: progressive_resizing <= 0.40, selective_backprop <= 0.75, layer_freezing backward < 1")


if __name__ == "__main__":
    main()
