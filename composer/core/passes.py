"""Ordering passes: pure functions from (algorithms, event) to the order in which they run."""

from __future__ import annotations

from collections.abc import Sequence

from composer.core.algorithm import Algorithm
from composer.core.event import Event

__all__ = ["declares", "order_algorithms", "sort_declared_first_last"]


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
    first = [a for a in algorithms if declares(a, "run_first")]
    last = [a for a in algorithms if declares(a, "run_last") and not declares(a, "run_first")]
    middle = [a for a in algorithms if not declares(a, "run_first") and not declares(a, "run_last")]
    return first + middle + last


def declares(algorithm: object, flag: str) -> bool:
    """Whether ``algorithm`` sets ``flag`` (``run_first`` or ``run_last``) to ``True`` itself.

    Only the value ``True`` counts. An object that merely answers every attribute with something truthy (a
    ``unittest.mock.Mock`` standing in for an algorithm) or one that does not subclass :class:`Algorithm` and lacks
    the flag declares nothing, so it cannot push a real ``run_first`` algorithm such as SelectiveBackprop out of
    the front.

    Args:
        algorithm: An algorithm, or any object standing in for one.
        flag: ``"run_first"`` or ``"run_last"``.

    Returns:
        bool: True only when the attribute is the value ``True``.

    Example:
        >>> from unittest.mock import Mock
        >>> declares(Mock(), "run_first"), declares(Mock(run_first=True), "run_first")
        (False, True)
    """
    return getattr(algorithm, flag, False) is True


def order_algorithms(algorithms: Sequence[Algorithm], event: Event) -> list[Algorithm]:
    """The order in which ``algorithms`` run at ``event``: declared first/last, then reversed on after-events.

    Reversing on after-events makes paired changes nest like a stack: if A then B change something at
    ``BEFORE_FORWARD``, B then A undo it at ``AFTER_FORWARD``.
    """
    ordered = sort_declared_first_last(algorithms)
    if event.is_after_event:
        ordered.reverse()
    return ordered
