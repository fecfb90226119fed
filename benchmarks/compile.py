"""Step time of ``Trainer(compile_config=...)`` (inductor) against the same Trainer eager, on the CPU.

Two models: the CIFAR ResNet-20 (``composer.models.cifar_resnet(depth=20)``, batch 32 of 3x32x32) and the compact
GPT (``composer.models.GPT`` with the default ``GPTConfig``: 4 layers, 128 wide, 4 heads; batch 8 of 128 bytes).
Each model gets two Trainers from the same weights, one eager and one compiled (inductor, torch's default mode),
with plain SGD and no algorithms, loggers or progress bar. A callback times every step from ``BATCH_START`` to
``BATCH_END`` (forward, loss, backward and the optimizer step).

Interleaving: after each Trainer's first step (for the compiled one, that step traces and compiles the forward and
backward graphs: the compile time), the two train ``--chunk`` batches at a time in turn, the order alternating,
until each has trained ``--steps`` batches; a shared machine's changes of speed then fall on both alike. Reported per
model: the median step time of each, the speed-up (eager median / compiled median), the first step of each (compiled:
the compile time), and the graphs dynamo compiled.

Inductor keeps what it compiled on disk and reuses it in later processes. By default the run uses a fresh, empty
cache folder (``TORCHINDUCTOR_CACHE_DIR``), so the first step is a cold compilation; ``--warm-cache`` uses the usual
folder instead, which a second run of the same models finds filled (the compile time of a relaunched job).

Run:  .venv/bin/python benchmarks/compile.py [--models resnet20 gpt] [--steps 40] [--chunk 5] [--threads 1]
      [--warm-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from composer import Trainer
from composer.core import Callback, Logger, State
from composer.models import GPT, GPTConfig, cifar_resnet

__all__: list[str] = []


class StepTimes(Callback):
    """Wall time of every step, ``BATCH_START`` to ``BATCH_END``."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def batch_start(self, state: State, logger: Logger) -> None:
        self._start = time.perf_counter()

    def batch_end(self, state: State, logger: Logger) -> None:
        self.times.append(time.perf_counter() - self._start)


def resnet20_case(num_batches: int) -> tuple[Callable[[], torch.nn.Module], list[Any]]:
    generator = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(32, 3, 32, 32, generator=generator), torch.randint(0, 10, (32,), generator=generator))
        for _ in range(num_batches)
    ]
    return lambda: cifar_resnet(depth=20, num_classes=10), batches


def gpt_case(num_batches: int) -> tuple[Callable[[], torch.nn.Module], list[Any]]:
    generator = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(0, 256, (8, 128), generator=generator)} for _ in range(num_batches)]
    return lambda: GPT(GPTConfig()), batches


CASES = {"resnet20": resnet20_case, "gpt": gpt_case}


def _trainer(model: torch.nn.Module, batches: list[Any], timer: StepTimes, compile_config: Any) -> Trainer:
    return Trainer(
        model=model,
        train_dataloader=batches,
        max_duration="1ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
        callbacks=[timer],
        device="cpu",
        seed=0,
        progress_bar=False,
        check_finite=False,
        compile_config=compile_config,
    )


def measure(name: str, steps: int, chunk: int, compile_config: dict[str, Any]) -> dict[str, Any]:
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    make_model, batches = CASES[name](num_batches=max(chunk, 10))
    torch.manual_seed(0)
    eager_model = make_model()
    compiled_model = make_model()
    compiled_model.load_state_dict(eager_model.state_dict())
    timers = {"eager": StepTimes(), "compiled": StepTimes()}
    trainers = {
        "eager": _trainer(eager_model, batches, timers["eager"], None),
        "compiled": _trainer(compiled_model, batches, timers["compiled"], compile_config),
    }
    for trainer in trainers.values():  # the first step: compiled, it traces and compiles
        trainer.fit()
    first = {kind: timers[kind].times[0] for kind in trainers}
    order = ["eager", "compiled"]
    while min(len(timer.times) for timer in timers.values()) < steps + 1:
        for kind in order:
            trainers[kind].fit(duration=f"{chunk}ba")
        order.reverse()
    medians = {kind: statistics.median(timers[kind].times[1:]) for kind in trainers}
    for trainer in trainers.values():
        trainer.close()
    return {
        "model": name,
        "steps": min(len(timer.times) for timer in timers.values()) - 1,
        "eager_median_ms": round(medians["eager"] * 1e3, 2),
        "compiled_median_ms": round(medians["compiled"] * 1e3, 2),
        "speedup_median": round(medians["eager"] / medians["compiled"], 3),
        "eager_first_step_s": round(first["eager"], 2),
        "compile_first_step_s": round(first["compiled"], 1),
        "graphs": counters["stats"]["unique_graphs"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--steps", type=int, default=40, help="timed steps of each Trainer (after the first)")
    parser.add_argument("--chunk", type=int, default=5, help="batches each Trainer trains in its turn")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1: steadier on a busy host)")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--mode", default=None, help="torch.compile mode (default: torch's)")
    parser.add_argument(
        "--warm-cache", action="store_true", help="reuse inductor's on-disk cache (default: a fresh one)"
    )
    args = parser.parse_args()
    cache = None if args.warm_cache else tempfile.mkdtemp(prefix="inductor-cache-")
    if cache is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    torch.set_num_threads(args.threads)
    compile_config: dict[str, Any] = {"backend": args.backend}
    if args.mode is not None:
        compile_config["mode"] = args.mode
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), compile_config={compile_config}, inductor cache: "
        f"{'the usual folder' if cache is None else 'fresh'}"
    )
    print(
        f"{'model':10} {'eager ms':>9} {'compiled ms':>12} {'speed-up':>9} {'eager 1st s':>12} {'compile s':>10} graphs"
    )
    results = []
    for name in args.models:
        result = measure(name, args.steps, args.chunk, compile_config)
        results.append(result)
        print(
            f"{name:10} {result['eager_median_ms']:9.2f} {result['compiled_median_ms']:12.2f} "
            f"{result['speedup_median']:8.3f}x {result['eager_first_step_s']:12.2f} "
            f"{result['compile_first_step_s']:10.1f} {result['graphs']}"
        )
    print(json.dumps(results))
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
