"""The report of ``composer compare``: the table with every speed-up's bootstrap interval, the outliers, the plot.

:func:`format_table` reads the baseline's frontier and each recipe's speed-up from the measured points, and their
intervals from the same reading of every bootstrap resample (:mod:`composer.cli.bootstrap`); :func:`format_outliers`
lists the runs that :mod:`composer.cli.outliers` set apart; :func:`plot_pareto` draws time against quality.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.cli.bootstrap import MIN_PASSES, Interval, bootstrap_intervals, pass_resampler
from composer.cli.frontier import Point, Speedup, pareto_frontier, speedup, time_to_reach
from composer.cli.outliers import DEFAULT_FACTOR

__all__ = ["format_outliers", "format_table", "plot_pareto"]


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


def _frontier(points: Sequence[Point], baseline: str, scale: _Scale) -> list[tuple[float, float]]:
    return pareto_frontier([(p.time, scale.quality(p.value)) for p in points if p.recipe == baseline])


@dataclasses.dataclass(frozen=True)
class _Reading:
    """Every figure of the table, from one set of points (the measured ones, or a bootstrap resample)."""

    best: Point
    target_shown: float
    reach: float
    rows: dict[tuple[str, str], Speedup]  # a baseline point on the frontier has 1.00x
    on_frontier: set[tuple[str, str]]
    recipes: dict[str, tuple[float, Point] | None]  # time to reach the target on its curve, the fastest point there

    def statistics(self) -> dict[tuple[str, str], float | None]:
        """The speed-ups the bootstrap resamples: one per row (key: recipe, duration), one per recipe (key: name)."""
        values: dict[tuple[str, str], float | None] = {key: factor.factor for key, factor in self.rows.items()}
        for name, reached in self.recipes.items():
            values[(name, "")] = None if reached is None else self.reach / reached[0]
        return values


def _read(points: Sequence[Point], baseline: str, scale: _Scale, tolerance: float) -> _Reading:
    frontier = _frontier(points, baseline, scale)
    frontier_points = set(frontier)
    rows = {(p.recipe, p.duration): speedup(frontier, p.time, scale.quality(p.value)) for p in points}
    on_frontier = {
        (p.recipe, p.duration)
        for p in points
        if p.recipe == baseline and (p.time, scale.quality(p.value)) in frontier_points
    }
    best = max((p for p in points if p.recipe == baseline), key=lambda p: scale.quality(p.value))
    shown_best = scale.show(best.value)
    target_shown = shown_best + tolerance if scale.lower_is_better else shown_best - tolerance
    target = scale.quality(target_shown / 100.0 if scale.percent else target_shown)
    reach = time_to_reach(frontier, target)
    assert reach is not None  # the target is below the frontier's best
    recipes: dict[str, tuple[float, Point] | None] = {}
    for name in dict.fromkeys(p.recipe for p in points if p.recipe != baseline):
        mine = [p for p in points if p.recipe == name]
        # The recipe's own frontier, interpolated like the baseline's: both curves are read at the target.
        recipe_reach = time_to_reach(_frontier(mine, name, scale), target)
        if recipe_reach is None:
            recipes[name] = None
        else:
            fastest = min((p for p in mine if scale.quality(p.value) >= target), key=lambda p: p.time)
            recipes[name] = (recipe_reach, fastest)
    return _Reading(best, target_shown, reach, rows, on_frontier, recipes)


def _with_interval(text: str, interval: Interval | None) -> str:
    return text if interval is None else f"{text} {interval}"


def _point_rows(
    points: Sequence[Point],
    measured: _Reading,
    scale: _Scale,
    interval: Any,
    rates: Mapping[tuple[str, str], float],
) -> list[str]:
    """The table's header and one row per point: time, tokens/s (when ``rates``), the metric, the speed-up."""
    header = ["recipe", "duration", "time (s)", *(["tokens/s"] if rates else []), scale.label, "speed-up"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for p in points:
        key = (p.recipe, p.duration)
        shown = "frontier" if key in measured.on_frontier else _with_interval(str(measured.rows[key]), interval(key))
        if len(p.times) > 1:
            time = f"{p.time:.2f} ± {p.time_std:.2f}"
            value = f"{scale.show(p.value):.2f} ± {scale.show(p.value_std):.2f}"
        else:  # one run: no spread to show
            time, value = f"{p.time:.2f}", f"{scale.show(p.value):.2f}"
        rate = [f"{rates[key]:,.0f}" if key in rates else ""] if rates else []
        lines.append("| " + " | ".join([p.recipe, p.duration, time, *rate, value, shown]) + " |")
    return lines


def format_table(
    points: Sequence[Point],
    baseline: str,
    metric: str = "Accuracy",
    tolerance: float = 0.5,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    passes_label: str | None = None,
    tokens_per_s: Mapping[tuple[str, str], float] | None = None,
) -> str:
    """The comparison as a Markdown table, then the speed-up of each recipe at the baseline's best accuracy.

    Each row's speed-up is the baseline frontier's time to reach that row's accuracy over the row's time (``>``: the
    row beats every baseline point, so the frontier's slowest time gives a lower bound; ``<``: the row is below the
    frontier's fastest point). The summary reads every recipe's curve and the baseline frontier at the same target,
    the baseline's best minus ``tolerance``, interpolating each linearly between measured durations.

    Every speed-up comes with its percentile bootstrap interval over the passes (:mod:`composer.cli.bootstrap`:
    each resample redraws whole passes and recomputes the frontier, the target and the speed-up). With a single
    pass (one seed) the table says that no interval can be computed, and shows times without a spread.

    Args:
        points: The measured points (the baseline's and the recipes').
        baseline: The baseline recipe's name.
        metric: The metric's name.
        tolerance: How far below the baseline's best (in the shown unit: points of percent for accuracies) a recipe
            may end and still count as reaching it.
        confidence: The intervals' coverage.
        resamples: The bootstrap's resamples.
        seed: Seeds the bootstrap's draws.
        passes_label: What the passes are, for the method line (default: ``'<n> seeds'``).
        tokens_per_s: Each (recipe, duration)'s training tokens per second, shown in a column after the time when
            given (language models; :func:`~composer.cli.compare_evals.mean_tokens_per_s` reads it from the runs).

    Example:
        >>> points = [Point("base", "2ep", [2.0], [0.90]), Point("base", "4ep", [4.0], [0.98]),
        ...           Point("fast", "2ep", [2.0], [0.978])]
        >>> print(format_table(points, "base"))
        | recipe | duration | time (s) | Accuracy (%) | speed-up |
        |---|---|---|---|---|
        | base | 2ep | 2.00 | 90.00 | frontier |
        | base | 4ep | 4.00 | 98.00 | frontier |
        | fast | 2ep | 2.00 | 97.80 | 1.98x |
        <BLANKLINE>
        Baseline best: 98.00 (base 4ep, 4.00 s). Target (best - 0.5): 97.50, reached by the baseline frontier in 3.88 s.
        - fast: reaches the target in 2.00 s on its curve (2ep measured: 97.80 in 2.00 s): 1.94x faster than the baseline frontier.
        <BLANKLINE>
        No interval: each point has 1 run (1 seed), and a bootstrap interval needs at least 2 seeds; rerun with --seeds 0 1 2.
    """
    scale = _Scale.of(metric)
    measured = _read(points, baseline, scale, tolerance)
    passes = len({index for p in points for index in p.run_passes})

    resample = pass_resampler(points)

    def resampled(drawn: Sequence[int]) -> dict[tuple[str, str], float | None]:
        return _read(resample(drawn), baseline, scale, tolerance).statistics()

    keys = list(measured.statistics())
    intervals = bootstrap_intervals(passes, resampled, keys, resamples=resamples, confidence=confidence, seed=seed)
    interval = (lambda key: None) if intervals is None else intervals.get

    lines = _point_rows(points, measured, scale, interval, dict(tokens_per_s or {}))
    best = measured.best
    sign = "+" if scale.lower_is_better else "-"
    lines += [
        "",
        f"Baseline best: {scale.show(best.value):.2f} ({best.recipe} {best.duration}, {best.time:.2f} s). Target "
        f"(best {sign} {tolerance:g}): {measured.target_shown:.2f}, reached by the baseline frontier in "
        f"{measured.reach:.2f} s.",
    ]
    for name, reached in measured.recipes.items():
        if reached is None:
            lines.append(f"- {name}: no duration reaches the target.")
            continue
        recipe_reach, fastest = reached
        factor_text = _with_interval(f"{measured.reach / recipe_reach:.2f}x", interval((name, "")))
        lines.append(
            f"- {name}: reaches the target in {recipe_reach:.2f} s on its curve ({fastest.duration} measured: "
            f"{scale.show(fastest.value):.2f} in {fastest.time:.2f} s): {factor_text} faster than the "
            "baseline frontier."
        )
    label = passes_label or f"{passes} seed{'s' if passes != 1 else ''}"
    lines.append("")
    if intervals is None:
        lines.append(
            f"No interval: each point has 1 run ({label}), and a bootstrap interval needs at least {MIN_PASSES} "
            "seeds; rerun with --seeds 0 1 2."
        )
    else:
        lines.append(
            f"Intervals: {confidence:.0%} percentile bootstrap over {label}, {resamples} resamples (seed {seed}): each "
            f"resample draws {passes} passes with replacement (a pass: one run of every point, in turn) and "
            "recomputes the frontier, the target and every speed-up."
        )
        unreached = {key[0]: i.missing for key, i in intervals.items() if key[1] == "" and i.missing > 0}
        for name, missing in unreached.items():
            lines.append(f"- {name} misses the target in {missing:.0%} of the resamples; those count as 0x.")
    return "\n".join(lines)


def format_outliers(runs: Sequence[dict[str, Any]], metric: str = "Accuracy", factor: float = DEFAULT_FACTOR) -> str:
    """The outlier runs, listed apart with their values and what replaced them ('' when there are none).

    Example:
        >>> runs = [{"recipe": "base", "duration": "2ep", "seed": 0, "seconds": 9.0, "Accuracy": 0.9,
        ...          "status": "outlier", "slowdown": 4.5}]
        >>> print(format_outliers(runs))
        Outliers, excluded from every figure above (rule: a run taking more than 2x the median time per unit of duration of its recipe's other runs):
        - base 2ep seed 0: 9.00 s (4.5x the median), Accuracy 0.9000; not replaced.
    """
    outliers = [run for run in runs if run.get("status") == "outlier"]
    if not outliers:
        return ""
    lines = [
        f"Outliers, excluded from every figure above (rule: a run taking more than {factor:g}x the median time per "
        "unit of duration of its recipe's other runs):"
    ]
    for run in outliers:
        same = (run["recipe"], run["duration"], run["seed"], run.get("repeat", 0))
        later = [
            r
            for r in runs
            if r.get("status") == "rerun" and (r["recipe"], r["duration"], r["seed"], r.get("repeat", 0)) == same
        ]
        replaced = f"rerun in {float(later[0]['seconds']):.2f} s" if later else "not replaced"
        repeat = f" repeat {run['repeat']}" if int(run.get("repeat", 0)) else ""
        lines.append(
            f"- {run['recipe']} {run['duration']} seed {run['seed']}{repeat}: {float(run['seconds']):.2f} s "
            f"({run['slowdown']}x the median), {metric} {float(run[metric]):.4f}; {replaced}."
        )
    return "\n".join(lines)


# Where a point's label may go, in points from the point, in order of preference: right, left, above, below.
_LABEL_OFFSETS = [(5, -11), (5, 4), (-5, -11), (-5, 4), (-8, 8), (-8, -17), (8, 10), (8, -20)]


def _place_labels(
    figure: Any,
    axes: Any,
    labels: Sequence[tuple[float, float, str, str]],
    bars: Sequence[tuple[float, float, float, float]],
) -> None:
    """Writes each (x, y, text, colour) label next to its point where it overlaps the fewest markers, error bars
    (``bars``: x, y, x error, y error) and other labels."""
    figure.canvas.draw()  # fixes the axes' limits, so data coordinates map to pixels
    pixels = figure.dpi / 72
    marker = 5 * pixels  # a marker's half size
    taken = []
    for x, y, x_err, y_err in bars:
        (left, bottom), (right, top) = axes.transData.transform([(x - x_err, y - y_err), (x + x_err, y + y_err)])
        (px, py) = axes.transData.transform((x, y))
        taken += [(px - marker, py - marker, px + marker, py + marker)]
        taken += [(left, py - pixels, right, py + pixels), (px - pixels, bottom, px + pixels, top)]
    for x, y, text, colour in labels:
        px, py = axes.transData.transform((x, y))
        width, height = 7 * 0.6 * len(text) * pixels, 7 * pixels  # a 7-point font's box
        candidates = []
        for dx, dy in _LABEL_OFFSETS:
            left = px + dx * pixels - (width if dx < 0 else 0)
            box = (left, py + dy * pixels, left + width, py + dy * pixels + height)
            overlaps = sum(_overlap(box, other) for other in taken)
            candidates.append((overlaps, box, (dx, dy)))
        overlaps, box, (dx, dy) = min(candidates, key=lambda candidate: candidate[0])
        taken.append(box)
        axes.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(dx, dy),
            ha="right" if dx < 0 else "left",
            fontsize=7,
            color=colour,
        )


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """The area two (left, bottom, right, top) boxes share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


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
    import matplotlib.colors

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    scale = _Scale.of(metric)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    names = list(dict.fromkeys(p.recipe for p in points))
    markers = "osD^v<>ph*"
    labels: list[tuple[float, float, str, str]] = []
    bars: list[tuple[float, float, float, float]] = []  # each point's x, y and error bars: labels keep off them
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
        colour = matplotlib.colors.to_hex(axes.get_lines()[-1].get_color())
        labels += [(p.time, scale.show(p.value), p.duration, colour) for p in mine]
        bars += [(p.time, scale.show(p.value), p.time_std, scale.show(p.value_std)) for p in mine]
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
    axes.set_title(f"Time against quality: {'down' if scale.lower_is_better else 'up'} and to the left is better")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    _place_labels(figure, axes, labels, bars)
    out = Path(path)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out
