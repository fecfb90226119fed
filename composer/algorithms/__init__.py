"""Speed-up methods as Algorithms (two-way callbacks); each is also a plain function in composer.functional.

``ALGORITHMS`` maps each method's registry name to its class.
"""

from __future__ import annotations

from composer.core.algorithm import Algorithm

__all__ = ["ALGORITHMS", "Algorithm"]

ALGORITHMS: dict[str, type[Algorithm]] = {}
