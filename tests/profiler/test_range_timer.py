"""RangeTimer: nested totals and self times on a fake clock; torch ranges only while the torch profiler records."""

from __future__ import annotations

import types

import pytest
import torch

from composer.profiler import range_timer
from composer.profiler.range_timer import RangeTimer


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(range_timer, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return now


def test_nested_ranges_add_up(clock):
    timer = RangeTimer()

    def inner():
        clock[0] += 2.0

    wrapped_inner = timer.wrap("inner", inner)

    def outer():
        clock[0] += 1.0
        wrapped_inner()
        wrapped_inner()
        clock[0] += 0.5

    timer.wrap("outer", outer)()
    assert (timer.totals["outer"].calls, timer.totals["outer"].seconds) == (1, 5.5)
    assert timer.totals["outer"].self_seconds == 1.5  # 5.5 s minus the 2 x 2 s inside it
    assert (timer.totals["inner"].calls, timer.totals["inner"].seconds, timer.totals["inner"].self_seconds) == (2, 4, 4)


def test_an_error_still_closes_the_range(clock):
    timer = RangeTimer()

    def fails():
        clock[0] += 1.0
        raise ValueError("x")

    with pytest.raises(ValueError):
        timer.wrap("fails", fails)()
    assert timer.totals["fails"].seconds == 1.0 and timer._stack == []


def test_batches_time_each_wait_and_the_end(clock):
    timer = RangeTimer()

    def slow():
        for item in "ab":
            clock[0] += 3.0
            yield item

    assert list(timer.batches(slow(), "wait")) == ["a", "b"]
    # Two batches and the wait that found the iterator exhausted.
    assert (timer.totals["wait"].calls, timer.totals["wait"].seconds) == (3, 6.0)
    timer.reset()
    assert timer.totals["wait"].calls == 0


def test_torch_ranges_open_only_while_the_profiler_records(monkeypatch):
    opened = []
    real = range_timer.record_function
    monkeypatch.setattr(range_timer, "record_function", lambda name: opened.append(name) or real(name))
    timer = RangeTimer()
    work = timer.wrap("work", lambda: None)
    work()
    assert opened == [] and timer.totals["work"].calls == 1
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        work()
    assert opened == ["work"] and timer.totals["work"].calls == 2
    assert "work" in {event.name for event in profile.events()}
