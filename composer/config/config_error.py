"""ConfigError: a mistake in a recipe or an override, located by its key path (or its file)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["ConfigError", "suggest"]


class ConfigError(ValueError):
    """A user's configuration mistake: the key path (``algorithms.mixup.alpha``) or file, and what to change.

    The command line prints ``str(error)`` and exits with status 2, without a traceback. ``where`` is the dotted key
    path or the file the mistake is in, empty when the mistake concerns the whole recipe.

    Args:
        where: The key path or file.
        message: What is wrong, the value received, and what is allowed.

    Example:
        >>> error = ConfigError("algorithms.mixup.alpha", "received 'high' (str) but expects float")
        >>> str(error)
        "algorithms.mixup.alpha: received 'high' (str) but expects float"
        >>> error.where
        'algorithms.mixup.alpha'
    """

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


def suggest(name: str, choices: Iterable[str]) -> str:
    """A ``" Did you mean 'x'?"`` hint for a misspelled name, or an empty string when nothing is close.

    Example:
        >>> suggest("mixupp", ["mixup", "cutmix"])
        " Did you mean 'mixup'?"
        >>> suggest("zzz", ["mixup"])
        ''
    """
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
