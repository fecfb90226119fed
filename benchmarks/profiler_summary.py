"""The profiler on the overhead benchmark's MLP: its trace and summary, and what profiling itself costs.

The run of benchmarks/trainer_overhead.py (MLP 256-512-512-10, batch 64, plain SGD, one CPU thread) with the progress
bar (into memory), a SpeedMonitor and an LRMonitor, profiled with ``Profiler(wait=1, warmup=1, active=3)``. It prints
the summary table the Trainer prints, checks that the trace holds the named ranges (each event, each callback handler,
each loop stage), and lists the files written.

Then the cost of profiling per step: ``--rounds`` rounds, each an unprofiled and a profiled run of ``--steps`` steps
(order alternating). A step is timed from one batch handed out by the loader to the next (so the start and end of
``fit`` are not in it: starting the torch profiler, writing the trace, the summary and its chart). Reported: the
median step of each (over all rounds' steps) and their ratio, which is the cost of the named ranges and their timing
at every step; and the mean step of each, which also holds the few steps the torch profiler records in full.

Run:  .venv/bin/python benchmarks/profiler_summary.py [--steps 300] [--rounds 4] [--folder runs/profiler_summary]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from composer import Trainer
from composer.callbacks import LRMonitor, SpeedMonitor
from composer.loggers import ProgressBarLogger
from composer.models import MLP, ComposerClassifier
from composer.trainer import Profiler

__all__: list[str] = []


def make_loader(num_batches: int, batch_size: int = 64) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(num_batches * batch_size, 256, generator=g)
    y = torch.randint(0, 10, (num_batches * batch_size,), generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)


class TimedLoader:
    """The loader, noting when each batch is handed out."""

    def __init__(self, loader: torch.utils.data.DataLoader) -> None:
        self.loader = loader
        self.handed_out: list[float] = []

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            self.handed_out.append(time.perf_counter())
            yield batch

    def steps(self) -> list[float]:
        return [b - a for a, b in zip(self.handed_out, self.handed_out[1:])]


def run(loader: Any, steps: int, profiler: Profiler | None) -> tuple[float, Trainer]:
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(256, (512, 512), 10), num_classes=10)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{steps}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        device="cpu",
        progress_bar=False,
        loggers=[ProgressBarLogger(enabled=True, stream=io.StringIO())],
        callbacks=[SpeedMonitor(), LRMonitor()],
        seed=0,
        run_name="mlp",
        profiler=profiler,
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    trainer.close()
    return seconds, trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--folder", default="runs/profiler_summary")
    args = parser.parse_args()
    torch.set_num_threads(1)
    loader = make_loader(num_batches=100)
    profiler = Profiler(wait=1, warmup=1, active=3, folder=str(Path(args.folder) / "{run_name}"), print_summary=False)

    _, trainer = run(loader, 20, profiler)  # the trace and summary of a short run (also warms up)
    session = trainer.profiler
    assert session is not None and session.summary is not None
    print(session.summary.table())
    names = {event.get("name") for event in json.loads(session.traces[0].read_text())["traceEvents"]}
    ranges = sorted(
        name for name in names if isinstance(name, str) and name.split("/")[0] in ("event", "callback", "trainer")
    )
    print(f"\n{len(ranges)} named ranges in {session.traces[0]}, e.g. {ranges[:3]}")
    print("files:", ", ".join(sorted(path.name for path in session.folder.iterdir())))

    steps: dict[str, list[float]] = {"unprofiled": [], "profiled": []}
    for r in range(args.rounds):
        line = [f"round {r}:"]
        for name in ("unprofiled", "profiled") if r % 2 == 0 else ("profiled", "unprofiled"):
            timed = TimedLoader(loader)
            run(timed, args.steps, profiler if name == "profiled" else None)
            steps[name] += timed.steps()
            line.append(f"{name} median step {1000 * statistics.median(timed.steps()):.3f} ms")
        print("  ".join(line), flush=True)
    medians = {name: statistics.median(values) for name, values in steps.items()}
    means = {name: statistics.fmean(values) for name, values in steps.items()}
    for name in steps:
        print(f"{name}: median step {1000 * medians[name]:.3f} ms, mean step {1000 * means[name]:.3f} ms")
    print(
        f"cost of profiling per step: median ratio {medians['profiled'] / medians['unprofiled']:.3f}, "
        f"mean ratio (with the recorded steps) {means['profiled'] / means['unprofiled']:.3f}"
    )


if __name__ == "__main__":
    main()
