"""Named ranges for the profiler: each one a ``torch.profiler`` range in the trace, and timed with ``perf_counter``.

The torch range is opened only while the torch profiler records (its ``active`` steps; a ``record_function`` costs
tens of microseconds even when nothing records), the timing always.

The Trainer's profiler (:mod:`composer.profiler.profiler`) hands :meth:`RangeTimer.wrap` to the
:class:`~composer.core.engine.Engine` as its instrument, and wraps the loop's own stages with it (the dataloader wait,
forward, loss, backward, the optimizer step). An unprofiled Trainer never builds one, so none of this runs per step.

Ranges nest (an event holds its callbacks; with a closure, the optimizer step holds the forward and backward): each
name's *total* time includes the ranges opened inside it, its *self* time does not.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from torch.autograd import _profiler_enabled  # type: ignore[attr-defined]
from torch.autograd.profiler import record_function

__all__ = ["RangeTimer", "RangeTotals"]

T = TypeVar("T")


@dataclass
class RangeTotals:
    """What one named range took over a run.

    Args:
        calls (int): How often it was entered.
        seconds (float): Wall time inside it, the ranges nested in it included.
        nested_seconds (float): The part of ``seconds`` spent in ranges nested in it.
    """

    calls: int = 0
    seconds: float = 0.0
    nested_seconds: float = 0.0

    @property
    def self_seconds(self) -> float:
        """Wall time inside the range but outside the ranges nested in it."""
        return self.seconds - self.nested_seconds


class RangeTimer:
    """Opens named ``torch.profiler`` ranges and adds up their wall time (``time.perf_counter``), nested or not.

    The times are kept for every call, whether or not the torch profiler is recording at that step (its schedule
    records only some steps), so a summary covers the whole run. :meth:`reset` starts the totals afresh.

    Example:
        >>> timer = RangeTimer()
        >>> inner = timer.wrap("inner", lambda x: x + 1)
        >>> outer = timer.wrap("outer", lambda x: inner(x) * 2)
        >>> outer(1)
        4
        >>> timer.totals["outer"].calls, timer.totals["inner"].calls
        (1, 1)
        >>> timer.totals["outer"].seconds >= timer.totals["outer"].nested_seconds == timer.totals["inner"].seconds
        True
    """

    def __init__(self) -> None:
        self.totals: dict[str, RangeTotals] = {}
        # The open ranges, innermost last: (its totals, its torch range or None when the profiler was not recording,
        # when it began, seconds in its nested ranges).
        self._stack: list[tuple[RangeTotals, record_function | None, float, list[float]]] = []

    def reset(self) -> None:
        """Forgets the totals, and any range left open by an error (call it when none of the wrapped calls runs)."""
        self._stack.clear()
        for totals in self.totals.values():
            totals.calls, totals.seconds, totals.nested_seconds = 0, 0.0, 0.0

    def _totals(self, name: str) -> RangeTotals:
        totals = self.totals.get(name)
        if totals is None:
            totals = self.totals[name] = RangeTotals()
        return totals

    def enter(self, name: str) -> None:
        """Opens the range ``name``; :meth:`exit` closes the innermost open range."""
        torch_range = None
        if _profiler_enabled():
            torch_range = record_function(name)
            torch_range.__enter__()  # type: ignore[no-untyped-call]
        self._stack.append((self._totals(name), torch_range, time.perf_counter(), [0.0]))

    def exit(self) -> None:
        """Closes the innermost open range and adds its time to its totals (and to its parent's nested time)."""
        totals, torch_range, start, nested = self._stack.pop()
        elapsed = time.perf_counter() - start
        if torch_range is not None:
            torch_range.__exit__(None, None, None)
        totals.calls += 1
        totals.seconds += elapsed
        totals.nested_seconds += nested[0]
        if self._stack:
            self._stack[-1][3][0] += elapsed

    def wrap(self, name: str, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` run inside the range ``name`` (an :data:`~composer.core.engine.Instrument` for the Engine).

        Args:
            name (str): The range's name in the trace and the summary, e.g. ``"callback/SpeedMonitor/BATCH_END"``.
            fn (Callable): What to run inside it.

        Returns:
            Callable: Takes and returns what ``fn`` does.
        """
        enter, exit_ = self.enter, self.exit

        @functools.wraps(fn)
        def ranged(*args: Any, **kwargs: Any) -> T:
            enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                exit_()

        return ranged

    def batches(self, iterable: Iterable[T], name: str = "trainer/dataloader") -> Iterator[T]:
        """Yields what ``iterable`` yields, each wait for the next item (its iterator's creation included) in a range.

        Args:
            iterable (Iterable): The epoch's batches.
            name (str): The range's name.

        Yields:
            The items of ``iterable``.
        """
        iterator: Iterator[T] | None = None
        while True:
            self.enter(name)
            try:
                if iterator is None:
                    iterator = iter(iterable)  # a DataLoader starts its workers here: that is waiting for data too
                item = next(iterator)
            except StopIteration:
                return
            finally:
                self.exit()
            yield item
