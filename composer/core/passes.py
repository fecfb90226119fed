"""Ordering passes: pure functions from (algorithms, event) to the order in which they run."""

from __future__ import annotations

from collections.abc import Sequence

from composer.core.algorithm import Algorithm
from composer.core.event import Event

__all__ = ["order_algorithms", "sort_declared_first_last"]


def sort_declared_first_last(algorithms: Sequence[Algorithm]) -> list[Algorithm]:
    """Moves algorithms declaring ``run_first`` to the front and ``run_last`` to the back, keeping relative order.

    Example:
        >>> class A(Algorithm):
        ...     def match(self, event, state): return True
        ...     def apply(self, event, state, logger): return None
        >>> class First(A):
        ...     run_first = True
        >>> [type(a).__name__ for a in sort_declared_first_last([A(), First()])]
        ['First', 'A']
    """
    first = [a for a in algorithms if a.run_first]
    last = [a for a in algorithms if a.run_last and not a.run_first]
    middle = [a for a in algorithms if not a.run_first and not a.run_last]
    return first + middle + last


def order_algorithms(algorithms: Sequence[Algorithm], event: Event) -> list[Algorithm]:
    """The order in which ``algorithms`` run at ``event``: declared first/last, then reversed on after-events.

    Reversing on after-events makes paired changes nest like a stack: if A then B change something at
    ``BEFORE_FORWARD``, B then A undo it at ``AFTER_FORWARD``.
    """
    ordered = sort_declared_first_last(algorithms)
    if event.is_after_event:
        ordered.reverse()
    return ordered
