"""Outlier runs of ``composer compare`` on constructed run records: flagged by the stated rule, rerun, listed apart."""

from __future__ import annotations

import statistics

import pytest

from composer.cli.compare import format_outliers, format_table, points_from_runs, rerun_outliers
from composer.cli.outliers import RunTime, duration_amount, find_outliers, is_outlier


def _run(recipe: str, duration: str, seed: int, seconds: float, accuracy: float = 0.9) -> dict[str, object]:
    return {"recipe": recipe, "duration": duration, "seed": seed, "repeat": 0, "seconds": seconds, "Accuracy": accuracy}


def test_a_run_over_twice_its_siblings_median_rate_is_flagged():
    seconds = {("2ep", 0): 2.0, ("2ep", 1): 2.2, ("4ep", 0): 4.2, ("4ep", 1): 12.0, ("6ep", 0): 6.0, ("6ep", 1): 11.0}
    runs = [RunTime("base", duration, value) for (duration, _), value in seconds.items()]
    runs.append(RunTime("fast", "2ep", 30.0))  # another recipe: no sibling, never flagged
    flagged = find_outliers(runs)
    assert [o.index for o in flagged] == [3]  # 4ep seed 1: 3 s/ep; 6ep seed 1 (1.83 s/ep) stays under 2x
    # By hand: the siblings' rates are 1.0, 1.1, 1.05, 1.0, 1.833 s/ep, median 1.05.
    assert flagged[0].sibling_rate == pytest.approx(statistics.median([1.0, 1.1, 1.05, 1.0, 11.0 / 6]))
    assert flagged[0].ratio == pytest.approx(3.0 / 1.05) and flagged[0].siblings == 5
    assert find_outliers(runs, factor=3.0) == []


def test_only_slow_runs_of_the_same_recipe_and_unit_are_compared():
    siblings = [RunTime("base", "10ba", 1.0), RunTime("base", "20ba", 2.0), RunTime("base", "2ep", 100.0)]
    assert is_outlier(RunTime("base", "10ba", 0.1), siblings) is None  # fast: never an outlier
    assert is_outlier(RunTime("base", "10ba", 2.5), siblings).siblings == 2  # the 'ep' run is not a sibling
    assert is_outlier(RunTime("other", "10ba", 50.0), siblings) is None
    assert duration_amount("2.5ep") == (2.5, "ep")
    with pytest.raises(ValueError, match="duration='fast'"):
        duration_amount("fast")
    with pytest.raises(ValueError, match="factor=1"):
        is_outlier(siblings[0], siblings, factor=1)


def test_the_one_seed_incident_is_flagged_rerun_and_reported_apart():
    # One seed under host load: the baseline's 2ep run took 8x its usual time (as when compare printed 13.36x).
    runs = [_run("base", f"{n}ep", 0, 0.7 * n) for n in (2, 3, 4, 6, 8)]
    runs[0]["seconds"] = 8 * 1.4
    runs.append(_run("fast", "3ep", 0, 1.5, 0.99))
    calls = []
    rerun_times = iter([5.0, 1.45])  # the first rerun is still slow (2.5 s/ep), the second is not

    def measure_run(recipe: str, duration: str, seed: int) -> tuple[float, float]:
        calls.append((recipe, duration, seed))
        return next(rerun_times), 0.95

    records = rerun_outliers(runs, measure_run, reruns=2)
    assert calls == [("base", "2ep", 0)] * 2
    assert [(r["seconds"], r["status"]) for r in records if r["duration"] == "2ep"] == [
        (11.2, "outlier"),
        (5.0, "outlier"),
        (1.45, "rerun"),
    ]
    assert records[0]["slowdown"] == round(5.6 / 0.7, 2) and runs[0].get("status") is None  # input left as it was
    points = points_from_runs(records)
    assert (points[0].recipe, points[0].duration, points[0].times) == ("base", "2ep", [1.45])
    text = format_outliers(records)
    assert text.startswith("Outliers, excluded from every figure above (rule: a run taking more than 2x the median")
    assert "- base 2ep seed 0: 11.20 s (8.0x the median), Accuracy 0.9000; rerun in 1.45 s." in text
    assert "- base 2ep seed 0: 5.00 s (3.57x the median), Accuracy 0.9500; rerun in 1.45 s." in text


def test_an_outlier_that_is_not_rerun_leaves_its_pass_out_of_its_point():
    runs = [_run("base", d, seed, s) for seed in (0, 1, 2) for d, s in (("2ep", 1.0 + 0.1 * seed), ("4ep", 2.0))]
    runs.append(_run("fast", "2ep", 0, 1.0))
    runs.append(_run("fast", "2ep", 1, 0.9))
    runs.append(_run("fast", "2ep", 2, 6.0))  # 6x its sibling's rate
    records = rerun_outliers(runs, lambda *run: pytest.fail("reruns=0 must not rerun"), reruns=0)
    fast = next(p for p in points_from_runs(records) if p.recipe == "fast")
    assert fast.times == [1.0, 0.9] and fast.run_passes == [0, 1]
    assert "not replaced" in format_outliers(records) and format_outliers(runs) == ""
    assert "Intervals: 95% percentile bootstrap over 3 seeds" in format_table(points_from_runs(records), "base")
