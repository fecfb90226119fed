"""Preemption: the time from SIGTERM to the process's exit, and the training lost, with and without handling it.

A training process (the MLP 512-1024-1024-10, 1.6 M parameters, batch 64, one thread, SGD with momentum: a 13 MB
checkpoint, plus ``--ballast-mb``; a checkpoint every ``--interval`` batches, ``autoresume``) is sent SIGTERM at a
random moment (seeded: uniform over two save intervals after a warm-up), once per trial and behaviour, the behaviours
interleaved trial by trial:

* ``preemption`` (the Trainer now): the batch in progress finishes, a checkpoint of it is saved (and, with
  ``--store``, uploaded within ``preemption_grace_period``), ``fit`` raises ``Preempted`` and the process exits 75, as
  the ``composer`` command does;
* ``periodic only`` (the Trainer before: kept here by putting SIGTERM's default action back at ``FIT_START``): the
  process ends at once, and what it trained since its last periodic checkpoint is lost.

For each: the time from the signal to the process's exit (as its parent sees it), and the batches lost: those the
process had finished when the signal came (read from its progress lines) that are not in the newest complete
checkpoint after it exited (in the folder, or with ``--store`` in the store: a rerun on a fresh machine resumes from
there). ``--store`` runs moto on loopback (a subprocess at nice 10), with the checkpoints uploaded in the background.

Run:  .venv/bin/python benchmarks/preemption.py [--trials 5] [--interval 200] [--store] [--ballast-mb 0] [--grace 20]

Measured on the 2-core development machine shared with other work (load 2-3), 2026-12-04, at commit a46b71a:

* ``--trials 10 --interval 200`` (13 MB, local folder): preemption 1.48 s from the signal to the exit (max 1.68), of
  which 0.07 s (max 0.10) until ``fit`` raised (the batch, the save, the closing; the rest is the interpreter's
  exit, torch's teardown), 0 batches lost in 10 of 10; periodic only 0.05 s (max 0.08) and 96.5 batches lost
  (max 190) of the 200 between checkpoints.
* ``--trials 3 --interval 100 --store --ballast-mb 256`` (269 MB to moto): preemption 6.17 s (max 7.07) to the exit,
  4.78 s (max 5.38) until ``fit`` raised with the upload complete, 0 lost; periodic only 0.10 s, 100 lost (the
  upload of batch 100's checkpoint was cut off).
* the same with ``--grace 2``: ``fit`` raised 2.16 s (max 2.20) after the signal with the upload stopped, exit
  4.20 s; the store's newest checkpoint is then 100 batches old, as with periodic checkpoints only, but the local
  folder holds the batch in progress for the next run on that machine.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _torchrun import worker_env  # benchmarks/_torchrun.py, next to this script: this checkout importable

BEHAVIOURS = ("preemption", "periodic only")
WARM_UP = 20  # batches before the signal may come
PATTERN = "ep{epoch}-ba{batch}-rank{rank}.pt"

__all__: list[str] = []


# ---- the training process ------------------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """Trains until told to stop, printing each batch it finished; the ``periodic only`` behaviour puts SIGTERM's
    default action back when fit starts."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer import Callback, Trainer
    from composer.models import MLP, ComposerClassifier
    from composer.trainer import Preempted

    class Progress(Callback):
        def fit_start(self, state, logger):  # type: ignore[no-untyped-def]
            if args.behaviour == "periodic only":
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as before: nothing handles SIGTERM

        def batch_end(self, state, logger):  # type: ignore[no-untyped-def]
            print(int(state.timer.batch), flush=True)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = MLP(512, (1024, 1024), 10)
    if args.ballast_mb:
        net.register_buffer("ballast", torch.zeros(args.ballast_mb * 2**18))
    model = ComposerClassifier(net, num_classes=10)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64 * 50, 512, generator=g), torch.randint(0, 10, (64 * 50,), generator=g))
    store = {"storage_options": {"endpoint_url": args.endpoint, "local_folder": args.folder}} if args.endpoint else {}
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=64),
        max_duration="100000ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        callbacks=[Progress()],
        save_folder=args.save_folder,
        save_interval=f"{args.interval}ba",
        save_num_checkpoints_to_keep=2,
        run_name="bench",
        autoresume=True,
        preemption_grace_period=args.grace,
        progress_bar=False,
        seed=0,
        **store,
    )
    try:
        trainer.fit()
    except Preempted as error:
        print(f"preempted {error.batch} complete={error.complete}", flush=True)
        sys.exit(75)


# ---- the measurement -------------------------------------------------------------------------------------------------


class Trial:
    """One training process: started, followed through its progress lines, signalled, waited for."""

    def __init__(self, command: list[str]) -> None:
        self.batch = 0
        self.stopped_at: float | None = None  # when the process said that fit raised Preempted
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=worker_env()
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip().isdigit():
                self.batch = int(line)
            elif line.startswith("preempted"):
                self.stopped_at = time.monotonic()

    def run(self, delay_batches: float) -> tuple[float, float | None, int]:
        """Waits for the warm-up, then ``delay_batches`` batches' worth of time; signals; returns the seconds from the
        signal to the exit and to ``Preempted`` (None: never raised), and the batches finished when the signal came."""
        deadline = time.monotonic() + 600
        while self.batch < WARM_UP and time.monotonic() < deadline:
            time.sleep(0.005)
        started, at = time.monotonic(), self.batch
        while self.batch < at + 10:  # the step time, measured
            time.sleep(0.005)
        step = (time.monotonic() - started) / (self.batch - at)
        time.sleep(delay_batches * step)
        finished = self.batch
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait()
        exited = time.monotonic() - sent
        self.reader.join(timeout=10)
        return exited, None if self.stopped_at is None else self.stopped_at - sent, finished


def newest_batch(folder: Path, store: tuple[object, str, str] | None) -> int:
    """The batch of the newest complete checkpoint: in ``folder``, or with ``store`` (client, bucket, prefix) there."""
    if store is None:
        names = [p.name for p in folder.glob("ep*-ba*-rank0.pt")]
    else:
        client, bucket, prefix = store
        listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")  # type: ignore[attr-defined]
        names = [item["Key"].rsplit("/", 1)[-1] for item in listing.get("Contents", [])]
    return max((int(n.split("-ba")[1].split("-")[0]) for n in names), default=0)


def measure(args: argparse.Namespace) -> dict[str, list[tuple[float, float | None, int]]]:
    """Runs the interleaved trials; returns (seconds to exit, seconds to Preempted, batches lost) per behaviour."""
    rng = random.Random(args.seed)
    results: dict[str, list[tuple[float, float | None, int]]] = {b: [] for b in BEHAVIOURS}
    server, endpoint, client, bucket = None, "", None, ""
    if args.store:
        import boto3
        from object_store_checkpoint import start_moto  # benchmarks/, next to this script

        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
            os.environ.setdefault(name, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
        server, endpoint = start_moto()
        client, bucket = boto3.client("s3", endpoint_url=endpoint), f"preemption-{os.getpid()}"
        client.create_bucket(Bucket=bucket)
    try:
        for trial in range(args.trials):
            delay = rng.uniform(0, 2 * args.interval)
            order = BEHAVIOURS if trial % 2 == 0 else BEHAVIOURS[::-1]
            for behaviour in order:
                folder = Path(tempfile.mkdtemp(prefix="preemption-"))
                prefix = f"t{trial}-{behaviour.replace(' ', '-')}"
                save_folder = f"s3://{bucket}/{prefix}" if args.store else str(folder)
                command = [sys.executable, __file__, "--worker", behaviour, str(folder), save_folder]
                command += [f"--interval={args.interval}", f"--ballast-mb={args.ballast_mb}", f"--grace={args.grace}"]
                command += [f"--endpoint={endpoint}"] if endpoint else []
                exited, stopped, finished = Trial(command).run(delay)
                newest = newest_batch(folder, (client, bucket, prefix) if args.store else None)
                results[behaviour].append((exited, stopped, max(0, finished - newest)))
                print(
                    f"trial {trial} {behaviour}: signal after batch {finished}, newest checkpoint batch {newest}, "
                    f"exit {exited:.2f} s after the signal",
                    flush=True,
                )
    finally:
        if server is not None:
            server.kill()
            server.wait()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--interval", type=int, default=200, help="save every this many batches")
    parser.add_argument("--store", action="store_true", help="save to an S3-compatible store (moto, on loopback)")
    parser.add_argument("--ballast-mb", type=int, default=0, help="add this many MB to every checkpoint")
    parser.add_argument("--grace", type=float, default=20.0, help="the Trainer's preemption_grace_period")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", nargs=3, metavar=("BEHAVIOUR", "FOLDER", "SAVE_FOLDER"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.behaviour, args.folder, args.save_folder = args.worker
        worker(args)
        return
    results = measure(args)
    where = "an S3-compatible store (moto on loopback)" if args.store else "a local folder"
    print(
        f"\nSIGTERM at a random moment, {args.trials} trials each; a checkpoint every {args.interval} batches to {where}"
        f" ({13 + args.ballast_mb} MB), preemption_grace_period={args.grace:g} s"
    )
    print("| behaviour | signal to exit, s: median (max) | of which until fit raised | batches lost: median (max) |")
    print("|---|---:|---:|---:|")
    for behaviour, values in results.items():
        times, lost = [t for t, _, _ in values], [n for _, _, n in values]
        raised = [s for _, s, _ in values if s is not None]
        until = f"{statistics.median(raised):.2f} ({max(raised):.2f})" if raised else "-"
        print(
            f"| {behaviour} | {statistics.median(times):.2f} ({max(times):.2f}) | {until} | "
            f"{statistics.median(lost):g} ({max(lost)}) |"
        )


if __name__ == "__main__":
    main()
