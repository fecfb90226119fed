"""Peak memory per rank while an FSDP run saves a checkpoint: full (gathered on rank 0) against sharded (DCP).

A model of ``--layers`` Linear(``--width``, ``--width``) layers (the default, 10 of 2048 x 2048: 168 MB of fp32
weights), each an FSDP unit, trained for one step with SGD and momentum (so the optimizer holds 168 MB more) on 2 CPU
ranks under ``torchrun`` (gloo); then ``Trainer.save_checkpoint`` writes the checkpoint once with
``state_dict_type='full'`` and, in a second job, once with ``'sharded'``. Each rank samples its resident set size
(``/proc/self/statm``) every millisecond from a thread while the save runs, and reports the peak minus the size just
before the save (after handing the memory training freed back to the system with glibc's ``malloc_trim``): the
memory the save itself needed. Each mode runs in its own job, so that memory one mode's save
took and the allocator kept does not hide the other's.

Run:  .venv/bin/python benchmarks/sharded_checkpoint_memory.py [--layers 10] [--width 2048]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from _torchrun import torchrun_command, worker_env  # benchmarks/_torchrun.py, next to this script
from torch.utils.data import DataLoader, TensorDataset

__all__: list[str] = []

MB = 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """The largest resident set size seen, sampled every millisecond from a thread while the block runs."""

    def __enter__(self) -> PeakRSS:
        self.before = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _release_free_memory() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the baseline may include what it keeps
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def worker(mode: str, layers: int, width: int, out: Path) -> None:
    from composer import Trainer
    from composer.models import ComposerClassifier
    from composer.utils import dist

    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    model = ComposerClassifier(net, num_classes=width)
    data = TensorDataset(torch.randn(8, width), torch.randint(0, width, (8,)))
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=4),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        max_duration="1ba",
        progress_bar=False,
        fsdp_config={"module_classes": ["Linear"], "min_params": None, "state_dict_type": mode},
    )
    trainer.fit()
    path = out / ("checkpoint" if mode == "sharded" else "checkpoint.pt")
    dist.barrier()
    _release_free_memory()  # what training freed goes back to the system, so the baseline is what the rank holds
    start = time.perf_counter()
    with PeakRSS() as peak:
        trainer.save_checkpoint(path)
    seconds = time.perf_counter() - start
    shard = sum(p.to_local().numel() * p.element_size() for p in model.parameters())  # type: ignore[operator]
    result = {"rank": dist.get_global_rank(), "extra": peak.peak - peak.before, "seconds": seconds, "shard": shard}
    (out / f"{mode}-rank{dist.get_global_rank()}.json").write_text(json.dumps(result))
    trainer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--worker", choices=["full", "sharded"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.layers, args.width, args.out)
        return 0
    repo = Path(__file__).resolve().parents[1]
    env = worker_env()
    size = args.layers * (args.width * args.width + args.width) * 4
    print(f"model: {args.layers} x Linear({args.width}, {args.width}) = {size / MB:.0f} MB of fp32 weights, 2 ranks")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("full", "sharded"):
            folder = Path(tmp) / mode
            folder.mkdir()
            command = torchrun_command(
                Path(__file__).resolve(),
                *("--worker", mode, "--out", str(folder), "--layers", str(args.layers), "--width", str(args.width)),
            )
            subprocess.run(command, check=True, env=env, cwd=repo)
            for rank in (0, 1):
                r = json.loads((folder / f"{mode}-rank{rank}.json").read_text())
                print(
                    f"{mode:>7} rank {rank}: save needed {r['extra'] / MB:7.1f} MB over what the rank held "
                    f"(its weight shard: {r['shard'] / MB:.0f} MB); save took {r['seconds']:.2f} s"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
