"""The time-accuracy frontier of a baseline, and the speed-up of a recipe against it (as Composer's Explorer did).

The baseline trained for several durations gives points ``(wall-clock time, quality)``. Its Pareto frontier keeps
the points that beat every faster point; between two frontier points, the time to reach a quality is interpolated
linearly. A recipe's speed-up at quality ``q`` is the frontier's time to reach ``q`` divided by the recipe's time.
Quality is higher-is-better here; pass a negated loss for a lower-is-better metric.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Point", "Speedup", "pareto_frontier", "speedup", "time_to_reach"]


@dataclass(frozen=True)
class Point:
    """One recipe at one duration, measured over several seeds.

    Args:
        recipe: The recipe's name.
        duration: The training duration (``'8ep'``).
        times: Wall-clock training time of each seed's run, in seconds.
        values: The quality (higher is better) of each seed's run.
        passes: The pass (of ``composer compare``: one per seed and repeat) each run belongs to; None: run ``i`` is
            of pass ``i``. The bootstrap (:mod:`composer.cli.bootstrap`) resamples whole passes.

    Example:
        >>> p = Point("baseline", "4ep", times=[10.0, 12.0], values=[0.97, 0.98])
        >>> p.time, round(p.value, 3), round(p.time_std, 3)
        (11.0, 0.975, 1.414)
    """

    recipe: str
    duration: str
    times: tuple[float, ...] | list[float]
    values: tuple[float, ...] | list[float]
    passes: tuple[int, ...] | list[int] | None = None

    @property
    def run_passes(self) -> list[int]:
        """The pass of each run."""
        return list(range(len(self.times))) if self.passes is None else list(self.passes)

    @functools.cached_property
    def time(self) -> float:
        """Mean time over the seeds."""
        return statistics.fmean(self.times)

    @functools.cached_property
    def value(self) -> float:
        """Mean quality over the seeds."""
        return statistics.fmean(self.values)

    @property
    def time_std(self) -> float:
        """Sample standard deviation of the time (0 for one seed)."""
        return statistics.stdev(self.times) if len(self.times) > 1 else 0.0

    @property
    def value_std(self) -> float:
        """Sample standard deviation of the quality (0 for one seed)."""
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0


@dataclass(frozen=True)
class Speedup:
    """A speed-up and how sure it is.

    Attributes:
        factor: Frontier time / recipe time.
        bound: ``''`` (interpolated on the frontier), ``'>'`` (the recipe beats the frontier's best quality, so the
            frontier's slowest time gives a lower bound) or ``'<'`` (the recipe is below the frontier's fastest
            point, so that point's time gives an upper bound).
    """

    factor: float
    bound: str = ""

    def __str__(self) -> str:
        return f"{self.bound}{self.factor:.2f}x"


def pareto_frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The ``(time, value)`` points no faster point beats, sorted by time.

    Args:
        points: ``(time, value)`` pairs, higher value is better.

    Example:
        >>> pareto_frontier([(4.0, 0.9), (2.0, 0.8), (3.0, 0.7), (8.0, 0.95), (9.0, 0.94)])
        [(2.0, 0.8), (4.0, 0.9), (8.0, 0.95)]
    """
    frontier: list[tuple[float, float]] = []
    for time, value in sorted(points):
        if not frontier or value > frontier[-1][1]:
            frontier.append((time, value))
    return frontier


def time_to_reach(frontier: Sequence[tuple[float, float]], value: float) -> float | None:
    """The frontier's time to reach ``value``, interpolated linearly; None beyond its best value.

    A value at or below the fastest point's returns that point's time.

    Example:
        >>> time_to_reach([(2.0, 0.5), (4.0, 1.0)], 0.75)
        3.0
        >>> time_to_reach([(2.0, 0.8), (4.0, 0.9)], 0.95) is None
        True
    """
    if not frontier:
        raise ValueError("time_to_reach needs a non-empty frontier.")
    if value <= frontier[0][1]:
        return frontier[0][0]
    for (t0, v0), (t1, v1) in itertools.pairwise(frontier):
        if v0 < value <= v1:
            return t0 + (t1 - t0) * (value - v0) / (v1 - v0)
    return None


def speedup(frontier: Sequence[tuple[float, float]], time: float, value: float) -> Speedup:
    """The speed-up of a recipe that reached ``value`` in ``time`` against the baseline ``frontier``.

    Args:
        frontier: The baseline's :func:`pareto_frontier`.
        time: The recipe's training time.
        value: The recipe's quality.

    Example:
        >>> frontier = [(2.0, 0.8), (4.0, 0.9), (8.0, 0.95)]
        >>> str(speedup(frontier, 3.0, 0.9)), str(speedup(frontier, 4.0, 0.99)), str(speedup(frontier, 4.0, 0.5))
        ('1.33x', '>2.00x', '<0.50x')
    """
    if not time > 0 or math.isnan(value):
        raise ValueError(f"speedup needs a positive time and a number, got time={time!r}, value={value!r}.")
    reach = time_to_reach(frontier, value)
    if reach is None:
        return Speedup(frontier[-1][0] / time, ">")
    if value < frontier[0][1]:
        return Speedup(reach / time, "<")
    return Speedup(reach / time)
