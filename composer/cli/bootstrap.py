"""How sure a speed-up is: a percentile bootstrap over the passes of a ``composer compare``.

``composer compare`` runs every point (a recipe at a duration) once per *pass*: one pass per seed (and per repeat),
each pass running every point in turn, so that whatever load the machine has during a pass falls on all points alike.
A pass is therefore the independent unit, and the bootstrap resamples whole passes: each resample draws as many passes
as were run, with replacement, keeps every point's runs from the drawn passes (a pass drawn twice counts twice),
recomputes the statistic (the whole frontier and speed-up, accuracy included), and the interval is the
``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of the resampled statistics (Efron's percentile
interval; percentiles interpolated linearly between order statistics). With fewer than two passes no interval can be
computed: :func:`bootstrap_intervals` returns None and the caller says so.

The draws come from a ``random.Random`` seeded by the caller (this module needs no torch), so an interval is
reproducible from its seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from composer.cli.frontier import Point

__all__ = [
    "MIN_PASSES",
    "Interval",
    "bootstrap_interval",
    "bootstrap_intervals",
    "pass_resampler",
    "percentile",
    "resample_points",
]

K = TypeVar("K", bound=Hashable)

MIN_PASSES = 2
"""The fewest passes (seeds times repeats) from which an interval is computed."""


@dataclass(frozen=True)
class Interval:
    """A bootstrap percentile interval.

    Attributes:
        low: The lower percentile of the resampled statistic.
        high: The upper percentile.
        confidence: The interval's nominal coverage (0.95).
        resamples: How many resamples were drawn.
        passes: How many passes each resample drew from.
        missing: The fraction of resamples in which the statistic was undefined (a recipe that does not reach the
            target in that resample); they count as 0, below every defined value.

    Example:
        >>> str(Interval(1.31, 1.74, 0.95, 2000, 3))
        '[1.31, 1.74]'
    """

    low: float
    high: float
    confidence: float
    resamples: int
    passes: int
    missing: float = 0.0

    def __str__(self) -> str:
        return f"[{self.low:.2f}, {self.high:.2f}]"


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ascending values, interpolated linearly between order statistics.

    Position ``fraction * (n - 1)`` in the sorted list (the definition numpy uses by default).

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([1.0, 2.0, 3.0, 4.0], 0.0)
        (2.5, 1.0)
    """
    if not sorted_values:
        raise ValueError("percentile needs at least one value.")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r} must lie in [0, 1].")
    position = fraction * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    weight = position - below
    return sorted_values[below] * (1.0 - weight) + sorted_values[above] * weight


def bootstrap_intervals(
    passes: int,
    statistics: Callable[[Sequence[int]], Mapping[K, float | None]],
    keys: Sequence[K],
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[K, Interval] | None:
    """The percentile bootstrap interval of several statistics over ``passes`` independent passes.

    All statistics are computed from the same resamples (one call of ``statistics`` per resample).

    Args:
        passes: How many passes were run (indices ``0 .. passes - 1``).
        statistics: Maps a resample (a list of ``passes`` pass indices drawn with replacement) to the statistics by
            key; a key that is missing or None is undefined in that resample and counts as 0.
        keys: The keys to give intervals for.
        resamples: How many resamples to draw.
        confidence: The intervals' coverage, in (0, 1).
        seed: Seeds the draws.

    Returns:
        An interval per key, or None with fewer than :data:`MIN_PASSES` passes.

    Example:
        >>> times = [1.0, 2.0, 3.0]  # one value per pass
        >>> def mean_and_max(drawn):
        ...     return {"mean": sum(times[i] for i in drawn) / len(drawn), "max": max(times[i] for i in drawn)}
        >>> intervals = bootstrap_intervals(3, mean_and_max, ["mean", "max"])
        >>> str(intervals["mean"]), str(intervals["max"])  # all pass 0 (1/27 > 2.5% of resamples) has mean = max = 1
        ('[1.00, 3.00]', '[1.00, 3.00]')
        >>> bootstrap_intervals(1, mean_and_max, ["mean"]) is None
        True
    """
    if resamples < 1:
        raise ValueError(f"resamples={resamples!r} must be a positive number of resamples, e.g. 2000.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1, e.g. 0.95.")
    if passes < MIN_PASSES:
        return None
    generator = random.Random(seed)
    values: dict[K, list[float]] = {key: [] for key in keys}
    missing = dict.fromkeys(keys, 0)
    for _ in range(resamples):
        drawn = [generator.randrange(passes) for _ in range(passes)]
        computed = statistics(drawn)
        for key in keys:
            value = computed.get(key)
            if value is None:
                missing[key] += 1
                value = 0.0
            values[key].append(value)
    tail = (1.0 - confidence) / 2.0
    intervals = {}
    for key in keys:
        ordered = sorted(values[key])
        intervals[key] = Interval(
            percentile(ordered, tail),
            percentile(ordered, 1.0 - tail),
            confidence,
            resamples,
            passes,
            missing[key] / resamples,
        )
    return intervals


def bootstrap_interval(
    passes: int,
    statistic: Callable[[Sequence[int]], float | None],
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval | None:
    """The percentile bootstrap interval of one statistic; see :func:`bootstrap_intervals`.

    Example:
        >>> times = [1.0, 2.0, 3.0]
        >>> interval = bootstrap_interval(3, lambda drawn: sum(times[i] for i in drawn) / len(drawn))
        >>> interval.low, interval.high
        (1.0, 3.0)
    """
    intervals = bootstrap_intervals(
        passes, lambda drawn: {0: statistic(drawn)}, [0], resamples=resamples, confidence=confidence, seed=seed
    )
    return None if intervals is None else intervals[0]


def resample_points(points: Sequence[Point], drawn: Sequence[int]) -> list[Point]:
    """Every point with the runs of the drawn passes (a pass drawn twice contributes its run twice).

    A point's ``passes`` give the pass of each run. A point none of whose runs were drawn (its only run of a drawn
    pass was excluded as an outlier, say) is left out of the resample. :func:`pass_resampler` does the same faster
    for many resamples of the same points.

    Example:
        >>> p = Point("r", "1ep", times=[1.0, 2.0], values=[0.5, 0.6], passes=[0, 1])
        >>> resample_points([p], [1, 1])[0].times
        [2.0, 2.0]
    """
    return pass_resampler(points)(drawn)


def pass_resampler(points: Sequence[Point]) -> Callable[[Sequence[int]], list[Point]]:
    """:func:`resample_points` for fixed ``points``, with each point's runs grouped by pass once."""
    grouped = []
    for point in points:
        by_pass: dict[int, list[int]] = {}
        for index, pass_index in enumerate(point.run_passes):
            by_pass.setdefault(pass_index, []).append(index)
        grouped.append((point, by_pass))

    def resample(drawn: Sequence[int]) -> list[Point]:
        resampled = []
        for point, by_pass in grouped:
            chosen = [index for pass_index in drawn for index in by_pass.get(pass_index, ())]
            if chosen:
                times = [point.times[i] for i in chosen]
                values = [point.values[i] for i in chosen]
                resampled.append(
                    Point(point.recipe, point.duration, times, values, [point.run_passes[i] for i in chosen])
                )
        return resampled

    return resample
