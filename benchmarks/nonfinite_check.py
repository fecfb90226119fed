"""What the Trainer's default non-finite loss check (``check_finite=True``) costs per training step.

Two Trainers train the same model on the same in-memory batches, one with the check (a DeferredNaNMonitor: each
batch's loss is kept on the device and read once at each epoch's end, before each checkpoint and at the end of
``fit``) and one with ``check_finite=False``. They run in interleaved rounds: each round trains each Trainer
``--steps`` more batches (``fit(duration=...)``; by default one epoch of 100 batches, so that each round holds one
read, at its epoch's end, as a run that checkpoints or ends an epoch every 100 batches would), the order alternating
from round to round, on one CPU thread. A
shared machine changes speed from one second to the next, so whole runs timed one after the other cannot be compared;
short rounds next to each other can, and the time is the thread's CPU time (``time.thread_time``), which other
processes on the machine disturb less than the wall clock. The figure is the median over rounds of the ratio (step
time with the check) / (step time without), with its spread (the 10th and 90th percentiles) and the median
difference per step in microseconds.

Two models: the tests' tiny MLP (8-16-3, batch 4, ~0.1 ms a step), where any per-step cost shows most, and the MLP
256-512-512-10 of ``trainer_overhead.py`` (batch 64).

The per-step cost is small against the noise of a shared machine, so the work the check adds per batch is also timed
alone: the Engine running ``BATCH_END`` with the DeferredNaNMonitor (the Engine's dispatch, keeping the loss and its
batch number, and every 256 batches one ``torch.stack``) against the same Engine with nobody listening, in
interleaved rounds of 10000 events. (With a progress bar or a logger, the default, something already listens at
``BATCH_END``, and the dispatch is paid anyway.)

It also counts the host reads of tensor values (``bool``, ``.item()``, ``.tolist()``, ``float``, ``int``, ``.cpu()``,
``.numpy()``; each one is a device sync on CUDA) that the check adds over 1000 batches: on a CPU a sync costs nothing,
so the timing cannot show what a GPU would pay, but the count can, and it must not grow with the number of batches.

Run:  .venv/bin/python benchmarks/nonfinite_check.py [--rounds 100] [--steps 100]
Target: no host read per batch (one per epoch end or checkpoint); median ratio <= 1.02 on the tiny model.
Measured on 2 shared, busy cores: 0 reads per batch (1 per 100-batch epoch); recording 1.33 us a batch; median ratio
1.030 on the tiny model (+7.6 us a step; 10th-90th percentile 0.95-1.17) and 1.014 on the MLP (0.92-1.13), against
1.004 for two identical Trainers (an A/A run of the same rounds): the end-to-end figure is within this machine's
noise of the recording's cost, and the tiny model's target is not shown met here.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from composer import Event, State, Trainer
from composer.callbacks.nan_monitor import DeferredNaNMonitor
from composer.core.engine import Engine
from composer.models import MLP, ComposerClassifier

__all__: list[str] = []

_READS = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__", "cpu", "numpy")


def make_batches(num_batches: int, batch_size: int, in_features: int, num_classes: int) -> list[Any]:
    g = torch.Generator().manual_seed(0)
    return [
        (torch.randn(batch_size, in_features, generator=g), torch.randint(0, num_classes, (batch_size,), generator=g))
        for _ in range(num_batches)
    ]


def make_trainer(model_factory: Callable[[], ComposerClassifier], batches: list[Any], check_finite: bool) -> Trainer:
    torch.manual_seed(0)
    model = model_factory()
    return Trainer(
        model=model,
        train_dataloader=batches,
        max_duration="1ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        device="cpu",
        progress_bar=False,
        seed=0,
        check_finite=check_finite,
    )


def time_round(trainer: Trainer, steps: int) -> float:
    """CPU seconds per step over ``steps`` more batches."""
    start = time.thread_time()
    trainer.fit(duration=f"{steps}ba")
    return (time.thread_time() - start) / steps


@contextlib.contextmanager
def count_host_reads() -> Iterator[list[int]]:
    count = [0]
    originals = {name: getattr(torch.Tensor, name) for name in _READS}

    def counting(original: Any) -> Any:
        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(self, *args, **kwargs)

        return read

    try:
        for name, original in originals.items():
            setattr(torch.Tensor, name, counting(original))
        yield count
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def added_reads(model_factory: Callable[[], ComposerClassifier], batches: list[Any], steps: int) -> int:
    counts = []
    for check_finite in (True, False):
        trainer = make_trainer(model_factory, batches, check_finite)
        with count_host_reads() as count:
            trainer.fit(duration=f"{steps}ba")
        trainer.close()
        counts.append(count[0])
    return counts[0] - counts[1]


def measure(name: str, model_factory: Callable[[], ComposerClassifier], batches: list[Any], args: Any) -> None:
    on, off = make_trainer(model_factory, batches, True), make_trainer(model_factory, batches, False)
    for trainer in (on, off):  # warm-up: first calls, allocator, the first epoch's start
        time_round(trainer, args.steps)
    ratios, differences = [], []
    for round_index in range(args.rounds):
        pair = [(on, True), (off, False)] if round_index % 2 == 0 else [(off, False), (on, True)]
        seconds = {checked: time_round(trainer, args.steps) for trainer, checked in pair}
        ratios.append(seconds[True] / seconds[False])
        differences.append((seconds[True] - seconds[False]) * 1e6)
    on.close()
    off.close()
    deciles = statistics.quantiles(ratios, n=10)
    print(
        f"{name}: step with the check / without: median {statistics.median(ratios):.4f} "
        f"(10th-90th percentile {deciles[0]:.4f}-{deciles[-1]:.4f}, {args.rounds} rounds of {args.steps} steps); "
        f"median difference {statistics.median(differences):+.2f} us a step"
    )
    reads = [added_reads(model_factory, batches, steps) for steps in (100, 1000)]
    print(
        f"{name}: host reads added by the check: {reads[0]} over 100 batches, {reads[1]} over 1000 "
        f"({len(batches)} batches an epoch: one read at each epoch's end, none per batch)"
    )


def record_cost(rounds: int, events: int = 10_000) -> None:
    """Microseconds the DeferredNaNMonitor adds to one BATCH_END event (the per-batch part of the check)."""
    model = torch.nn.Linear(2, 2)
    differences = []
    for round_index in range(rounds):
        seconds = {}
        for checked in (True, False) if round_index % 2 == 0 else (False, True):
            state = State(model=model, max_duration="1ep", callbacks=[DeferredNaNMonitor()] if checked else [])
            state.loss = model(torch.ones(1, 2)).sum().detach()  # at BATCH_END: the batch's loss, detached
            state.timer.on_batch_complete()
            engine = Engine(state)
            start = time.thread_time()
            for _ in range(events):
                if engine.listening[Event.BATCH_END]:  # what the Trainer does: skip an event nobody handles
                    engine.run_event(Event.BATCH_END)
            seconds[checked] = time.thread_time() - start
        differences.append((seconds[True] - seconds[False]) / events * 1e6)
    print(
        f"per batch, the check's recording (Engine dispatch included): median {statistics.median(differences):.2f}"
        f" us ({rounds} rounds of {events} events)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    record_cost(max(5, args.rounds // 10))
    measure(
        "tiny MLP 8-16-3, batch 4",
        lambda: ComposerClassifier(MLP(8, (16,), 3), num_classes=3),
        make_batches(100, 4, 8, 3),
        args,
    )
    measure(
        "MLP 256-512-512-10, batch 64",
        lambda: ComposerClassifier(MLP(256, (512, 512), 10), num_classes=10),
        make_batches(100, 64, 256, 10),
        args,
    )


if __name__ == "__main__":
    main()
