"""What ``grad_accum='auto'`` costs when nothing runs out of memory: step time against a fixed ``grad_accum=1``.

With ``'auto'`` the Trainer keeps, before each batch, what a retry would need (a ``RetryPoint``: the random states and
the model's buffers). This measures that price on a small model, where it weighs most: an MLP 256-512-512-10 (``--width``) with BatchNorm (so
there are buffers to capture), batch 64, SGD, one CPU thread. Each round trains a fresh Trainer of each kind for
``--steps`` steps from the same weights, in alternating order (the machine's speed drifts; interleaving spreads the
drift over both); a Trainer's time is its ``fit`` wall time over its steps. Reported: the median over rounds of the
per-step times and of the per-round ratio ('auto' / fixed).

With ``--fsdp`` the script launches itself on 2 CPU ranks (torchrun, gloo, one thread each) and both Trainers shard
the MLP with FSDP, every Linear a unit: then 'auto' also passes a checkpoint (one small all-reduce, read on the host)
before every FSDP collective (``composer.distributed.oom_agreement``), and that is what the ratio shows.

With ``--retry-point`` it times only what is kept before each batch (``RetryPoint.keep`` on the same model, with
NumPy's and Python's generators as a run leaves them), per call, as the median over ``--rounds`` rounds of 1000 calls.

Run:  .venv/bin/python benchmarks/auto_microbatch.py [--steps 400] [--rounds 7] [--fsdp] [--retry-point]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import timeit
from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.distributed.retry_point import RetryPoint
from composer.models import ComposerClassifier

__all__: list[str] = []


def _model(width: int) -> ComposerClassifier:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(256, width),
        torch.nn.BatchNorm1d(width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.BatchNorm1d(width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    )
    return ComposerClassifier(net, num_classes=10)


def _seconds_per_step(grad_accum: int | str, loader: DataLoader, steps: int, fsdp: bool, width: int) -> float:
    model = _model(width)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{steps}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        grad_accum=grad_accum,
        progress_bar=False,
        seed=0,
        device="cpu",
        fsdp_config={"module_classes": ["Linear"], "min_params": None} if fsdp else None,
    )
    started = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - started
    trainer.close()
    return seconds / steps


def _retry_point_seconds(width: int, rounds: int) -> list[float]:
    state = SimpleNamespace(rng=torch.Generator().manual_seed(0))  # RetryPoint reads only the state's rng
    point = RetryPoint(state, _model(width))  # type: ignore[arg-type]
    return [timeit.timeit(point.keep, number=1000) / 1000 for _ in range(rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--fsdp", action="store_true", help="2 CPU ranks, the MLP sharded with FSDP")
    parser.add_argument("--width", type=int, default=512, help="the MLP's hidden width (default 512)")
    parser.add_argument("--retry-point", action="store_true", help="time only what is kept before each batch")
    args = parser.parse_args()
    if args.retry_point:
        torch.set_num_threads(1)
        times = _retry_point_seconds(args.width, args.rounds)
        print(
            f"RetryPoint.keep: median {1e6 * statistics.median(times):.1f} us per batch over {args.rounds} rounds "
            f"(min {1e6 * min(times):.1f}, max {1e6 * max(times):.1f})"
        )
        return
    if args.fsdp and "RANK" not in os.environ:  # launch this script on 2 ranks
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", *sys.argv]
        raise SystemExit(subprocess.call(command))
    torch.set_num_threads(1)
    say = print if int(os.environ.get("RANK", "0")) == 0 else (lambda *_: None)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(6400, 256, generator=g), torch.randint(0, 10, (6400,), generator=g))
    loader = DataLoader(data, batch_size=64, shuffle=False)
    _seconds_per_step(1, loader, 50, args.fsdp, args.width)  # warm up both paths once
    _seconds_per_step("auto", loader, 50, args.fsdp, args.width)
    fixed, auto, ratios = [], [], []
    for round_ in range(args.rounds):
        order: list[int | str] = [1, "auto"] if round_ % 2 == 0 else ["auto", 1]
        times = {str(kind): _seconds_per_step(kind, loader, args.steps, args.fsdp, args.width) for kind in order}
        fixed.append(times["1"])
        auto.append(times["auto"])
        ratios.append(times["auto"] / times["1"])
        say(
            f"round {round_ + 1}: grad_accum=1 {1e3 * times['1']:.3f} ms/step, 'auto' {1e3 * times['auto']:.3f} ms/step"
        )
    say(
        f"median over {args.rounds} rounds: grad_accum=1 {1e3 * statistics.median(fixed):.3f} ms/step, 'auto' "
        f"{1e3 * statistics.median(auto):.3f} ms/step; ratio 'auto' / fixed: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
