"""Start-up time of the ``composer`` command and of a first training run, against ``python -c "import torch"``.

Every figure is the wall time of a fresh interpreter, measured in the same run as ``import torch`` alone: the
commands take turns, one round after another (interleaved, so that the load of a shared machine falls on all alike),
and the table gives the median over the rounds, its ratio to the median of ``import torch``, and the difference.

* ``composer --help``, ``composer list``, ``composer train --help``: these import no torch; ``composer --help`` and
  ``composer list`` also with a cold cache (a fresh ``XDG_CACHE_HOME``, as right after an install: the list then
  generates the view of the registries from their sources);
* ``composer train`` with a recipe whose mistake is a type (``train_batch_size=big``) or a misspelled method name:
  the message comes back before torch is imported;
* ``composer train`` with a recipe whose mistake is a value (``algorithms.mixup.alpha=-1``): found by building the
  recipe's objects, after importing torch and the registries (every method's config);
* ``from composer import Trainer``: the whole process, and inside it the time after ``import torch``;
* the README's first run (the digits MLP, as written there) up to its first training batch: inside the process,
  ``import torch``, then ``import torchmetrics`` (which the model's metrics need, and which imports torchvision,
  transformers and scipy when they are installed), then the rest: composer's imports, the data, the model, the
  Trainer's construction and its way to the first batch;
* ``import torchmetrics`` after ``import torch``, for the record.

Run:  .venv/bin/python benchmarks/startup.py [--rounds 7]
Targets (issue 20): the commands and the recipe errors under 1 s; ``from composer import Trainer`` within 1 s of
``import torch``; the first run's first batch within 1 s of ``import torch`` and ``import torchmetrics``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "digits_baseline.yaml"

# In-process probes: each prints a JSON object of seconds.
TRAINER = """
import json, time
start = time.perf_counter()
import torch
after_torch = time.perf_counter()
from composer import Trainer
done = time.perf_counter()
print(json.dumps({"torch": after_torch - start, "after torch": done - after_torch}))
"""

FIRST_RUN = """
import json, time
start = time.perf_counter()
import torch
t_torch = time.perf_counter()
import torchmetrics
t_metrics = time.perf_counter()
from composer import Callback, Trainer
from composer.models import MLP, ComposerClassifier
from composer.datasets import digits_dataloaders
from composer.utils import seed_all
t_imports = time.perf_counter()

class FirstBatch(Callback):
    def batch_start(self, state, logger):
        if not hasattr(self, "at"):
            self.at = time.perf_counter()

first = FirstBatch()
seed_all(17)
train_dl, eval_dl = digits_dataloaders(batch_size=64)
model = ComposerClassifier(MLP(in_features=64, hidden=(128,), num_classes=10), num_classes=10)
t_model = time.perf_counter()
trainer = Trainer(
    model=model,
    train_dataloader=train_dl,
    eval_dataloader=eval_dl,
    seed=17,
    optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
    max_duration="1ba",
    callbacks=[first],
)
t_trainer = time.perf_counter()
trainer.fit()
trainer.close()
print(json.dumps({
    "torch": t_torch - start,
    "torchmetrics": t_metrics - t_torch,
    "composer imports": t_imports - t_metrics,
    "data and model": t_model - t_imports,
    "Trainer()": t_trainer - t_model,
    "fit() to the first batch": first.at - t_trainer,
    "first batch after torch and torchmetrics": first.at - t_metrics,
}))
"""

TORCHMETRICS = """
import json, time
import torch
start = time.perf_counter()
import torchmetrics
print(json.dumps({"after torch": time.perf_counter() - start}))
"""


COLD = " (cold cache)"  # a label ending so runs with an empty XDG_CACHE_HOME


def cases(python: str) -> dict[str, tuple[list[str], int]]:
    """Label -> (command, the exit status it must end with)."""
    cli = [python, "-m", "composer.cli"]
    return {
        "composer --help" + COLD: ([*cli, "--help"], 0),
        "composer list" + COLD: ([*cli, "list"], 0),
        'python -c "import torch"': ([python, "-c", "import torch"], 0),
        "composer --help": ([*cli, "--help"], 0),
        "composer list": ([*cli, "list"], 0),
        "composer train --help": ([*cli, "train", "--help"], 0),
        "composer train, a type error": ([*cli, "train", "-f", str(RECIPE), "train_batch_size=big"], 2),
        "composer train, a misspelled method": ([*cli, "train", "-f", str(RECIPE), "algorithms.mixupp.alpha=1"], 2),
        "composer train, a value error": ([*cli, "train", "-f", str(RECIPE), "algorithms.mixup.alpha=-1"], 2),
        "from composer import Trainer": ([python, "-c", TRAINER], 0),
        "README first run, to the first batch": ([python, "-c", FIRST_RUN], 0),
        "import torchmetrics (after torch)": ([python, "-c", TORCHMETRICS], 0),
    }


def run_once(command: list[str], expected: int, cold: bool = False) -> tuple[float, dict[str, float]]:
    """The wall time of one run and what it printed as JSON (its in-process figures), if anything."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="startup-cold-") as empty:
        if cold:
            env["XDG_CACHE_HOME"] = empty
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
        wall = time.perf_counter() - start
    if done.returncode != expected:
        raise SystemExit(f"{command[:4]} exited {done.returncode}, expected {expected}:\n{done.stderr[-2000:]}")
    last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    inner = json.loads(last[0]) if last and last[0].startswith("{") else {}
    return wall, inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    args = parser.parse_args()
    table = cases(sys.executable)
    walls: dict[str, list[float]] = {label: [] for label in table}
    inner: dict[str, dict[str, list[float]]] = {label: {} for label in table}
    for _ in range(args.rounds):
        for label, (command, expected) in table.items():
            wall, figures = run_once(command, expected, cold=label.endswith(COLD))
            walls[label].append(wall)
            for name, value in figures.items():
                inner[label].setdefault(name, []).append(value)
    torch_wall = statistics.median(walls['python -c "import torch"'])
    print(f"start-up, medians of {args.rounds} interleaved rounds (wall time of a fresh interpreter)\n")
    print("| command | median (s) | / import torch | - import torch (s) |")
    print("|---|---|---|---|")
    for label, values in walls.items():
        median = statistics.median(values)
        print(f"| {label} | {median:.2f} | {median / torch_wall:.2f}x | {median - torch_wall:+.2f} |")
    print("\ninside the process (medians, s):\n")
    for label, figures in inner.items():
        if figures:
            parts = ", ".join(f"{name} {statistics.median(values):.3f}" for name, values in figures.items())
            print(f"- {label}: {parts}")


if __name__ == "__main__":
    main()
