"""Per-step overhead of the Trainer against a hand-written PyTorch loop.

The MLP 256-512-512-10, batch 64, plain SGD, on an in-memory TensorDataset of 100 batches, one CPU thread, 2000 steps
(20 epochs). The Trainer runs with no algorithms, no loggers and no progress bar; a second Trainer runs with what a
user watching a run turns on: a progress bar (drawing its bars into memory, so that the timing does not depend on the
terminal), a SpeedMonitor and an LRMonitor.

Interleaving, step by step. A shared machine changes speed by tens of percent from one second to the next, more than
the few percent measured here, so whole runs timed one after the other cannot be compared. Instead the hand-written
loop runs inside the Trainer's loader: the hand loop (its own model and optimizer, started from the same weights)
trains one step on each batch, timed, just before the batch is handed to the Trainer (even steps) or just after the
Trainer asks for the next one (odd steps; whichever step runs second is a little faster). The Trainer's step is the
time from handing out the batch to asking for the next one (so it holds everything the Trainer does per batch, its
per-epoch work included); fetching a batch from the DataLoader counts for neither. Each Trainer step thus has a
hand-loop step on the same batch right next to it.

Statistics, over ``--rounds`` rounds (each a fresh hand loop paired with a fresh Trainer, and another fresh pair for
the monitored Trainer):

* best-run ratio: the smallest Trainer run total (the sum of its 2000 steps) over the smallest total of the hand
  loops paired with it;
* median per-step overhead: the median, over all paired steps, of Trainer step minus hand-loop step; also given as a
  ratio, 1 + that median over the median hand-loop step, which a loaded machine's pauses move less than run totals.

Run:  .venv/bin/python benchmarks/trainer_overhead.py [--steps 2000] [--rounds 10]
Targets (issue 20): best-run ratio (Trainer / hand loop) <= 1.02 and median per-step overhead <= 75 us;
         with the progress bar, SpeedMonitor and LRMonitor: best-run ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.callbacks import LRMonitor, SpeedMonitor
from composer.loggers import ProgressBarLogger
from composer.models import MLP, ComposerClassifier

__all__: list[str] = []


def make_loader(num_batches: int, batch_size: int = 64) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(num_batches * batch_size, 256, generator=g)
    y = torch.randint(0, 10, (num_batches * batch_size,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


class HandLoop:
    """The hand-written loop, one step at a time."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = MLP(256, (512, 512), 10)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.model.train()

    def step(self, batch: Any) -> None:
        x, y = batch
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(x), y).backward()
        self.opt.step()


class PairedLoader:
    """The Trainer's loader: pairs each Trainer step with a timed hand-loop step on the same batch.

    The hand loop goes first on even steps and second on odd ones (when the Trainer asks for the next batch), so
    neither loop always runs just after the other.
    """

    def __init__(self, loader: DataLoader, hand: HandLoop) -> None:
        self.loader = loader
        self.hand = hand
        self.hand_seconds: list[float] = []
        self.trainer_seconds: list[float] = []
        self._handed_out: float | None = None  # when the Trainer got its latest batch
        self._hand_after: Any = None  # the batch the hand loop trains once the Trainer's step on it is over
        self._count = 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        batches = iter(self.loader)
        while True:
            self.trainer_step_done()
            try:
                batch = next(batches)
            except StopIteration:
                return
            self._count += 1
            if self._count % 2:
                self._hand_step(batch)
            else:
                self._hand_after = batch
            self._handed_out = time.perf_counter()
            yield batch

    def _hand_step(self, batch: Any) -> None:
        start = time.perf_counter()
        self.hand.step(batch)
        self.hand_seconds.append(time.perf_counter() - start)

    def trainer_step_done(self) -> None:
        """The Trainer asks for the next batch (or its run ended): its step on the previous batch is over."""
        now = time.perf_counter()
        if self._handed_out is not None:
            self.trainer_seconds.append(now - self._handed_out)
            self._handed_out = None
        if self._hand_after is not None:
            batch, self._hand_after = self._hand_after, None
            self._hand_step(batch)


def run_pair(loader: DataLoader, steps: int, monitored: bool) -> tuple[list[float], list[float]]:
    """A fresh hand loop and a fresh Trainer, ``steps`` steps each; returns their step durations (paired)."""
    paired = PairedLoader(loader, HandLoop())
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(256, (512, 512), 10), num_classes=10)
    trainer = Trainer(
        model=model,
        train_dataloader=paired,
        max_duration=f"{steps}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        device="cpu",
        progress_bar=False,
        loggers=[ProgressBarLogger(enabled=True, stream=io.StringIO())] if monitored else None,
        callbacks=[SpeedMonitor(), LRMonitor()] if monitored else None,
        seed=0,
    )
    trainer.fit()
    paired.trainer_step_done()  # the last step ends when fit returns
    trainer.close()
    return paired.hand_seconds, paired.trainer_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loader = make_loader(num_batches=100)
    run_pair(loader, 100, monitored=False)  # warm up allocator and kernels
    hand_steps: list[float] = []
    hand_totals: dict[str, list[float]] = {"trainer": [], "monitored": []}
    totals: dict[str, list[float]] = {"trainer": [], "monitored": []}
    differences: dict[str, list[float]] = {"trainer": [], "monitored": []}
    for r in range(args.rounds):
        line = [f"round {r}:"]
        for name in ("trainer", "monitored") if r % 2 == 0 else ("monitored", "trainer"):
            hand, trainer = run_pair(loader, args.steps, monitored=name == "monitored")
            assert len(hand) == len(trainer) == args.steps, (len(hand), len(trainer))
            hand_totals[name].append(sum(hand))
            totals[name].append(sum(trainer))
            differences[name].extend(t - h for h, t in zip(hand, trainer, strict=True))
            hand_steps.extend(hand)
            line.append(f"{name} {sum(trainer):.3f}s vs hand {sum(hand):.3f}s (ratio {sum(trainer) / sum(hand):.4f})")
        print("  ".join(line), flush=True)
    print(f"hand loop step (best run): {min(min(t) for t in hand_totals.values()) / args.steps * 1e6:.1f} us")
    for name, label, target in (
        ("trainer", "Trainer", 1.02),
        ("monitored", "with progress bar + SpeedMonitor + LRMonitor", 1.05),
    ):
        overhead_us = statistics.median(differences[name]) * 1e6
        print(f"{label}: best-run ratio {min(totals[name]) / min(hand_totals[name]):.4f} (target <= {target})")
        # The median overhead over the median hand-loop step: a ratio that pauses of the shared machine (which land
        # in whole-run totals) do not move.
        median_ratio = 1 + statistics.median(differences[name]) / statistics.median(hand_steps)
        print(
            f"{label}: median per-step overhead {overhead_us:.1f} us"
            + (" (target <= 75 us)" if name == "trainer" else "")
            + f", {median_ratio:.4f}x the median hand-loop step"
        )


if __name__ == "__main__":
    main()
