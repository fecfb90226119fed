"""How to build each registered algorithm for the registry-wide contract test.

One entry per name in ``composer.algorithms.ALGORITHMS``: a function returning ``(algorithm, model, dataloader)`` for a
short CPU run (2 batches). Keep each entry small; add yours with one small edit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SETTINGS"]

# name -> () -> (algorithm instance, ComposerModel, train dataloader)
SETTINGS: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
}
