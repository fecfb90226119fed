"""Profiling ``fit``: the :class:`Profiler` settings, the session that records each step with ``torch.profiler``, the
timer of each named range and the summary printed at the end. See ``docs/guides/profiling.md``.

The Trainer builds a :class:`ProfilerSession` only when asked (its ``profiler`` argument); without one nothing is
wrapped and no step pays for it.
"""

from composer.profiler.profile_summary import ProfileSummary, SummaryRow
from composer.profiler.profiler import Profiler, ProfilerSession, resolve_profiler
from composer.profiler.range_timer import RangeTimer, RangeTotals

__all__ = [
    "ProfileSummary",
    "Profiler",
    "ProfilerSession",
    "RangeTimer",
    "RangeTotals",
    "SummaryRow",
    "resolve_profiler",
]
