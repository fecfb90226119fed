"""SpeedMonitor's data-wait fraction in a small training run on each data source.

The sources (benchmarks/_data_sources.py) are the built-in Python-docs corpus, tokenized by one BPE tokenizer trained
on it (vocabulary ``--vocab-size``), as ``hf_dataset`` (a parquet file of its documents), ``streaming`` (its windows
as LitData shards in a local folder), ``streaming_store`` (the same shards in a moto server the script starts on
127.0.0.1, downloaded into an empty folder each run), ``text_files`` (the corpus as a text file) and
``python_docs``. Each run trains a 2-layer GPT (width 64) for ``--batches`` batches of ``--batch-size`` windows of
``--seq-len`` tokens, with ``--workers`` DataLoader workers, ``--threads`` torch threads in the training process and
``SpeedMonitor(window_size=batches)``; the runs of each round go through the sources in a rotating order.

For each source it prints the median over rounds of: the seconds per batch (median of the run), SpeedMonitor's
``time/data_wait_fraction`` at the last batch (the whole run, the first batch with the workers' start included), the
same fraction without the first batch (the steady state: the batches' ``time/data_wait`` over their ``time/batch``),
and the first batch's wait. It prints the load average before and after.

Run:  nice .venv/bin/python benchmarks/data_wait.py [--batches 40] [--rounds 3] [--batch-size 16] [--seq-len 64]
      [--workers 2] [--threads 1] [--sources hf_dataset streaming ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data_sources import SOURCES, Sources, tiny_gpt, training_loader, write_sources  # next to this script
from _interleaved import load_average
from _loopback_store import loopback_store

from composer import Trainer
from composer.callbacks import SpeedMonitor
from composer.loggers import InMemoryLogger


def run(source: str, sources: Sources, args: argparse.Namespace, round_: int) -> tuple[float, float, float, float]:
    """(median s per batch, whole-run wait fraction, steady-state wait fraction, first batch's wait) of one run."""
    memory = InMemoryLogger()
    trainer = Trainer(
        model=tiny_gpt(sources),
        train_dataloader=training_loader(source, sources, args.batch_size, args.workers, round_),
        max_duration=f"{args.batches}ba",
        callbacks=[SpeedMonitor(window_size=args.batches)],
        loggers=[memory],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()
    waits, batches = memory.values("time/data_wait"), memory.values("time/batch")
    steady = sum(waits[1:]) / sum(batches[1:])
    return statistics.median(batches), memory.values("time/data_wait_fraction")[-1], steady, waits[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the training process")
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {load_average()}")
    with tempfile.TemporaryDirectory() as scratch, loopback_store() as endpoint:
        sources = write_sources(Path(scratch), args.seq_len, args.vocab_size, endpoint)
        names = list(args.sources)
        results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in names}
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                results[name].append(run(name, sources, args, r))
                print(f"  round {r} {name}: {results[name][-1]}", flush=True)
    print(
        f"\n{args.batches} batches of {args.batch_size} x {args.seq_len} tokens (vocabulary {sources.vocab_size}), "
        f"{args.workers} workers, 2-layer GPT width 64, median of {args.rounds} rounds"
    )
    print("| source | s / batch | data-wait fraction (run) | without the first batch | first batch's wait (s) |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in results.items():
        second, whole, steady, first = (statistics.median(values) for values in zip(*runs, strict=True))
        print(f"| {name} | {second:.3f} | {whole:.3f} | {steady:.3f} | {first:.2f} |")
    print(f"after: {load_average()}")


if __name__ == "__main__":
    main()
