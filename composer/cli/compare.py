"""``composer compare``: which recipe reaches your accuracy fastest, measured on your own task.

The baseline recipe is trained for several durations; its (wall-clock time, accuracy) points trace a frontier. Each
other recipe is trained at its own duration (or at several, for a curve) and placed against that frontier: its
speed-up at accuracy ``A`` is the time the baseline frontier needs to reach ``A`` divided by the recipe's time
(see :mod:`composer.cli.frontier`). Every point is run with several seeds, in interleaved order (seed by seed, every
point once per seed) so that a machine's changing load falls on all recipes alike. Only ``fit()`` is timed: the
runs evaluate once, after training, and run without loggers, callbacks, progress bars or checkpoints.

Outputs, in ``--out``: ``compare.md`` (the table), ``compare.csv`` (every run), ``pareto.png`` (the plot).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer.cli.frontier import Point, pareto_frontier, speedup, time_to_reach
from composer.config import ConfigError, load_recipe

__all__ = ["add_parser", "format_table", "measure", "measure_metrics", "plot_pareto", "run_compare"]


@dataclasses.dataclass(frozen=True)
class _Scale:
    """How a metric is shown and compared: percent for accuracies, negated for lower-is-better metrics."""

    metric: str
    percent: bool
    lower_is_better: bool

    @classmethod
    def of(cls, metric: str) -> _Scale:
        from composer.callbacks.metric_stopper import infer_mode

        return cls(metric, "accuracy" in metric.lower(), infer_mode(metric) == "min")

    def show(self, value: float) -> float:
        return 100.0 * value if self.percent else value

    def quality(self, value: float) -> float:
        return -value if self.lower_is_better else value

    @property
    def label(self) -> str:
        return f"{self.metric} (%)" if self.percent else self.metric


def _recipe_name(path: Path) -> str:
    return path.stem


def measure_metrics(
    recipe: str | Path, duration: str, seed: int, overrides: Sequence[str] = ()
) -> tuple[float, dict[str, float]]:
    """Trains one recipe for ``duration`` with ``seed``; returns (seconds of ``fit()``, every evaluation metric).

    Only ``fit()`` is timed. The run has no loggers, callbacks, progress bar or checkpoints, and evaluates once,
    after training, on the recipe's ``eval_dataset`` (metric names as ``Accuracy``, ``CrossEntropy``).

    Args:
        recipe: The recipe file; it must have an ``eval_dataset``.
        duration: ``max_duration`` for this run.
        seed: The run's seed.
        overrides: ``key=value`` overrides applied before ``max_duration`` and ``seed``.

    Raises:
        ConfigError: If the recipe has no ``eval_dataset``.
    """
    config = load_recipe(recipe, [*overrides, f"max_duration={duration}", f"seed={seed}"])
    eval_dataset = config.eval_dataset
    if eval_dataset is None:
        raise ConfigError(str(recipe), "composer compare needs an eval_dataset in every recipe, to measure accuracy.")
    config = dataclasses.replace(
        config,
        eval_dataset=None,
        loggers={},
        callbacks={},
        progress_bar=False,
        log_to_console=False,
        save_folder=None,
        autoresume=False,
    )
    trainer = config.initialize_object()
    eval_batch_size = config.eval_batch_size or config.train_batch_size
    eval_loader = eval_dataset.initialize_object(eval_batch_size, False, seed)
    try:
        start = time.perf_counter()
        trainer.fit()
        seconds = time.perf_counter() - start
        results = trainer.eval(eval_loader)
    finally:
        trainer.close()
    return seconds, {key.rsplit("/", 1)[-1]: value for key, value in results.items()}


def measure(
    recipe: str | Path, duration: str, seed: int, metric: str = "Accuracy", overrides: Sequence[str] = ()
) -> tuple[float, float]:
    """Trains one recipe for ``duration`` with ``seed`` and returns (seconds of ``fit()``, final ``metric``).

    See :func:`measure_metrics`.

    Raises:
        ConfigError: If the recipe has no ``eval_dataset`` or the model has no such metric.
    """
    seconds, results = measure_metrics(recipe, duration, seed, overrides)
    if metric not in results:
        raise ConfigError("--metric", f"the model reports no metric {metric!r}; it reports {sorted(results)}.")
    return seconds, results[metric]


def run_compare(
    baseline: Path,
    recipes: Sequence[Path],
    baseline_durations: Sequence[str],
    recipe_durations: Sequence[str] | None,
    seeds: Sequence[int],
    metric: str = "Accuracy",
    overrides: Sequence[str] = (),
    progress: bool | None = None,
) -> tuple[list[Point], list[dict[str, Any]]]:
    """Runs every (recipe, duration, seed), interleaved by seed; returns the points and the raw runs.

    Args:
        baseline: The baseline recipe.
        recipes: The recipes to compare against it.
        baseline_durations: The durations that trace the baseline's frontier.
        recipe_durations: Durations for the other recipes; None runs each at its own ``max_duration``.
        seeds: The seeds of every point.
        metric: The evaluation metric.
        overrides: ``key=value`` overrides applied to every recipe.
        progress: Show a progress bar (None: when standard error is a terminal).
    """
    from tqdm.auto import tqdm

    plan: list[tuple[Path, str]] = [(baseline, d) for d in baseline_durations]
    for recipe in recipes:
        own = [str(load_recipe(recipe, overrides).max_duration)] if recipe_durations is None else recipe_durations
        plan += [(recipe, d) for d in own]
    # Check every recipe before spending time on runs: a mistake in the last one should not wait for the first.
    for recipe, duration in plan:
        load_recipe(recipe, [*overrides, f"max_duration={duration}"])
    for recipe in dict.fromkeys(recipe for recipe, _ in plan):
        measure(recipe, "2ba", seeds[0], metric, overrides)  # untimed warm-up: first-call costs (kernels, caches)

    runs: list[dict[str, Any]] = []
    total = len(plan) * len(seeds)
    bar = tqdm(total=total, desc="compare", unit="run", disable=None if progress is None else not progress)
    for seed in seeds:
        for recipe, duration in plan:
            bar.set_postfix_str(f"{_recipe_name(recipe)} {duration} seed {seed}")
            seconds, value = measure(recipe, duration, seed, metric, overrides)
            runs.append(
                {"recipe": _recipe_name(recipe), "duration": duration, "seed": seed, "seconds": seconds, metric: value}
            )
            bar.update()
            if bar.disable:  # no bar (not a terminal): one line per run, so a log still shows progress
                print(
                    f"compare: run {len(runs)}/{total}: {_recipe_name(recipe)} {duration} seed {seed}: "
                    f"{seconds:.2f} s, {metric} {value:.4f}",
                    file=sys.stderr,
                    flush=True,
                )
    bar.close()
    points = []
    for recipe, duration in plan:
        mine = [r for r in runs if r["recipe"] == _recipe_name(recipe) and r["duration"] == duration]
        points.append(Point(_recipe_name(recipe), duration, [r["seconds"] for r in mine], [r[metric] for r in mine]))
    return points, runs


def _frontier(points: Sequence[Point], baseline: str, scale: _Scale) -> list[tuple[float, float]]:
    return pareto_frontier([(p.time, scale.quality(p.value)) for p in points if p.recipe == baseline])


def format_table(points: Sequence[Point], baseline: str, metric: str = "Accuracy", tolerance: float = 0.5) -> str:
    """The comparison as a Markdown table, then the speed-up of each recipe at the baseline's best accuracy.

    Each row's speed-up is the baseline frontier's time to reach that row's accuracy over the row's time (``>``: the
    row beats every baseline point, so the frontier's slowest time gives a lower bound; ``<``: the row is below the
    frontier's fastest point). The summary reads every recipe's curve and the baseline frontier at the same target,
    the baseline's best minus ``tolerance``, interpolating each linearly between measured durations.

    Args:
        points: The measured points (the baseline's and the recipes').
        baseline: The baseline recipe's name.
        metric: The metric's name.
        tolerance: How far below the baseline's best (in the shown unit: points of percent for accuracies) a recipe
            may end and still count as reaching it.

    Example:
        >>> points = [Point("base", "2ep", [2.0], [0.90]), Point("base", "4ep", [4.0], [0.98]),
        ...           Point("fast", "2ep", [2.0], [0.978])]
        >>> print(format_table(points, "base"))
        | recipe | duration | time (s) | Accuracy (%) | speed-up |
        |---|---|---|---|---|
        | base | 2ep | 2.00 ± 0.00 | 90.00 ± 0.00 | frontier |
        | base | 4ep | 4.00 ± 0.00 | 98.00 ± 0.00 | frontier |
        | fast | 2ep | 2.00 ± 0.00 | 97.80 ± 0.00 | 1.98x |
        <BLANKLINE>
        Baseline best: 98.00 (base 4ep, 4.00 s). Target (best - 0.5): 97.50, reached by the baseline frontier in 3.88 s.
        - fast: reaches the target in 2.00 s on its curve (2ep measured: 97.80 in 2.00 s): 1.94x faster than the baseline frontier.
    """
    scale = _Scale.of(metric)
    frontier = _frontier(points, baseline, scale)
    on_frontier = {(t, q) for t, q in frontier}
    lines = [f"| recipe | duration | time (s) | {scale.label} | speed-up |", "|---|---|---|---|---|"]
    for p in points:
        if p.recipe == baseline and (p.time, scale.quality(p.value)) in on_frontier:
            factor = "frontier"
        else:
            factor = str(speedup(frontier, p.time, scale.quality(p.value)))
        lines.append(
            f"| {p.recipe} | {p.duration} | {p.time:.2f} ± {p.time_std:.2f} | "
            f"{scale.show(p.value):.2f} ± {scale.show(p.value_std):.2f} | {factor} |"
        )
    best = max((p for p in points if p.recipe == baseline), key=lambda p: scale.quality(p.value))
    shown_best = scale.show(best.value)
    target_shown = shown_best + tolerance if scale.lower_is_better else shown_best - tolerance
    target = scale.quality(target_shown / 100.0 if scale.percent else target_shown)
    reach = time_to_reach(frontier, target)
    assert reach is not None  # the target is below the frontier's best
    sign = "+" if scale.lower_is_better else "-"
    lines += [
        "",
        f"Baseline best: {shown_best:.2f} ({best.recipe} {best.duration}, {best.time:.2f} s). Target (best {sign} "
        f"{tolerance:g}): {target_shown:.2f}, reached by the baseline frontier in {reach:.2f} s.",
    ]
    for name in dict.fromkeys(p.recipe for p in points if p.recipe != baseline):
        mine = [p for p in points if p.recipe == name]
        # The recipe's own frontier, interpolated like the baseline's: both curves are read at the target.
        recipe_reach = time_to_reach(_frontier(mine, name, scale), target)
        if recipe_reach is None:
            lines.append(f"- {name}: no duration reaches the target.")
            continue
        fastest = min((p for p in mine if scale.quality(p.value) >= target), key=lambda p: p.time)
        lines.append(
            f"- {name}: reaches the target in {recipe_reach:.2f} s on its curve ({fastest.duration} measured: "
            f"{scale.show(fastest.value):.2f} in {fastest.time:.2f} s): {reach / recipe_reach:.2f}x faster than the "
            "baseline frontier."
        )
    return "\n".join(lines)


def plot_pareto(points: Sequence[Point], baseline: str, path: str | Path, metric: str = "Accuracy") -> Path:
    """Draws time against the metric: the baseline's frontier and every recipe's points, with seed spreads.

    Args:
        points: The measured points.
        baseline: The baseline recipe's name.
        path: The PNG to write.
        metric: The metric's name.

    Returns:
        Path: The file written.

    Raises:
        ImportError: Without matplotlib.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    scale = _Scale.of(metric)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    names = list(dict.fromkeys(p.recipe for p in points))
    markers = "osD^v<>ph*"
    for index, name in enumerate(names):
        mine = sorted((p for p in points if p.recipe == name), key=lambda p: p.time)
        axes.errorbar(
            [p.time for p in mine],
            [scale.show(p.value) for p in mine],
            xerr=[p.time_std for p in mine],
            yerr=[scale.show(p.value_std) for p in mine],
            fmt=markers[index % len(markers)] + ("-" if name == baseline else ""),
            capsize=3,
            label=f"{name} (baseline)" if name == baseline else name,
        )
        for p in mine:
            axes.annotate(
                p.duration, (p.time, scale.show(p.value)), textcoords="offset points", xytext=(4, -10), fontsize=7
            )
    frontier = _frontier(points, baseline, scale)
    axes.plot(
        [t for t, _ in frontier],
        [scale.show(-q if scale.lower_is_better else q) for _, q in frontier],
        color="gray",
        linestyle=":",
        linewidth=1,
        label="baseline frontier",
    )
    axes.set_xlabel("training time (s, wall clock)")
    axes.set_ylabel(scale.label)
    axes.set_title("Time against quality: up and to the left is better")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def _write_outputs(
    out: Path, table: str, runs: Sequence[dict[str, Any]], points: Sequence[Point], args: Any
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(table + "\n")
    with open(out / "compare.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(runs[0]))
        writer.writeheader()
        writer.writerows(runs)
    written = [out / "compare.md", out / "compare.csv"]
    if importlib.util.find_spec("matplotlib") is None:
        print("composer compare: no plot: install matplotlib to get pareto.png.", file=sys.stderr)
    else:
        written.append(plot_pareto(points, _recipe_name(args.baseline), out / "pareto.png", args.metric))
    return written


def _run(args: argparse.Namespace) -> int:
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    for path in [args.baseline, *args.recipes]:
        if not path.is_file():
            raise ConfigError(str(path), "the recipe file does not exist.")
    names = [_recipe_name(p) for p in [args.baseline, *args.recipes]]
    if len(set(names)) != len(names):
        raise ConfigError("recipes", f"recipe file names must differ (they name the rows), got {names}.")
    points, runs = run_compare(
        args.baseline,
        args.recipes,
        args.baseline_durations,
        args.recipe_durations,
        args.seeds,
        metric=args.metric,
        overrides=args.override,
        progress=None,
    )
    table = format_table(points, _recipe_name(args.baseline), args.metric, args.tolerance)
    written = _write_outputs(args.out, table, runs, points, args)
    print(table)
    print(f"\nWrote {', '.join(str(path) for path in written)}.")
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer compare`` to the command line's subcommands."""
    parser = subparsers.add_parser(
        "compare",
        help="measure recipes against a baseline's time-accuracy frontier (table + Pareto plot)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("recipes", nargs="+", type=Path, help="the recipes to compare (YAML files)")
    parser.add_argument("-b", "--baseline", type=Path, required=True, help="the baseline recipe (YAML file)")
    parser.add_argument(
        "--baseline-durations", nargs="+", required=True, metavar="TIME", help="durations of the baseline frontier"
    )
    parser.add_argument(
        "--recipe-durations", nargs="+", metavar="TIME", help="durations of each recipe (default: its max_duration)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="seeds of every point (default 0 1 2)")
    parser.add_argument("--metric", default="Accuracy", help="evaluation metric (default Accuracy)")
    parser.add_argument("--tolerance", type=float, default=0.5, help="points below the baseline's best that count")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE", help="for every recipe")
    parser.add_argument("--out", type=Path, default=Path("compare"), help="folder for the outputs (default ./compare)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.set_defaults(run=_run)
