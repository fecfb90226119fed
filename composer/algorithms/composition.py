"""Which methods do not compose, and why: the rules the Trainer and the recipe check share, readable without torch.

Every registered method composes with every other one, in either order of the ``algorithms`` list, except the
pairs in :data:`REFUSED_PAIRS`. The composition matrix (``tests/algorithms/test_composition*.py``, and
``scripts/composition_matrix.py`` for all pairs) checks that claim: each ordered pair either trains or is refused
by the Trainer's constructor with this module's message. A pair is refused only where combining the two has no
meaning. The module imports nothing heavy, so ``composer train`` refuses a recipe whose list does not compose
before it imports torch.

Example:
    >>> composition_problems(["mixup", "label_smoothing"])
    []
    >>> print(composition_problems(["swa", "mixup", "ema"])[0])
    EMA and SWA do not compose: both average the weights and decide which ones the model ends with. Keep one of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from composer.algorithms import ALGORITHM_CLASS_NAMES

__all__ = ["REFUSED_PAIRS", "check_composition", "composition_problems"]

REFUSED_PAIRS: dict[frozenset[str], str] = {
    frozenset({"EMA", "SWA"}): (
        "both average the weights and decide which ones the model ends with. Keep one of them."
    ),
}
"""Pairs of method class names that are refused together -> why. Subclasses count as their registered class."""


def _class_name(name: str) -> str:
    return ALGORITHM_CLASS_NAMES.get(name, name)


def composition_problems(names: Iterable[str]) -> list[str]:
    """One message per pair of ``names`` that does not compose, in list order.

    Args:
        names: Registry names (``"ema"``) or class names (``"EMA"``) of the methods listed together.

    Returns:
        list[str]: ``"<A> and <B> do not compose: <why>"`` for each refused pair, empty when the list composes.
    """
    classes = list(dict.fromkeys(_class_name(n) for n in names))
    problems = []
    for first, second in itertools.combinations(classes, 2):
        reason = REFUSED_PAIRS.get(frozenset({first, second}))
        if reason is not None:
            a, b = sorted((first, second))
            problems.append(f"{a} and {b} do not compose: {reason}")
    return problems


def _registered_class_name(algorithm: object) -> str:
    # The registered class among the algorithm's bases, so that a user's subclass of EMA counts as EMA.
    registered = set(ALGORITHM_CLASS_NAMES.values())
    for cls in type(algorithm).__mro__:
        if cls.__name__ in registered and cls.__module__.startswith("composer.algorithms."):
            return cls.__name__
    return type(algorithm).__name__


def check_composition(algorithms: Sequence[object]) -> None:
    """Raises if ``algorithms`` holds a pair of methods that do not compose.

    Args:
        algorithms: Algorithm objects, as given to the Trainer.

    Raises:
        ValueError: Naming both methods of every such pair and why they do not compose.

    Example:
        >>> from composer.algorithms import EMA, SWA
        >>> check_composition([EMA(half_life="10ba"), SWA()])
        Traceback (most recent call last):
        ...
        ValueError: algorithms=[EMA, SWA]: EMA and SWA do not compose: both average the weights and decide which ones the model ends with. Keep one of them.
    """
    names = [_registered_class_name(a) for a in algorithms]
    problems = composition_problems(names)
    if problems:
        listed = ", ".join(type(a).__name__ for a in algorithms)
        raise ValueError(f"algorithms=[{listed}]: " + " ".join(problems))
