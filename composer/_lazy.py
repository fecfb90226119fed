"""Module attributes imported on first use (PEP 562), for packages whose import must stay cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Returns a package's ``__getattr__`` and ``__dir__``: ``names`` maps each attribute to the module holding it;
    ``dir()`` lists the package's ``__all__`` (or ``names`` without one).

    The first access imports that module and stores the value in ``namespace`` (the package's ``globals()``), so
    later accesses are plain lookups.

    Example:
        >>> namespace = {}
        >>> getattr_, dir_ = lazy_attributes("pkg", {"sqrt": "math"}, namespace)
        >>> getattr_("sqrt")(4.0), "sqrt" in namespace, dir_()
        (2.0, True, ['sqrt'])
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace.get("__all__", names))

    return __getattr__, __dir__
