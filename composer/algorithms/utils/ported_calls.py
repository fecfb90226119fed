"""Constructor calls written for MosaicML Composer v0.32.1, answered with this library's form.

Some algorithms take other arguments here than in v0.32.1 (``LabelSmoothing(alpha)`` where v0.32.1 wrote
``smoothing``; ``Alibi``'s dotted paths, which v0.32.1 found by itself). :func:`explain_call` wraps such a
constructor: a call that does not fit its signature, and that the given ``explain`` recognises, raises a
:class:`TypeError` that shows the call to write instead of Python's "unexpected keyword argument".
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["explain_call"]

P = ParamSpec("P")
S = TypeVar("S")


def explain_call(
    explain: Callable[[dict[str, Any]], str | None],
) -> Callable[[Callable[Concatenate[S, P], None]], Callable[Concatenate[S, P], None]]:
    """Wraps an ``__init__`` so that a call that does not fit its signature may raise ``explain``'s message instead.

    The call's arguments are bound to the signature first; only when that fails is ``explain`` asked, with the
    keyword arguments given. A message it returns becomes the :class:`TypeError`; None leaves Python's own error. The
    wrapper keeps the signature (``inspect.signature`` follows ``__wrapped__``), so configs derived from it do not
    change.

    Args:
        explain: Maps the keyword arguments of a call that failed to bind to the message to show, or None.

    Returns:
        Callable: The decorator.

    Example:
        >>> class Smoothing:
        ...     @explain_call(lambda kw: f"use alpha={kw['smoothing']!r}" if "smoothing" in kw else None)
        ...     def __init__(self, alpha: float) -> None:
        ...         self.alpha = alpha
        >>> Smoothing(smoothing=0.1)
        Traceback (most recent call last):
        ...
        TypeError: use alpha=0.1
    """

    def decorate(init: Callable[Concatenate[S, P], None]) -> Callable[Concatenate[S, P], None]:
        signature = inspect.signature(init)

        @functools.wraps(init)
        def checked(self: S, /, *args: P.args, **kwargs: P.kwargs) -> None:
            try:
                signature.bind(self, *args, **kwargs)
            except TypeError:
                message = explain(dict(kwargs))
                if message is not None:
                    raise TypeError(message) from None
            init(self, *args, **kwargs)  # a call that does not bind raises Python's own error here

        return checked

    return decorate
