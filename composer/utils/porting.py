"""Names of MosaicML Composer v0.32.1 that this library does not have, answered with what to use instead.

A module that expects such names gives itself a ``__getattr__`` from :func:`pointer_getattr`: importing one of them
raises an :class:`ImportError` that says where the thing went, instead of Python's bare "cannot import name". Every
other missing name still raises the usual :class:`AttributeError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["pointer_getattr"]


def pointer_getattr(module: str, pointers: Mapping[str, str]) -> Callable[[str], Any]:
    """Returns a module ``__getattr__`` that answers each name of ``pointers`` with an ImportError saying what to use.

    Args:
        module: The module's name (``__name__``), for the messages.
        pointers: Each v0.32.1 name this module lacks, mapped to the sentence that says what to use instead.

    Returns:
        Callable[[str], Any]: The ``__getattr__`` (it never returns: it raises for every name).

    Example:
        >>> getattr_ = pointer_getattr("composer.metrics", {"MIoU": "use torchmetrics' MulticlassJaccardIndex."})
        >>> getattr_("MIoU")
        Traceback (most recent call last):
        ...
        ImportError: composer.metrics.MIoU of MosaicML Composer v0.32.1 is not part of this library: use ...
    """

    def __getattr__(name: str) -> Any:
        pointer = pointers.get(name)
        if pointer is not None:
            raise ImportError(
                f"{module}.{name} of MosaicML Composer v0.32.1 is not part of this library: {pointer}",
                name=module,
            )
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
