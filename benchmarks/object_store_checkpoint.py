"""What saving a ~100 MB checkpoint to an S3-compatible store every N batches costs per training step.

Two Trainers train the same ~105 MB model (one ``Linear(5120, 5120)``, plain SGD, so the checkpoint is the weights:
105 MB) on the same in-memory batches: one saves to ``s3://BUCKET/bench`` every ``--every`` batches (written locally
first, atomically and with its checksum, on the training thread; then uploaded by the background worker, multipart),
the other saves nothing. They run in interleaved rounds (the order alternating), each round training each Trainer
``--windows`` x ``--every`` more batches with ``fit(duration=...)``; a warm-up of half an interval first puts every
save in the middle of a round. A step's time is the wall clock from one ``BATCH_START`` to the next, so it holds the
local write of the checkpoints saved at that step, and the competition of the background upload for the CPU during
the following steps; the end of each round, where ``fit`` waits for the last upload, is not a step and is not
counted. The figure is the median over rounds of (mean step time with saving) / (mean step time without).

The store is a local moto server, started by the benchmark as a subprocess on a free loopback port at nice 10 (it
stands in for a store on another machine, so its own CPU work should not be counted as the training machine's; the
upload worker runs at nice 10 too, as it always does on Linux), or the one at ``--endpoint-url``; credentials come
from the standard AWS variables, which default to dummies for moto.

Run:  .venv/bin/python benchmarks/object_store_checkpoint.py [--rounds 5] [--every 100] [--windows 2]
Or against a server you started:  moto_server -H 127.0.0.1 -p 5000  then  --endpoint-url http://127.0.0.1:5000
Target: median ratio <= 1.05.
Measured on 2 cores shared with other work (2026-12-01), ``--every 100 --windows 1 --threads 1 --rounds 7``: 105 MB
every 100 batches (about every 16 s), median step 156.3 ms saving vs 155.6 ms without, median ratio 1.004 (0.93 to
1.08 per round); ``--every 20 --windows 2``: median ratio 1.19 (0.90 to 1.42). What is left is the local write on the
training thread (about 0.6 s for 105 MB); the upload itself overlaps training at nice 10. Before the worker lowered
its priority, every 100 batches measured 1.10 (0.86 to 1.49) under heavier load from other work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _loopback_store import start_moto  # benchmarks/_loopback_store.py, next to this script

from composer import Callback, Trainer
from composer.models import ComposerClassifier

WIDTH = 5120  # Linear(5120, 5120): 26.2 M parameters, 105 MB in float32


class StepClock(Callback):
    """The wall-clock time between consecutive BATCH_STARTs of the current fit."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def fit_start(self, state, logger) -> None:
        self.starts = []

    def batch_start(self, state, logger) -> None:
        self.starts.append(time.perf_counter())

    def mean_step(self) -> float:
        steps = [b - a for a, b in zip(self.starts, self.starts[1:])]
        return statistics.fmean(steps)


def make_trainer(dataloader, clock: StepClock, save: dict | None) -> Trainer:
    torch.manual_seed(0)
    model = ComposerClassifier(torch.nn.Linear(WIDTH, WIDTH), num_classes=WIDTH)
    kwargs = {} if save is None else save
    return Trainer(
        model=model,
        train_dataloader=dataloader,
        max_duration="1ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=1e-3),
        callbacks=[clock],
        progress_bar=False,
        check_finite=False,
        seed=0,
        **kwargs,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--every", type=int, default=100, help="save every this many batches")
    parser.add_argument("--windows", type=int, default=2, help="save intervals per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--endpoint-url", default=None, help="an S3-compatible server already running")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    server, endpoint = (None, args.endpoint_url) if args.endpoint_url else start_moto()
    try:
        import boto3

        bucket = f"bench-{os.getpid()}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        g = torch.Generator().manual_seed(0)
        data = torch.utils.data.TensorDataset(
            torch.randn(args.batch_size * 8, WIDTH, generator=g),
            torch.randint(0, WIDTH, (args.batch_size * 8,), generator=g),
        )
        dataloader = torch.utils.data.DataLoader(data, batch_size=args.batch_size)
        local = tempfile.mkdtemp(prefix="bench-staging-")
        save = {
            "save_folder": f"s3://{bucket}/bench",
            "save_interval": f"{args.every}ba",
            "save_num_checkpoints_to_keep": 2,
            "storage_options": {"endpoint_url": endpoint, "local_folder": local},
        }
        clocks = {"no saving": StepClock(), "saving": StepClock()}
        trainers = {
            "no saving": make_trainer(dataloader, clocks["no saving"], None),
            "saving": make_trainer(dataloader, clocks["saving"], save),
        }
        for trainer in trainers.values():
            trainer.fit(duration=f"{args.every // 2}ba")  # warm-up; puts the saves mid-round
        steps = args.windows * args.every
        means: dict[str, list[float]] = {name: [] for name in trainers}
        for r in range(args.rounds):
            order = list(trainers) if r % 2 == 0 else list(reversed(trainers))
            for name in order:
                trainers[name].fit(duration=f"{steps}ba")
                means[name].append(clocks[name].mean_step())
            print(
                f"round {r}: {means['saving'][-1] * 1e3:.1f} ms/step saving, "
                f"{means['no saving'][-1] * 1e3:.1f} ms/step without "
                f"(ratio {means['saving'][-1] / means['no saving'][-1]:.3f})",
                flush=True,
            )
        for trainer in trainers.values():
            trainer.close()
        checkpoint = next(Path(local).glob("*.pt"))
        ratios = [s / n for s, n in zip(means["saving"], means["no saving"])]
        print(
            f"checkpoint {checkpoint.stat().st_size / 1e6:.0f} MB every {args.every} batches; median step "
            f"{statistics.median(means['saving']) * 1e3:.1f} ms saving vs "
            f"{statistics.median(means['no saving']) * 1e3:.1f} ms without; median ratio {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {args.rounds} rounds"
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
