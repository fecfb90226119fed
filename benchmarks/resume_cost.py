"""Resumption cost: the time from start to the first batch when resuming mid-epoch, against starting fresh.

The sources are those of benchmarks/_data_sources.py (the built-in Python-docs corpus, one BPE tokenizer):
``hf_dataset`` (a parquet file of documents), ``streaming`` (its windows as local LitData shards) and ``streaming
(store)`` (the same shards in a moto server the script starts on 127.0.0.1, each run downloading into an empty
folder; it resumes from the local stream's checkpoints, which hold the same position). The model is
``no_op_model``'s one-parameter stand-in for a small GPT, so that the runs are the data pipeline and the loop. A first
run of each source trains three quarters of an epoch of ``--batch-size`` windows of ``--seq-len`` tokens, saving a
checkpoint at each quarter. Then, in ``--rounds`` rounds (the runs of a round in a rotating order),
a new Trainer over a new loader (``--workers`` workers) either starts fresh or loads the checkpoint of a quarter
(``load_path``), and trains one batch; the time is from the Trainer's construction (the checkpoint's load included;
the loader's construction, the same in both, not) to the first batch ready (its ``AFTER_DATALOADER``).

``hf_dataset (replay)`` is the same loader with its dataset's ``deterministic_samples`` turned off, so the Trainer
draws and drops the batches already trained, as it did before it skipped them without reading: the cost of a replay
grows with the position; a skip's should not.

It prints the load average, and per source the median over rounds of the seconds to the first batch, fresh and at
each quarter of the epoch.

Run:  nice .venv/bin/python benchmarks/resume_cost.py [--rounds 3] [--batch-size 32] [--seq-len 64] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data_sources import Sources, tiny_gpt, training_loader, write_sources  # next to this script
from _interleaved import load_average
from _loopback_store import loopback_store

from composer import Callback, Trainer
from composer.functional import no_op_model

VARIANTS = {
    "hf_dataset": ("hf_dataset", "hf_dataset"),
    "hf_dataset (replay)": ("hf_dataset", "hf_dataset"),
    "streaming": ("streaming", "streaming"),
    "streaming (store)": ("streaming_store", "streaming"),
}
"""Each variant's source, and the source whose checkpoints it resumes from."""


class FirstBatch(Callback):
    """The moment the first batch of a fit is ready."""

    def __init__(self) -> None:
        self.at: float | None = None

    def after_dataloader(self, state: Any, logger: Any) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def loader(variant: str, sources: Sources, args: argparse.Namespace, run: int) -> Any:
    data = training_loader(VARIANTS[variant][0], sources, args.batch_size, args.workers, run)
    if variant.endswith("(replay)"):
        data.dataset.deterministic_samples = False  # the Trainer then replays the batches already trained
    return data


def save_quarters(source: str, sources: Sources, args: argparse.Namespace, folder: Path) -> dict[int, Path]:
    """Trains three quarters of an epoch of ``source``, saving at each quarter; {batch: checkpoint}."""
    data = training_loader(source, sources, args.batch_size, args.workers)
    quarter = len(data) // 4
    trainer = Trainer(
        model=no_op_model(tiny_gpt(sources)),
        train_dataloader=data,
        max_duration="1ep",
        save_folder=str(folder),
        save_interval=f"{quarter}ba",
        save_filename="ba{batch}.pt",
        progress_bar=False,
        seed=0,
    )
    trainer.fit(duration=f"{3 * quarter}ba")
    trainer.close()
    return {k * quarter: folder / f"ba{k * quarter}.pt" for k in (1, 2, 3)}


def first_batch_seconds(
    variant: str, sources: Sources, args: argparse.Namespace, checkpoint: Path | None, run: int
) -> float:
    data = loader(variant, sources, args, run)
    clock = FirstBatch()
    start = time.perf_counter()
    trainer = Trainer(
        model=no_op_model(tiny_gpt(sources)),
        train_dataloader=data,
        max_duration="1ep",
        load_path=None if checkpoint is None else str(checkpoint),
        callbacks=[clock],
        progress_bar=False,
        seed=0,
    )
    trainer.fit(duration="1ba")
    trainer.close()
    assert clock.at is not None
    return clock.at - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=2000)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {load_average()}")
    with tempfile.TemporaryDirectory() as scratch, loopback_store() as endpoint:
        sources = write_sources(Path(scratch), args.seq_len, args.vocab_size, endpoint)
        trained = sorted({source for _, source in VARIANTS.values()})
        saved = {s: save_quarters(s, sources, args, Path(scratch) / s) for s in trained}
        runs = [(v, b) for v in VARIANTS for b in [0, *saved[VARIANTS[v][1]]]]
        seconds: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
        for r in range(args.rounds):
            for i, (variant, batch) in enumerate(runs[r % len(runs) :] + runs[: r % len(runs)]):
                checkpoint = saved[VARIANTS[variant][1]].get(batch)
                run = r * len(runs) + i
                seconds[variant, batch].append(first_batch_seconds(variant, sources, args, checkpoint, run))
            print(f"  round {r} done, {load_average()}", flush=True)
    print(f"\nbatch {args.batch_size} x {args.seq_len} tokens, {args.workers} workers, median of {args.rounds} rounds")
    print("| source | fresh (s) | at 1/4 (s) | at 1/2 (s) | at 3/4 (s) | quarters at batch |")
    print("|---|---:|---:|---:|---:|---|")
    for variant in VARIANTS:
        batches = [0, *saved[VARIANTS[variant][1]]]
        cells = " | ".join(f"{statistics.median(seconds[variant, b]):.2f}" for b in batches)
        print(f"| {variant} | {cells} | {', '.join(map(str, batches[1:]))} |")
    print(f"after: {load_average()}")


if __name__ == "__main__":
    main()
