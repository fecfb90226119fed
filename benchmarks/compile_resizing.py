"""ProgressiveResizing compiled with inductor on the CPU: graphs, fall-backs to eager, relaunches from a warm cache,
and the step time of the graphs the Trainer compiles against the alternatives.

Relaunch cases (``--cases``). Each runs twice in a fresh Python process, the two sharing a fresh inductor cache folder
(``TORCHINDUCTOR_CACHE_DIR``): the first compiles cold, the second is a relaunch that finds the first's graphs on disk,
as autoresume does (``--trials N``: N such pairs, each with a fresh folder; whether the repro's relaunch crashes
depends on the order of the names of the stored graphs, which differs from folder to folder). Each process reports
the graphs dynamo compiled (its own counter, ``unique_graphs``), the graphs ``trainer.compilation`` reports, whether a
frame fell back to eager at ``recompile_limit``, the image sides it saw, its seconds, and the error that ended it.

* ``repro``: the plain-torch repro of the compiling guide, as printed there (three sizes marked dynamic);
* ``repro-static``: the same with the sizes marked static (``torch._dynamo.mark_static``), what the Trainer does;
* ``repro-layout``: the same with ``model.compile(options={'layout_optimization': False})``;
* ``tiny``: the Trainer: a one-convolution CNN on 8x8 images, ``compile_config=True``, ``ProgressiveResizing``
  (``initial_scale=0.5``, ``finetune_fraction=0``), 4 batches;
* ``resnet8``: ``cifar_resnet(depth=8)`` on 32x32 images, ``ProgressiveResizing()`` (16 to 32 px), 2 epochs of 8
  batches, ``compile_config=True``; also the largest difference of its weights from an eager run's with the same
  sizes (``scale_buckets=4``);
* ``resnet8-linear``: the same with ``scale_buckets=0`` (the linear schedule, a size per batch, compiled): past
  ``recompile_limit``, so it must fall back to eager, warn and say so;
* ``large``: ``tiny`` on 96x96 images (48 to 96 px).

``--speed``: the ResNet-8 step (forward, loss, backward, SGD) at sides 16, 24 and 32: eager; compiled static, a graph
per side (what the Trainer compiles); and compiled with the sides marked dynamic and inductor's layout optimization
off (the alternative), interleaved in rounds (``benchmarks/_interleaved.py``); with the compile seconds of each.

Run:  .venv/bin/python benchmarks/compile_resizing.py [--cases repro repro-static repro-layout tiny resnet8
      resnet8-linear large] [--trials 1] [--speed --rounds 10] [--root CHECKOUT (the composer the children import)]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "guides" / "compiling.md"
CASES = ["repro", "repro-static", "repro-layout", "tiny", "resnet8", "resnet8-linear", "large"]
LAYOUT_OFF = 'model.compile(options={"layout_optimization": False})'
_REPORT = (
    "\nimport json\nfrom torch._dynamo.utils import counters\n"
    "print('RESULT', json.dumps({'graphs': counters['stats']['unique_graphs']}))\n"
)

__all__: list[str] = []


def guide_repro() -> str:
    """The compiling guide's plain-torch repro: the python block whose not-run marker names this script."""
    pattern = r"<!-- not-run: [^>]*benchmarks/compile_resizing\.py[^>]*-->\n```python\n(.*?)```"
    match = re.search(pattern, GUIDE.read_text(), re.S)
    if match is None:
        raise SystemExit(f"{GUIDE}: no python block marked 'not-run: ... benchmarks/compile_resizing.py'")
    return match.group(1)


def trainer_case(name: str) -> dict[str, Any]:
    """Runs a Trainer case in this process; returns what it reports."""
    import torch
    from torch._dynamo.utils import counters
    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer
    from composer.algorithms import ProgressiveResizing
    from composer.core import Callback
    from composer.models import ComposerClassifier, cifar_resnet

    torch.set_num_threads(1)
    side, batches, epochs = {"tiny": (8, 4, 1), "large": (96, 4, 1)}.get(name, (32, 8, 2))
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(4 * batches, 3, side, side, generator=generator)
    data = TensorDataset(images, torch.randint(0, 3, (4 * batches,), generator=generator))
    resizing: dict[str, Any] = {"initial_scale": 0.5, "finetune_fraction": 0.0} if side != 32 else {}
    if name == "resnet8-linear":
        resizing["scale_buckets"] = 0

    class Sides(Callback):
        seen: set[int] = set()

        def before_forward(self, state: Any, logger: Any) -> None:
            self.seen.add(int(state.batch[0].shape[-1]))

    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        if name.startswith("resnet8"):
            return cifar_resnet(depth=8, num_classes=3)
        convolution = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU())
        head = [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3)]
        return ComposerClassifier(torch.nn.Sequential(*convolution, *head), num_classes=3)

    def fit(net: torch.nn.Module, config: Any, **extra: Any) -> Trainer:
        trainer = Trainer(
            model=net,
            train_dataloader=DataLoader(data, batch_size=4),
            optimizers=torch.optim.SGD(net.parameters(), lr=0.01),
            max_duration=f"{epochs}ep",
            algorithms=[ProgressiveResizing(**resizing, **extra)],
            callbacks=[Sides()],
            compile_config=config,
            device="cpu",
            seed=0,
            progress_bar=False,
        )
        trainer.fit()
        return trainer

    compiled = model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fit(compiled, True)
    compilation: Any = trainer.compilation
    result = {
        "graphs": counters["stats"]["unique_graphs"],
        "reported": getattr(compilation, "compilations", None),
        "fell_back_to_eager": getattr(compilation, "fell_back_to_eager", None),
        "sides": sorted(Sides.seen),
        "warned": [str(w.message)[:100] for w in caught if "recompile_limit" in str(w.message)],
    }
    if name == "resnet8" and "scale_buckets" in inspect.signature(ProgressiveResizing).parameters:  # not --root OLD
        eager = model()
        fit(eager, None, scale_buckets=4)
        result["max_weight_difference"] = max(
            float((a - b).abs().max()) for a, b in zip(compiled.state_dict().values(), eager.state_dict().values())
        )
    return result


def run_child(case: str, cache: str, root: Path) -> dict[str, Any]:
    """Runs ``case`` in a fresh process with ``cache`` as inductor's cache folder and ``root`` first on the path."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "PYTHONPATH": str(root)}
    if case.startswith("repro"):
        code = guide_repro()
        marks, static = (
            "torch._dynamo.mark_dynamic(x, (2, 3))",
            "torch._dynamo.mark_static(x, 2), torch._dynamo.mark_static(x, 3)",
        )
        changes = {"repro-static": (marks, static), "repro-layout": ("model.compile()", LAYOUT_OFF)}
        if case in changes:
            old, new = changes[case]
            assert old in code, f"the guide's repro no longer has {old!r}"
            code = code.replace(old, new, 1)
        command = [sys.executable, "-c", code + _REPORT]
    else:
        command = [sys.executable, __file__, "--child", case, "--root", str(root)]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600, cwd=tempfile.gettempdir())
    seconds = round(time.perf_counter() - start, 1)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :]) if lines else {}
    errors = [line for line in done.stderr.splitlines() if re.match(r"[A-Za-z_.]*(Error|Exception): ", line)]
    limit_hit = "hit config.recompile_limit" in done.stderr
    return {**result, "seconds": seconds, "limit_hit_logged": limit_hit, "error": errors[-1][:160] if errors else None}


def speed(rounds: int) -> None:
    """Step time at sides 16, 24, 32: eager, one dynamic graph, static graphs (one per side)."""
    import torch
    import torch._dynamo
    from _interleaved import print_times, sgd_step, time_interleaved  # benchmarks/_interleaved.py, next to this

    from composer.models import cifar_resnet
    from composer.trainer.compilation import torch_compile_kwargs

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    steps: dict[str, Any] = {}
    compile_seconds = {"static": 0.0, "dynamic": 0.0}
    nets = {}
    for kind in ("eager", "static", "dynamic"):
        torch.manual_seed(0)
        nets[kind] = cifar_resnet(depth=8, num_classes=10).module  # the plain network: it takes the images
        if kind != "eager":  # static: a graph per side, as the Trainer compiles; dynamic: sides marked dynamic
            nets[kind].compile(**torch_compile_kwargs({"isolate_recompiles": True}, dynamic=kind == "dynamic"))
    for side in (16, 24, 32):
        x = torch.randn(32, 3, side, side, generator=generator)
        y = torch.randint(0, 10, (32,), generator=generator)
        for kind, net in nets.items():
            inputs = x.clone()
            mark = torch._dynamo.maybe_mark_dynamic if kind == "dynamic" else torch._dynamo.mark_static
            if kind != "eager":
                mark(inputs, 2)
                mark(inputs, 3)
            step = sgd_step(net, inputs, y)
            if kind != "eager":
                start = time.perf_counter()
                step()  # compiles a graph for this side (the dynamic one too: its backward specialises)
                compile_seconds[kind] += time.perf_counter() - start
            steps[f"{kind} {side}px"] = step
    print(f"compile seconds (first step at each side, summed): {json.dumps(compile_seconds)}")
    times = time_interleaved(steps, rounds=rounds, per_round=3)
    for side in (16, 24, 32):
        print(f"side {side}:")
        print_times({kind: times[f"{kind} {side}px"] for kind in nets}, baseline="eager")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", choices=CASES, default=CASES)
    parser.add_argument("--speed", action="store_true", help="also time one dynamic graph against static ones")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds of --speed")
    parser.add_argument("--trials", type=int, default=1, help="cold-and-warm pairs per case, each a fresh cache")
    parser.add_argument("--root", type=Path, default=REPO, help="the composer checkout the children import")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(args.root))  # this process (--speed, --child) imports the same composer as the children
    if args.child:
        print("RESULT", json.dumps(trainer_case(args.child)), flush=True)
        return
    for case in args.cases:
        for trial in range(args.trials):
            with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
                for run in ("cold", "warm"):
                    result = run_child(case, cache, args.root)
                    print(json.dumps({"case": case, "trial": trial, "run": run, **result}), flush=True)
    if args.speed:
        speed(args.rounds)


if __name__ == "__main__":
    main()
