"""``composer compare``: which recipe reaches your accuracy fastest, measured on your own task.

The baseline recipe is trained for several durations; its (wall-clock time, accuracy) points trace a frontier. Each
other recipe is trained at its own duration (or at several, for a curve) and placed against that frontier: its
speed-up at accuracy ``A`` is the time the baseline frontier needs to reach ``A`` divided by the recipe's time
(see :mod:`composer.cli.frontier`). Every point is run with several seeds, in interleaved order (seed by seed, every
point once per seed) so that a machine's changing load falls on all recipes alike. Only ``fit()`` is timed: the
runs evaluate once, after training, and run without loggers, callbacks, progress bars or checkpoints.

Every speed-up comes with a 95% percentile bootstrap interval over the passes (see :mod:`composer.cli.bootstrap`);
runs far slower than their recipe's others are outliers, rerun and listed apart (see :mod:`composer.cli.outliers`).

Outputs, in ``--out``: ``compare.md`` (the table), ``compare.csv`` (every run), ``pareto.png`` (the plot),
``evaluations.md`` (every run's other metrics, throughput and ``--eval-also`` evaluations, averaged per point; see
:mod:`composer.cli.compare_evals`).
``--report CSV...`` trains nothing and prints the table of earlier runs, pooled (repeated compares of one setup).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib.util
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.cli.compare_evals import (
    EVAL_ALSO_HELP,
    evaluate_also,
    format_evaluations,
    mean_tokens_per_s,
    parse_eval_also,
    throughput,
)
from composer.cli.compare_report import format_outliers, format_table, plot_pareto
from composer.cli.frontier import Point
from composer.cli.outliers import DEFAULT_FACTOR, RunTime, duration_amount, find_outliers, is_outlier
from composer.config import ConfigError, load_recipe

__all__ = [
    "add_parser",
    "durations_of",
    "format_outliers",
    "format_table",
    "measure",
    "measure_metrics",
    "plot_pareto",
    "points_from_runs",
    "read_runs",
    "rerun_outliers",
    "run_compare",
]


def _recipe_name(path: Path) -> str:
    return path.stem


def measure_metrics(
    recipe: str | Path,
    duration: str,
    seed: int,
    overrides: Sequence[str] = (),
    eval_also: Mapping[str, list[str]] | None = None,
    metric: str = "Accuracy",
) -> tuple[float, dict[str, Any]]:
    """Trains one recipe for ``duration`` with ``seed``; returns (seconds of ``fit()``, every evaluation metric).

    Only ``fit()`` is timed. The run has no loggers, callbacks, progress bar or checkpoints, and evaluates once,
    after training, on the recipe's ``eval_dataset`` (metric names as ``Accuracy``, ``CrossEntropy``). The results
    also hold ``tokens_per_s`` when the batches count tokens, and ``METRIC@LABEL`` of each ``eval_also`` evaluation
    (see :mod:`composer.cli.compare_evals`).

    Args:
        recipe: The recipe file; it must have an ``eval_dataset``.
        duration: ``max_duration`` for this run.
        seed: The run's seed.
        overrides: ``key=value`` overrides applied before ``max_duration`` and ``seed``.
        eval_also: ``{label: overrides}`` of extra evaluations of the trained model.
        metric: The metric the extra evaluations record.

    Raises:
        ConfigError: If the recipe has no ``eval_dataset``.
    """
    config = load_recipe(recipe, [*overrides, f"max_duration={duration}", f"seed={seed}"])
    eval_dataset = config.eval_dataset
    if eval_dataset is None:
        raise ConfigError(str(recipe), "composer compare needs an eval_dataset in every recipe, to measure accuracy.")
    quiet: dict[str, Any] = {"progress_bar": False, "log_to_console": False, "save_folder": None, "autoresume": False}
    config = dataclasses.replace(
        config,
        eval_dataset=None,
        loggers={},
        callbacks={},
        **quiet,
    )
    trainer = config.initialize_object()
    eval_batch_size = config.eval_batch_size or config.train_batch_size
    eval_loader = eval_dataset.initialize_object(eval_batch_size, False, seed)
    try:
        start = time.perf_counter()
        trainer.fit()
        seconds = time.perf_counter() - start
        results: dict[str, Any] = {key.rsplit("/", 1)[-1]: v for key, v in trainer.eval(eval_loader).items()}
        results.update(throughput(trainer, seconds))
        results.update(evaluate_also(trainer, recipe, overrides, seed, metric, eval_also or {}))
    finally:
        trainer.close()
    return seconds, results


def measure(
    recipe: str | Path, duration: str, seed: int, metric: str = "Accuracy", overrides: Sequence[str] = ()
) -> tuple[float, float]:
    """Trains one recipe for ``duration`` with ``seed`` and returns (seconds of ``fit()``, final ``metric``).

    See :func:`measure_metrics`.

    Raises:
        ConfigError: If the recipe has no ``eval_dataset`` or the model has no such metric.
    """
    seconds, results = measure_metrics(recipe, duration, seed, overrides)
    return seconds, _metric(results, metric)


def _metric(results: Mapping[str, Any], metric: str) -> float:
    if metric not in results:
        raise ConfigError("--metric", f"the model reports no metric {metric!r}; it reports {sorted(results)}.")
    return float(results[metric])


def durations_of(
    recipes: Sequence[Path], recipe_durations: Sequence[str] | None, overrides: Sequence[str] = ()
) -> dict[Path, list[str]]:
    """The durations each recipe is trained for: ``recipe_durations`` (``--recipe-durations``) read per recipe.

    An entry ``NAME=T1,T2`` gives the durations of the recipe whose file is ``NAME.yaml``; a bare duration is for every
    recipe no entry names. A recipe given neither is trained at its own ``max_duration``.

    Raises:
        ConfigError: At ``--recipe-durations``, for a name that is no recipe's, a recipe named twice or given no time.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> recipe = "model: {mlp: {in_features: 4}}\\ntrain_dataset: {digits: {}}\\ntrain_batch_size: 8\\nmax_duration: 9ba"
        >>> for name in ("a", "b"):
        ...     _ = (folder / f"{name}.yaml").write_text(recipe)
        >>> recipes = [folder / "a.yaml", folder / "b.yaml"]
        >>> [d for d in durations_of(recipes, ["b=2ba,4ba"]).values()]
        [['9ba'], ['2ba', '4ba']]
        >>> [d for d in durations_of(recipes, ["3ba", "a=1ba"]).values()]
        [['1ba'], ['3ba']]
    """
    names = {_recipe_name(recipe): recipe for recipe in recipes}
    shared = [entry for entry in recipe_durations or () if "=" not in entry]
    named: dict[str, list[str]] = {}
    for entry in recipe_durations or ():
        if "=" not in entry:
            continue
        name, _, durations = entry.partition("=")
        if name not in names or name in named or not durations.strip(","):
            problem = (
                "names no recipe" if name not in names else "names a recipe twice" if name in named else "gives no time"
            )
            raise ConfigError(
                "--recipe-durations",
                f"{entry!r} {problem}; give NAME=TIME,TIME once for a recipe (NAME: its file name without .yaml; "
                f"the recipes are {sorted(names)}), or bare durations for every recipe.",
            )
        named[name] = [d for d in durations.split(",") if d]
    return {
        recipe: named.get(name) or shared or [str(load_recipe(recipe, overrides).max_duration)]
        for name, recipe in names.items()
    }


def run_compare(
    baseline: Path,
    recipes: Sequence[Path],
    baseline_durations: Sequence[str],
    recipe_durations: Sequence[str] | None,
    seeds: Sequence[int],
    metric: str = "Accuracy",
    overrides: Sequence[str] = (),
    progress: bool | None = None,
    repeats: int = 1,
    outlier_factor: float = DEFAULT_FACTOR,
    reruns: int = 1,
    eval_also: Mapping[str, list[str]] | None = None,
) -> tuple[list[Point], list[dict[str, Any]]]:
    """Runs every (recipe, duration) once per pass (a seed of a repeat), pass by pass; returns the points and runs.

    After the passes, runs that :mod:`composer.cli.outliers` flags are rerun (see :func:`rerun_outliers`); the
    points leave every outlier out.

    Args:
        baseline: The baseline recipe.
        recipes: The recipes to compare against it.
        baseline_durations: The durations that trace the baseline's frontier.
        recipe_durations: Durations for the other recipes (:func:`durations_of`: ``'900ba'`` for every recipe,
            ``'NAME=700ba,900ba'`` for one); None runs each at its own ``max_duration``.
        seeds: The seeds of every point.
        metric: The evaluation metric.
        overrides: ``key=value`` overrides applied to every recipe.
        progress: Show a progress bar (None: when standard error is a terminal).
        repeats: How many times to run all the seeds (the passes are ``repeats * len(seeds)``).
        outlier_factor: A run more than this many times slower (per unit of duration) than the median of its
            recipe's other runs is an outlier.
        reruns: How many times an outlier run may be rerun (0: excluded, never rerun).
        eval_also: ``{label: overrides}`` of extra evaluations of every trained model (``--eval-also``).

    Returns:
        The points, and every run as a dict (``recipe``, ``duration``, ``seed``, ``repeat``, ``seconds``, the metric,
        ``status``: ``'ok'``, ``'outlier'`` (excluded) or ``'rerun'`` (replaces an outlier), and ``slowdown``: an
        outlier's time against its siblings' median).
    """
    from tqdm.auto import tqdm

    if repeats < 1:
        raise ConfigError("--repeats", f"must be at least 1, got {repeats}.")
    plan: list[tuple[Path, str]] = [(baseline, d) for d in baseline_durations]
    for recipe, durations in durations_of(recipes, recipe_durations, overrides).items():
        plan += [(recipe, d) for d in durations]
    # Check every recipe before spending time on runs: a mistake in the last one should not wait for the first.
    for recipe, duration in plan:
        load_recipe(recipe, [*overrides, f"max_duration={duration}"])
        duration_amount(duration)
    for recipe in dict.fromkeys(recipe for recipe, _ in plan):
        measure(recipe, "2ba", seeds[0], metric, overrides)  # untimed warm-up: first-call costs (kernels, caches)
    paths = {_recipe_name(recipe): recipe for recipe, _ in plan}

    def timed(name: str, duration: str, seed: int) -> tuple[float, float, dict[str, Any]]:
        seconds, results = measure_metrics(paths[name], duration, seed, overrides, eval_also, metric)
        return seconds, _metric(results, metric), {k: v for k, v in results.items() if k != metric}

    runs: list[dict[str, Any]] = []
    total = len(plan) * len(seeds) * repeats
    bar = tqdm(total=total, desc="compare", unit="run", disable=None if progress is None else not progress)
    for repeat in range(repeats):
        for seed in seeds:
            for recipe, duration in plan:
                bar.set_postfix_str(f"{_recipe_name(recipe)} {duration} seed {seed}")
                seconds, value, extra = timed(_recipe_name(recipe), duration, seed)
                runs.append({**_record(_recipe_name(recipe), duration, seed, repeat, seconds, metric, value), **extra})
                bar.update()
                if bar.disable:  # no bar (not a terminal): one line per run, so a log still shows progress
                    print(
                        f"compare: run {len(runs)}/{total}: {_recipe_name(recipe)} {duration} seed {seed}: "
                        f"{seconds:.2f} s, {metric} {value:.4f}",
                        file=sys.stderr,
                        flush=True,
                    )
    bar.close()
    runs = rerun_outliers(runs, timed, metric, outlier_factor, reruns)
    return points_from_runs(runs, metric, [(_recipe_name(r), d) for r, d in plan]), runs


def _record(
    recipe: str, duration: str, seed: int, repeat: int, seconds: float, metric: str, value: float
) -> dict[str, Any]:
    return {
        "recipe": recipe,
        "duration": duration,
        "seed": seed,
        "repeat": repeat,
        "seconds": seconds,
        metric: value,
        "status": "ok",
        "slowdown": "",
    }


def _run_time(run: dict[str, Any]) -> RunTime:
    return RunTime(run["recipe"], run["duration"], float(run["seconds"]))


def rerun_outliers(
    runs: Sequence[dict[str, Any]],
    measure_run: Callable[[str, str, int], tuple[float, float] | tuple[float, float, dict[str, Any]]],
    metric: str = "Accuracy",
    factor: float = DEFAULT_FACTOR,
    reruns: int = 1,
) -> list[dict[str, Any]]:
    """Flags the outlier runs and reruns each up to ``reruns`` times, until a rerun is within the rule.

    Every run is checked against all the others (:func:`~composer.cli.outliers.find_outliers`); a flagged run gets
    ``status='outlier'`` and its ``slowdown``. A rerun (same recipe, duration and seed, of the same pass) is checked
    against the runs that are not outliers: within the rule it is kept with ``status='rerun'``, else it is an outlier
    too and, while reruns are left, the run is tried again.

    Args:
        runs: The run records (as :func:`run_compare` makes them); they are not modified.
        measure_run: Trains ``(recipe, duration, seed)`` and returns (seconds, metric value), optionally with a
            dict of more fields for the rerun's record (its other metrics).
        metric: The metric's key in the records.
        factor: The outlier rule's factor.
        reruns: The most reruns per outlier (0: flag only).

    Returns:
        The records with the flags, then the reruns.

    Example:
        >>> runs = [_record("base", d, 0, 0, s, "Accuracy", 0.9) for d, s in [("2ep", 2.0), ("4ep", 4.0), ("6ep", 30.0)]]
        >>> out = rerun_outliers(runs, lambda recipe, duration, seed: (6.2, 0.9))
        >>> [(r["duration"], r["seconds"], r["status"], r["slowdown"]) for r in out]
        [('2ep', 2.0, 'ok', ''), ('4ep', 4.0, 'ok', ''), ('6ep', 30.0, 'outlier', 5.0), ('6ep', 6.2, 'rerun', '')]
    """
    if reruns < 0:
        raise ConfigError("--reruns", f"must be 0 or more, got {reruns}.")
    records = [{**run, "status": run.get("status") or "ok", "slowdown": run.get("slowdown", "")} for run in runs]
    flagged = find_outliers([_run_time(run) for run in records], factor)
    for outlier in flagged:
        records[outlier.index].update(status="outlier", slowdown=round(outlier.ratio, 2))
    for outlier in flagged:
        original = records[outlier.index]
        for _ in range(reruns):
            seconds, value, *more = measure_run(original["recipe"], original["duration"], original["seed"])
            rerun = {**original, **(more[0] if more else {})}
            rerun.update({"seconds": seconds, metric: value, "status": "rerun", "slowdown": ""})
            kept = [_run_time(run) for run in records if run["status"] != "outlier"]
            check = is_outlier(_run_time(rerun), kept, factor)
            if check is not None:
                rerun.update(status="outlier", slowdown=round(check.ratio, 2))
            records.append(rerun)
            if check is None:
                break
    return records


def points_from_runs(
    runs: Sequence[dict[str, Any]], metric: str = "Accuracy", order: Sequence[tuple[str, str]] | None = None
) -> list[Point]:
    """The points of the run records, leaving outliers out; each run's pass is its (repeat, seed).

    Args:
        runs: Run records (``recipe``, ``duration``, ``seed``, ``seconds``, the metric; optional ``repeat`` and
            ``status``).
        metric: The metric's key in the records.
        order: The (recipe, duration) order of the points (default: first appearance). A point whose runs are all
            outliers is left out.

    Example:
        >>> runs = [_record("base", "2ep", seed, 0, 1.0 + seed, "Accuracy", 0.9) for seed in (0, 1)]
        >>> points_from_runs(runs)
        [Point(recipe='base', duration='2ep', times=[1.0, 2.0], values=[0.9, 0.9], passes=[0, 1])]
    """
    pass_of: dict[tuple[int, int], int] = {}
    for run in runs:
        pass_of.setdefault((int(run.get("repeat", 0)), int(run["seed"])), len(pass_of))
    kept = [run for run in runs if run.get("status", "ok") != "outlier"]
    keys = list(dict.fromkeys((run["recipe"], run["duration"]) for run in runs)) if order is None else list(order)
    points = []
    for recipe, duration in keys:
        mine = [run for run in kept if (run["recipe"], run["duration"]) == (recipe, duration)]
        if mine:
            points.append(
                Point(
                    recipe,
                    duration,
                    [float(run["seconds"]) for run in mine],
                    [float(run[metric]) for run in mine],
                    [pass_of[(int(run.get("repeat", 0)), int(run["seed"]))] for run in mine],
                )
            )
    return points


def _write_outputs(
    out: Path, table: str, runs: Sequence[dict[str, Any]], points: Sequence[Point], args: Any
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(table + "\n")
    written = [out / "compare.md", out / "compare.csv"]
    evaluations = format_evaluations(runs, args.metric)
    if evaluations:
        (out / "evaluations.md").write_text(evaluations + "\n")
        written.append(out / "evaluations.md")
    with open(out / "compare.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for run in runs for key in run)))
        writer.writeheader()
        writer.writerows(runs)
    if importlib.util.find_spec("matplotlib") is None:
        print("composer compare: no plot: install matplotlib to get pareto.png.", file=sys.stderr)
    else:
        written.append(plot_pareto(points, _recipe_name(args.baseline), out / "pareto.png", args.metric))
    return written


def read_runs(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The runs of earlier compares (their ``compare.csv``), pooled: each file's passes stay apart from the others'.

    A file's ``repeat`` numbers are shifted past the previous files', so that a seed of one file and the same seed
    of another are different passes (they ran at different times).

    Args:
        paths: The CSV files.

    Returns:
        The run records, every value as read (strings).

    Raises:
        ConfigError: If a file is missing or lacks a column compare writes.
    """
    pooled: list[dict[str, Any]] = []
    offset = 0
    for path in paths:
        if not path.is_file():
            raise ConfigError(str(path), "--report: the CSV file does not exist.")
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        missing = {"recipe", "duration", "seed", "seconds"} - set(rows[0] if rows else {})
        if missing:
            raise ConfigError(str(path), f"--report: not a compare.csv (no columns {sorted(missing)}).")
        repeats = [int(row.get("repeat") or 0) for row in rows]
        for row, repeat in zip(rows, repeats, strict=True):
            pooled.append({**row, "repeat": offset + repeat})
        offset += max(repeats) + 1
    return pooled


def _report(args: argparse.Namespace) -> int:
    runs = read_runs(args.report)
    runs = rerun_outliers(runs, _no_rerun, args.metric, args.outlier_factor, reruns=0)
    points = points_from_runs(runs, args.metric)
    passes = len({index for p in points for index in p.run_passes})
    label = f"{passes} passes (the seeds of {len(args.report)} compare runs)" if len(args.report) > 1 else None
    print(_results(args, points, runs, label))
    evaluations = format_evaluations(runs, args.metric)
    if evaluations:
        print(f"\nEvaluations (means over the kept runs):\n\n{evaluations}")
    return 0


def _results(args: argparse.Namespace, points: Any, runs: Any, passes_label: str | None) -> str:
    """The table of ``points`` against the baseline frontier, then the outliers among ``runs``, if any."""
    table = format_table(
        points,
        _recipe_name(args.baseline),
        args.metric,
        args.tolerance,
        confidence=args.confidence,
        resamples=args.resamples,
        passes_label=passes_label,
        tokens_per_s=mean_tokens_per_s(runs),
    )
    outliers = format_outliers(runs, args.metric, args.outlier_factor)
    return f"{table}\n\n{outliers}" if outliers else table


def _no_rerun(recipe: str, duration: str, seed: int) -> tuple[float, float]:
    raise AssertionError("a report does not rerun")


def _run(args: argparse.Namespace) -> int:
    if args.report:
        return _report(args)
    if not args.recipes or not args.baseline_durations:
        raise ConfigError(
            "recipes" if not args.recipes else "--baseline-durations",
            "composer compare trains recipes against a baseline: give the recipe files and --baseline-durations "
            "(or --report CSV to re-report earlier runs).",
        )
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
        repeats=args.repeats,
        outlier_factor=args.outlier_factor,
        reruns=args.reruns,
        eval_also=parse_eval_also(args.eval_also),
    )
    seeds = len(args.seeds)
    label = (
        f"{seeds} seeds"
        if args.repeats == 1
        else f"{seeds * args.repeats} passes ({seeds} seeds x {args.repeats} repeats)"
    )
    table = _results(args, points, runs, label if seeds * args.repeats > 1 else None)
    written = _write_outputs(args.out, table, runs, points, args)
    print(table)
    evaluations = format_evaluations(runs, args.metric)
    if evaluations:
        print(f"\nEvaluations (means over the kept runs):\n\n{evaluations}")
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
    parser.add_argument("recipes", nargs="*", type=Path, help="the recipes to compare (YAML files)")
    parser.add_argument("-b", "--baseline", type=Path, required=True, help="the baseline recipe (YAML file)")
    parser.add_argument(
        "--baseline-durations", nargs="+", metavar="TIME", help="durations of the baseline frontier (required to train)"
    )
    parser.add_argument(
        "--recipe-durations",
        nargs="+",
        metavar="TIME",
        help="durations of each recipe, or NAME=TIME,TIME of one (default: its max_duration)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="seeds of every point (default 0 1 2)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="run all the seeds this many times (passes: seeds x repeats; default 1)"
    )
    parser.add_argument("--metric", default="Accuracy", help="evaluation metric (default Accuracy)")
    parser.add_argument("--tolerance", type=float, default=0.5, help="points below the baseline's best that count")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE", help="for every recipe")
    parser.add_argument("--out", type=Path, default=Path("compare"), help="folder for the outputs (default ./compare)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="coverage of the bootstrap intervals (default 0.95)"
    )
    parser.add_argument(
        "--report",
        nargs="+",
        type=Path,
        metavar="CSV",
        help="train nothing: print the table of earlier compares' runs (their compare.csv), pooled; -b names the baseline",
    )
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument(
        "--outlier-factor",
        type=float,
        default=DEFAULT_FACTOR,
        metavar="K",
        help="a run taking more than K times the median time per unit of duration of its recipe's other runs is an "
        f"outlier (default {DEFAULT_FACTOR:g})",
    )
    parser.add_argument(
        "--reruns", type=int, default=1, help="times an outlier run is rerun before it is left out (default 1)"
    )
    parser.add_argument("--eval-also", nargs="+", action="append", metavar=("LABEL", "KEY=VALUE"), help=EVAL_ALSO_HELP)
    parser.set_defaults(run=_run)
