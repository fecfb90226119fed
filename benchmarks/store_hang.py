"""How long a store that hangs holds up an operation, and the training thread, under ``retry_budget``.

The store is a moto server (a subprocess on a free loopback port) behind ``tests.common.store_proxy.StoreProxy``,
which can start answering nothing (it accepts connections and reads requests). Two measurements:

1. **One operation**: for each ``--budgets`` value, an upload of a 1 MB object and a download through the hung proxy;
   the seconds until :class:`~composer.utils.object_store.ObjectStoreError`.
2. **Training** (the repro of issue 27): a small model trains ``--batches`` batches of about 20 ms each, saving
   every 20 to ``s3://`` with ``retry_budget=--train-budget``, keeping 2; after batch 40 the store hangs for
   ``--hang`` seconds, then answers again. For ``on_upload_failure='raise'`` and ``'keep_local'``: the longest
   time the training thread spent between two batches (a save waiting on the store shows here), and how the run
   ended (the error and when, counted from the hang; or completed, with the objects left in the store).

Run:  .venv/bin/python benchmarks/store_hang.py [--budgets 2 4 16] [--train-budget 4] [--hang 30] [--batches 3000]

Measured on 2 cores shared with other work (load average 7, 2026-12-04), the defaults: a hung store fails an upload
after 2.0 s and a download after 1.0 s with ``retry_budget=2`` (before: 120 s); 2.0 s and 3.3 to 7.1 s (3 runs;
the 7.1 s under the heaviest load) with 4; 12.6 s and 12.8 s with 16. Training with ``retry_budget=4`` through a
30 s hang: ``'raise'`` ended with UploadError 3.3 s after the hang, the longest wait between batches 0.09 s (before:
a 60 s hang stalled the training thread 60.6 s, with no error); ``'keep_local'`` completed, the longest wait between
batches 0.29 s, the store holding the newest 2 checkpoints at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import boto3
import torch
from object_store_checkpoint import start_moto  # benchmarks/object_store_checkpoint.py, next to this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.common
from composer import Callback, Trainer
from composer.models import MLP, ComposerClassifier
from composer.utils.object_store import ObjectStoreError, S3ObjectStore
from tests.common.store_proxy import StoreProxy

__all__: list[str] = []


class Pace(Callback):
    """Makes each batch take about ``seconds`` (standing in for compute) and notes the longest gap between batches,
    and the moment of each batch's end; at ``hang_batch``, makes the proxy hang for ``hang`` seconds."""

    def __init__(self, proxy: StoreProxy, hang_batch: int, hang: float, seconds: float = 0.02) -> None:
        self.proxy, self.hang_batch, self.hang, self.seconds = proxy, hang_batch, hang, seconds
        self.last: float | None = None
        self.longest = 0.0
        self.hung_at: float | None = None

    def batch_start(self, state: Any, logger: Any) -> None:
        now = time.monotonic()
        if self.last is not None:
            self.longest = max(self.longest, now - self.last)
        time.sleep(self.seconds)

    def batch_end(self, state: Any, logger: Any) -> None:
        if int(state.timer.batch) == self.hang_batch:
            self.proxy.mode, self.hung_at = "hang", time.monotonic()
            back = threading.Timer(self.hang, lambda: setattr(self.proxy, "mode", "forward"))
            back.daemon = True
            back.start()
        self.last = time.monotonic()


def one_operation(endpoint: str, bucket: str, budget: float) -> tuple[float, float]:
    proxy = StoreProxy(endpoint).start()
    try:
        store = S3ObjectStore(bucket, {"endpoint_url": proxy.endpoint_url, "retry_budget": budget})
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "one.bin"
            source.write_bytes(os.urandom(2**20))
            store.upload(source, "bench/one.bin")
            proxy.mode = "hang"
            times = []
            for operation in (
                lambda: store.upload(source, "bench/two.bin"),
                lambda: store.download("bench/one.bin", source),
            ):
                start = time.monotonic()
                with contextlib.suppress(ObjectStoreError):
                    operation()
                times.append(time.monotonic() - start)
        return times[0], times[1]
    finally:
        proxy.stop()


def training(endpoint: str, bucket: str, policy: str, args: argparse.Namespace) -> str:
    proxy = StoreProxy(endpoint).start()
    pace = Pace(proxy, hang_batch=40, hang=args.hang)
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(640, 16, generator=g), torch.randint(0, 4, (640,), generator=g))
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(16, (32,), 4), num_classes=4)
    with tempfile.TemporaryDirectory() as local:
        trainer = Trainer(
            model=model,
            train_dataloader=torch.utils.data.DataLoader(data, batch_size=8),
            max_duration=f"{args.batches}ba",
            save_folder=f"s3://{bucket}/{policy}",
            save_interval="20ba",
            save_num_checkpoints_to_keep=2,
            storage_options={
                "endpoint_url": proxy.endpoint_url,
                "local_folder": local,
                "retry_budget": args.train_budget,
            },
            on_upload_failure=policy,
            callbacks=[pace],
            progress_bar=False,
        )
        start = time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trainer.fit()
            keys = sorted(info.key for info in S3ObjectStore(bucket, {"endpoint_url": endpoint}).list_objects(policy))
            ended = f"completed in {time.monotonic() - start:.1f} s, the store holding {keys}"
        except Exception as e:
            assert pace.hung_at is not None
            ended = f"{type(e).__name__} {time.monotonic() - pace.hung_at:.1f} s after the hang"
        finally:
            trainer.close()
            proxy.stop()
    return f"longest wait between batches {pace.longest:.2f} s; {ended}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=[2, 4, 16])
    parser.add_argument("--train-budget", type=float, default=4)
    parser.add_argument("--hang", type=float, default=30, help="seconds the store hangs during training")
    parser.add_argument("--batches", type=int, default=3000, help="about 20 ms each: longer than the hang")
    args = parser.parse_args()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    server, endpoint = start_moto()
    try:
        bucket = "bench-store-hang"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        for budget in args.budgets:
            upload, download = one_operation(endpoint, bucket, budget)
            print(
                f"retry_budget={budget:g} s: a hung store fails an upload after {upload:.1f} s, a download after {download:.1f} s"
            )
        for policy in ("raise", "keep_local"):
            print(
                f"training, retry_budget={args.train_budget:g} s, a {args.hang:g} s hang, on_upload_failure={policy!r}: "
                + training(endpoint, bucket, policy, args)
            )
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
