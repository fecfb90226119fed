"""Equal tuning budget for the text job: the baseline and the recipes that change its positions get the same search.

The baseline and the recipes that change its positions (ALiBi, ALiBi with sequence-length warmup, and gated linear
units with ALiBi) each get the same coordinate search, at 1,200 batches of 32 samples (the recipes' durations before
the search), chosen by the same rule:

1. the learning rate, up the ladder 2e-3, 4e-3, 8e-3, 1.6e-2 (linear decay after a 2% warmup) until a rate does
   worse than the best before it;
2. at the best rate, warmup (2% or 10%) x schedule (linear or cosine decay): 3 more trials;
3. the best so far at half and at twice the batch size (32), with the learning rate scaled by the square root of the
   batch-size ratio and the number of batches scaled inversely, so every trial sees the same number of samples.

The other method recipes (gated linear units alone, Factorize, EMA, low-precision LayerNorm) keep the baseline's model
and positions and change one part of it; they take the baseline's tuned settings without a search of their own, a
budget smaller than the baseline's, so any bias is against them. The methods' own hyperparameters (ALiBi's and
sequence-length warmup's settings, EMA's half-life, ...) were set before this search and are not part of it.

Trials train on the corpus' tuning fold (``tuning: true``: documents ``i % 10 == 8`` held out and evaluated on,
disjoint from the validation split that ``composer compare`` reports on) with seed 100, which the reported runs never
use. Trials are ranked by the tuning fold's perplexity (lower is better); the time is printed, not used (it depends on
the host's load). Each finished trial is appended to ``--log`` as a JSON line, so several processes can tune different
recipes at once and a stopped search resumes.

Run:  .venv/bin/python benchmarks/tune_text.py --threads 1 --log recipes/results/text_tuning.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from composer.cli.compare import measure_metrics

__all__: list[str] = []

RECIPES = ["text_baseline", "text_alibi", "text_alibi_seqwarmup", "text_glu_alibi"]
LEARNING_RATES = [2e-3, 4e-3, 8e-3, 1.6e-2]
WARMUPS = ["0.02dur", "0.1dur"]
SCHEDULES = ["linear_decay_with_warmup", "cosine_decay_with_warmup"]
BATCH_SCALES = [0.5, 2.0]
SEARCH_BATCHES = 1200  # every trial sees 1,200 batches of 32 samples (at half or twice the batch: 2,400 or 600)
SEARCH_BATCH_SIZE = 32


def trial_overrides(trial: dict[str, Any]) -> tuple[str, list[str]]:
    """The duration and the overrides of one trial: ``SEARCH_BATCHES`` batches of ``SEARCH_BATCH_SIZE`` samples, in
    batches of the trial's size (a recipe's own duration and batch size are not used: they are its tuned ones)."""
    scale = trial["batch_size"] / SEARCH_BATCH_SIZE
    batches = SEARCH_BATCHES
    overrides = [
        "train_dataset.python_docs.tuning=true",
        "eval_dataset.python_docs.tuning=true",
        f"train_batch_size={trial['batch_size']}",
        f"optimizer.decoupled_adamw.lr={trial['lr']}",
        *(f"schedulers.{name}=false" for name in SCHEDULES),  # drop the recipe's schedule, then add the trial's
        f"schedulers={{{trial['schedule']}: {{warmup_time: {trial['warmup']}}}}}",
    ]
    return f"{round(batches / scale)}ba", overrides


def run_trial(recipe: Path, trial: dict[str, Any], seed: int, log: Path) -> dict[str, Any]:
    """Trains one trial and appends its result to ``log``."""
    duration, overrides = trial_overrides(trial)
    seconds, metrics = measure_metrics(recipe, duration, seed, overrides, metric="Perplexity")
    row = {
        "recipe": recipe.stem,
        **trial,
        "duration": duration,
        "perplexity": metrics["Perplexity"],
        "seconds": seconds,
        "load": os.getloadavg()[0],
    }
    with log.open("a") as file:
        file.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)
    return row


def tune(recipe: Path, seed: int, log: Path, done: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs the recipe's trials not yet in ``done``; returns its best trial."""
    batch_size = SEARCH_BATCH_SIZE

    def result(trial: dict[str, Any]) -> dict[str, Any]:
        for row in done:
            if row["recipe"] == recipe.stem and all(row[key] == value for key, value in trial.items()):
                return row
        done.append(run_trial(recipe, trial, seed, log))
        return done[-1]

    first: list[dict[str, Any]] = []
    for lr in LEARNING_RATES:  # up the ladder until a rate does worse than the best before it
        first.append(result({"lr": lr, "warmup": WARMUPS[0], "schedule": SCHEDULES[0], "batch_size": batch_size}))
        if len(first) > 1 and first[-1]["perplexity"] > min(row["perplexity"] for row in first[:-1]):
            break
    lr = min(first, key=lambda row: row["perplexity"])["lr"]
    grid = itertools.product(WARMUPS, SCHEDULES)
    shapes = [result({"lr": lr, "warmup": w, "schedule": s, "batch_size": batch_size}) for w, s in grid]
    best = min(shapes, key=lambda row: row["perplexity"])
    second = [
        result({**_trial_of(best), "batch_size": round(batch_size * scale), "lr": best["lr"] * math.sqrt(scale)})
        for scale in BATCH_SCALES
    ]
    return min([best, *second], key=lambda row: row["perplexity"])


def _trial_of(row: dict[str, Any]) -> dict[str, Any]:
    return {key: row[key] for key in ("lr", "warmup", "schedule", "batch_size")}


def report(rows: list[dict[str, Any]]) -> str:
    """The log as a Markdown table, in the order the trials ran, each recipe's best trial in bold."""
    best = {}
    for row in rows:
        if row["recipe"] not in best or row["perplexity"] < best[row["recipe"]]["perplexity"]:
            best[row["recipe"]] = row
    lines = [
        "| recipe | learning rate | warmup | schedule | batch | batches | perplexity (tuning fold) | seconds | load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = "**" if row is best[row["recipe"]] else ""
        lines.append(
            f"| {row['recipe']} | {row['lr']:.3g} | {row['warmup']} | {row['schedule'].split('_')[0]} | "
            f"{row['batch_size']} | {row['duration']} | {mark}{row['perplexity']:.3f}{mark} | {row['seconds']:.0f} | "
            f"{row['load']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", nargs="+", default=RECIPES)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--log", type=Path, default=Path("text_tuning.jsonl"))
    parser.add_argument("--report", action="store_true", help="train nothing: print the log as a Markdown table")
    args = parser.parse_args()
    if args.report:
        print(report([json.loads(line) for line in args.log.read_text().splitlines()]))
        return
    torch.set_num_threads(args.threads)
    folder = Path(__file__).parents[1] / "recipes"
    done = [json.loads(line) for line in args.log.read_text().splitlines()] if args.log.exists() else []
    best = {name: tune(folder / f"{name}.yaml", args.seed, args.log, done) for name in args.recipes}
    print("\nBest trial per recipe (lowest perplexity on the tuning fold):")
    for name, row in best.items():
        print(f"  {name:22s} {json.dumps(_trial_of(row))}: perplexity {row['perplexity']:.3f} ({row['duration']})")


if __name__ == "__main__":
    main()
