"""Per-step cost of OptimizerMonitor, logging every batch and every 10 batches, against no monitor.

The MLP 256-512-512-10 (400k parameters), batch 64, SGD, one CPU thread, an InMemoryLogger as the destination (so
every value the monitor offers is computed). Four Trainers (no monitor; a second one without monitor, whose
ratio shows the noise; ``OptimizerMonitor('1ba')``; ``OptimizerMonitor('10ba')``) train in lockstep, one batch each in
turn (``fit(duration='1ba')``, the order rotating
every step), so that a shared machine's changes of speed hit all three alike. A step is timed from the first
callback's ``BATCH_START`` to the last callback's ``BATCH_END``: the forward, backward and optimizer step, plus the
monitor's copy at ``AFTER_TRAIN_BATCH`` and its norms and host sync at ``BATCH_END``.

Statistics: the median step time of each Trainer, its ratio to the baseline's, and the median over steps of the
paired difference (monitored step minus the baseline step of the same round); for ``'10ba'``, the ratio of its steps
that do not log; and the median time spent inside the monitor's hooks on the steps that log (the parameter copy; the
norms with the host sync), which a loaded machine disturbs least.

Run:  .venv/bin/python benchmarks/optimizer_monitor.py [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Callback, Trainer
from composer.callbacks import OptimizerMonitor
from composer.loggers import InMemoryLogger
from composer.models import MLP, ComposerClassifier

__all__: list[str] = []


class StepStart(Callback):
    def __init__(self) -> None:
        self.started = 0.0

    def batch_start(self, state, logger) -> None:  # type: ignore[no-untyped-def]
        self.started = time.perf_counter()


class StepEnd(Callback):
    def __init__(self, start: StepStart) -> None:
        self.start = start
        self.seconds: list[float] = []

    def batch_end(self, state, logger) -> None:  # type: ignore[no-untyped-def]
        self.seconds.append(time.perf_counter() - self.start.started)


class TimedMonitor(OptimizerMonitor):
    """The monitor, timing its own hooks on the steps that log (the copy; the norms and the host sync)."""

    def __init__(self, log_interval: str) -> None:
        super().__init__(log_interval=log_interval)
        self.copy: list[float] = []
        self.norms: list[float] = []

    def after_train_batch(self, state, logger) -> None:  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        super().after_train_batch(state, logger)
        if self._before is not None:
            self.copy.append(time.perf_counter() - started)

    def batch_end(self, state, logger) -> None:  # type: ignore[no-untyped-def]
        due = self._due_batch >= 0
        started = time.perf_counter()
        super().batch_end(state, logger)
        if due:
            self.norms.append(time.perf_counter() - started)


def make_trainer(monitor: Callback | None, steps: int) -> tuple[Trainer, StepEnd]:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(steps * 64, 256, generator=g), torch.randint(0, 10, (steps * 64,), generator=g))
    model = ComposerClassifier(MLP(in_features=256, hidden=(512, 512), num_classes=10), num_classes=10)
    start = StepStart()
    end = StepEnd(start)
    callbacks: list[Callback] = [start, *([monitor] if monitor is not None else []), end]
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=64),
        max_duration="1ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        callbacks=callbacks,
        loggers=[InMemoryLogger()],
        progress_bar=False,
    )
    return trainer, end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    monitors = {"every batch": TimedMonitor(log_interval="1ba"), "every 10 batches": TimedMonitor(log_interval="10ba")}
    runs = {
        "no monitor": make_trainer(None, args.steps),
        "no monitor (A/A)": make_trainer(None, args.steps),
        **{name: make_trainer(monitor, args.steps) for name, monitor in monitors.items()},
    }
    names = list(runs)
    for step in range(args.steps):
        shift = step % len(names)
        for name in names[shift:] + names[:shift]:
            trainer, _ = runs[name]
            if step == 0:
                trainer.fit()
            else:
                trainer.fit(duration="1ba")
    base = runs["no monitor"][1].seconds[10:]  # the first batches warm up
    base_median = statistics.median(base)
    print(f"{args.steps} steps each, median step time (first 10 skipped); torch threads = 1")
    print(f"  {'no monitor':<18} {base_median * 1e3:8.3f} ms")
    for name in names[1:]:
        seconds = runs[name][1].seconds[10:]
        median = statistics.median(seconds)
        paired = statistics.median(s - b for s, b in zip(seconds, base))
        print(
            f"  {name:<18} {median * 1e3:8.3f} ms  ratio {median / base_median:.3f}  "
            f"median paired overhead {paired * 1e6:+.0f} us"
        )
    every10 = runs["every 10 batches"][1].seconds
    quiet = [s for i, s in enumerate(every10) if i >= 10 and (i + 1) % 10]
    print(f"  every 10 batches, the 9 steps without a log: ratio {statistics.median(quiet) / base_median:.3f}")
    for name in ("every batch", "every 10 batches"):
        monitor = monitors[name]
        print(
            f"  {name}: time inside the monitor per logging step, median: copy {statistics.median(monitor.copy) * 1e6:.0f}"
            f" us, norms and sync {statistics.median(monitor.norms) * 1e6:.0f} us"
        )
    for trainer, _ in runs.values():
        trainer.close()


if __name__ == "__main__":
    main()
