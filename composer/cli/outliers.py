"""Outlier runs of a ``composer compare``: a run far slower than the recipe's other runs, as a busy host makes them.

The rule: a run's *rate* is its wall-clock time divided by its duration's amount (seconds per epoch for ``'4ep'``,
per batch for ``'50ba'``). A run is an outlier when its rate is more than ``factor`` (default 2) times the median rate
of its siblings, the other runs of the same recipe whose durations are in the same unit (every seed, every
duration). Training time grows in proportion to the duration, so the siblings include the other durations, and a run
can be checked even with a single seed (a recipe needs two runs in one unit). Only slow runs are flagged: load on a
shared machine slows a run down, nothing speeds one up beyond its siblings by a factor of 2.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_FACTOR", "Outlier", "RunTime", "duration_amount", "find_outliers", "is_outlier"]

DEFAULT_FACTOR = 2.0
"""A run taking more than this many times its siblings' median time per unit of duration is an outlier."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class RunTime:
    """One run's recipe, duration and wall-clock seconds (what the outlier rule reads).

    Args:
        recipe: The recipe's name.
        duration: Its training duration (``'4ep'``).
        seconds: Its wall-clock training time.
    """

    recipe: str
    duration: str
    seconds: float


@dataclass(frozen=True)
class Outlier:
    """A run flagged by the rule.

    Attributes:
        index: The run's index in the sequence given to :func:`find_outliers`.
        rate: Its seconds per unit of duration.
        sibling_rate: The median rate of its siblings.
        siblings: How many siblings that median is over.
    """

    index: int
    rate: float
    sibling_rate: float
    siblings: int

    @property
    def ratio(self) -> float:
        """How many times slower than its siblings' median the run was."""
        return self.rate / self.sibling_rate


def duration_amount(duration: str) -> tuple[float, str]:
    """The amount and unit of a duration string.

    Example:
        >>> duration_amount("8ep"), duration_amount("0.5dur")
        ((8.0, 'ep'), (0.5, 'dur'))
    """
    match = _DURATION.match(duration)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"duration={duration!r} is not a positive amount with a unit, such as '4ep' or '100ba'.")
    return float(match.group(1)), match.group(2).lower()


def _rate(run: RunTime) -> tuple[str, str, float]:
    amount, unit = duration_amount(run.duration)
    return run.recipe, unit, run.seconds / amount


def is_outlier(run: RunTime, siblings: Sequence[RunTime], factor: float = DEFAULT_FACTOR) -> Outlier | None:
    """Checks ``run`` against ``siblings`` (runs of any recipe; those of its recipe and unit count).

    Returns:
        The :class:`Outlier` (with ``index`` -1), or None when the run is within the rule or has no sibling.

    Example:
        >>> siblings = [RunTime("base", "2ep", 2.0), RunTime("base", "4ep", 4.4)]
        >>> is_outlier(RunTime("base", "2ep", 5.0), siblings).ratio  # 2.5 s/ep against a median of 1.05 s/ep
        2.380952380952381
        >>> is_outlier(RunTime("base", "4ep", 4.0), siblings) is None
        True
    """
    if not factor > 1.0:
        raise ValueError(f"factor={factor!r} must be greater than 1 (a run that many times slower is an outlier).")
    recipe, unit, rate = _rate(run)
    rates = [sibling_rate for r, u, sibling_rate in map(_rate, siblings) if (r, u) == (recipe, unit)]
    if not rates:
        return None
    median = statistics.median(rates)
    return Outlier(-1, rate, median, len(rates)) if rate > factor * median else None


def find_outliers(runs: Sequence[RunTime], factor: float = DEFAULT_FACTOR) -> list[Outlier]:
    """The runs that the rule flags, each checked against all the others.

    Args:
        runs: Every run of the comparison.
        factor: How many times its siblings' median rate a run may take before it is an outlier.

    Example:
        >>> runs = [RunTime("base", d, s) for d, s in [("2ep", 2.0), ("4ep", 4.1), ("6ep", 6.3), ("2ep", 9.0)]]
        >>> [(o.index, round(o.ratio, 2)) for o in find_outliers(runs)]
        [(3, 4.39)]
    """
    flagged = []
    for index, run in enumerate(runs):
        outlier = is_outlier(run, [*runs[:index], *runs[index + 1 :]], factor)
        if outlier is not None:
            flagged.append(Outlier(index, outlier.rate, outlier.sibling_rate, outlier.siblings))
    return flagged
