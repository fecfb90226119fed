"""Loader throughput of the ``streaming`` dataset against LitData's own loader, over the same local shards.

The shards hold ``--samples`` (uint8 image 3 x 32 x 32, label) pairs, written once with LitData's ``BinaryWriter``.
Each round reads one shuffled epoch through each loader, interleaved (the order rotates from round to round, so drift
in machine speed hits both):

* ``litdata``: ``StreamingDataLoader(StreamingDataset(folder, shuffle=True, seed=0), batch_size, num_workers)``, as
  LitData's documentation shows it;
* ``streaming``: ``StreamingShards(folder, num_workers=...).dataloader(batch_size, train=True)``, positioned at the
  start of the epoch as the Trainer does (``start_epoch``).

It prints the median and best seconds per epoch, the samples per second, and the median over rounds of each one's
time ratio to LitData's (the issue's goal: throughput at least 0.95x, a time ratio at most 1/0.95 = 1.053).

Run:  .venv/bin/python benchmarks/streaming_loader.py [--samples 20000] [--rounds 5] [--batch-size 64] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import print_times, time_interleaved  # benchmarks/_interleaved.py, next to this

from composer.datasets.streaming import StreamingShards


def write(folder: Path, samples: int) -> None:
    generator = np.random.default_rng(0)
    writer = BinaryWriter(str(folder), chunk_bytes="8MB")
    for i in range(samples):
        writer[i] = (torch.from_numpy(generator.integers(0, 256, (3, 32, 32), dtype=np.uint8)), i % 10)
    writer.done()
    writer.merge()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "shards"
        write(folder, args.samples)
        baseline = StreamingDataLoader(
            StreamingDataset(str(folder), shuffle=True, seed=0), batch_size=args.batch_size, num_workers=args.workers
        )
        ours = StreamingShards(str(folder), num_workers=args.workers).dataloader(args.batch_size, train=True)
        epochs = {"ours": 0}

        def litdata_epoch() -> None:
            for _ in baseline:
                pass

        def streaming_epoch() -> None:
            ours.start_epoch(epochs["ours"], 0)
            epochs["ours"] += 1
            for _ in ours:
                pass

        times = time_interleaved({"litdata": litdata_epoch, "streaming": streaming_epoch}, args.rounds, 1)
        print(f"{args.samples} samples, batch {args.batch_size}, {args.workers} workers, {args.rounds} rounds")
        print_times(times, "litdata", unit="ms / epoch")
        for name, values in times.items():
            print(f"{name}: {args.samples / statistics.median(values):.0f} samples/s (median epoch)")


if __name__ == "__main__":
    main()
