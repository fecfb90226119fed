"""The bootstrap of ``composer compare`` against exhaustive enumeration of every resample, on tiny sets."""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter

import pytest

from composer.cli.bootstrap import bootstrap_interval, percentile, resample_points
from composer.cli.compare import format_table
from composer.cli.frontier import Point


def _exact_quantile(values: list[float], fraction: float) -> float:
    """The smallest value whose share of equally likely outcomes at or below it reaches ``fraction``."""
    counts = Counter(values)
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen / len(values) >= fraction:
            return value
    raise AssertionError("unreachable")


def test_percentile_interpolates_like_numpy_linear():
    values = [3.0, 7.0, 8.0, 15.0, 20.0]
    # position f * (n - 1): 0.25 -> 1.0 (7), 0.6 -> 2.4 (8 + 0.4 * 7), 0.975 -> 3.9 (15 + 0.9 * 5)
    assert percentile(values, 0.25) == 7.0
    assert percentile(values, 0.6) == pytest.approx(10.8)
    assert percentile(values, 0.975) == pytest.approx(19.5)
    with pytest.raises(ValueError, match="fraction"):
        percentile(values, 1.5)


def test_interval_of_a_mean_lies_between_the_exact_bootstrap_quantiles():
    per_pass = [1.0, 2.5, 4.0, 10.0]
    # The exact bootstrap distribution: all 4**4 ordered draws of passes, equally likely.
    exact = [statistics.fmean(per_pass[i] for i in drawn) for drawn in itertools.product(range(4), repeat=4)]
    interval = bootstrap_interval(4, lambda drawn: statistics.fmean(per_pass[i] for i in drawn), resamples=2000, seed=3)
    assert interval is not None and (interval.passes, interval.resamples, interval.missing) == (4, 2000, 0.0)
    # 2000 draws estimate the 2.5% and 97.5% quantiles to within a couple of percent of probability.
    assert _exact_quantile(exact, 0.01) <= interval.low <= _exact_quantile(exact, 0.05)
    assert _exact_quantile(exact, 0.95) <= interval.high <= _exact_quantile(exact, 0.99)


def test_undefined_resamples_count_as_zero_and_one_pass_gives_no_interval():
    interval = bootstrap_interval(2, lambda drawn: None if drawn == [0, 0] else 1.0, resamples=400, seed=0)
    assert interval is not None and 0.15 < interval.missing < 0.35  # 1 draw in 4
    assert interval.low == 0.0 and interval.high == 1.0
    assert bootstrap_interval(1, lambda drawn: 1.0) is None
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval(3, lambda drawn: 1.0, confidence=95)


def test_resampling_keeps_whole_passes():
    point = Point("r", "1ep", times=[1.0, 2.0, 3.0], values=[0.1, 0.2, 0.3], passes=[0, 2, 1])
    (resampled,) = resample_points([point], [2, 2, 0])
    assert resampled.times == [2.0, 2.0, 1.0] and resampled.values == [0.2, 0.2, 0.1]
    assert resample_points([Point("r", "1ep", [1.0], [0.1], passes=[1])], [0, 0]) == []


def test_speedup_interval_matches_every_resample_enumerated_by_hand():
    # Three passes; the accuracies do not vary, so the target (98.0 - 0.5 = 97.5) and the frontier's shape are fixed:
    # the baseline reaches 97.5 at 15/16 of the way from its 2ep time to its 4ep time, the recipe at its own time.
    base2, base4, fast = [1.0, 1.2, 1.1], [2.0, 2.6, 2.2], [0.9, 1.5, 1.0]
    points = [
        Point("base", "2ep", base2, [0.90] * 3),
        Point("base", "4ep", base4, [0.98] * 3),
        Point("fast", "2ep", fast, [0.978] * 3),
    ]

    def reference(drawn: tuple[int, ...]) -> float:
        t2, t4, tf = (sum(times[i] for i in drawn) / 3 for times in (base2, base4, fast))
        return (t2 + (t4 - t2) * (0.975 - 0.90) / (0.98 - 0.90)) / tf

    exact = [reference(drawn) for drawn in itertools.product(range(3), repeat=3)]
    table = format_table(points, "base", resamples=2000)
    low, high = map(float, re.search(r"- fast: .*: [\d.]+x \[([\d.]+), ([\d.]+)\] faster", table).groups())
    # Each of the 27 draws has probability 1/27 > 2.5%, so the 95% interval spans the extreme draws.
    assert (low, high) == (pytest.approx(min(exact), abs=0.006), pytest.approx(max(exact), abs=0.006))
    assert "Intervals: 95% percentile bootstrap over 3 seeds, 2000 resamples" in table


def test_one_seed_says_no_interval_instead_of_a_zero_spread():
    points = [
        Point("base", "2ep", [2.0], [0.90]),
        Point("base", "4ep", [4.0], [0.98]),
        Point("fast", "2ep", [2.0], [0.978]),
    ]
    table = format_table(points, "base")
    assert "±" not in table and "[" not in table
    assert "No interval: each point has 1 run (1 seed), and a bootstrap interval needs at least 2 seeds" in table
