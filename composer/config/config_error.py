"""ConfigError: the mistakes in a recipe or its overrides, each located by its key path (or its file)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = ["ConfigError", "suggest"]


class ConfigError(ValueError):
    """A user's configuration mistakes: for each, the key path (``algorithms.mixup.alpha``) or file, and what to change.

    The command line prints ``str(error)`` and exits with status 2, without a traceback. An error holds one problem or
    several (:meth:`combine`), so that one run reports every mistake of a recipe: ``problems`` lists them as
    ``(where, message)`` pairs. ``where`` is the dotted key path or the file the mistake is in, empty when the mistake
    concerns the whole recipe (and for an error of several problems).

    Args:
        where: The key path or file.
        message: What is wrong, the value received, what is allowed and how to fix it.

    Example:
        >>> error = ConfigError("algorithms.mixup.alpha", "received 'high' (str) but expects float")
        >>> str(error)
        "algorithms.mixup.alpha: received 'high' (str) but expects float"
        >>> error.where, error.problems
        ('algorithms.mixup.alpha', [('algorithms.mixup.alpha', "received 'high' (str) but expects float")])
        >>> both = ConfigError.combine([error, ConfigError("seed", "received -1; expected an integer >= 0")])
        >>> print(both)
        2 problems in the recipe:
          algorithms.mixup.alpha: received 'high' (str) but expects float
          seed: received -1; expected an integer >= 0
        >>> [where for where, _ in both.problems]
        ['algorithms.mixup.alpha', 'seed']
    """

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message
        self.problems: list[tuple[str, str]] = [(where, message)]

    @classmethod
    def combine(cls, errors: Sequence[ConfigError]) -> ConfigError:
        """One error that lists every problem of ``errors``, in order, one line each under a first line.

        A single error is returned as it is.

        Raises:
            ValueError: If ``errors`` is empty (there is nothing to report).
        """
        if not errors:
            raise ValueError("ConfigError.combine needs at least one error; there is nothing to report.")
        if len(errors) == 1:
            return errors[0]
        problems = [problem for error in errors for problem in error.problems]
        lines = [f"  {where}: {message}" if where else f"  {message}" for where, message in problems]
        combined = cls("", f"{len(problems)} problems in the recipe:\n" + "\n".join(lines))
        combined.problems = problems
        return combined


# Keys of MosaicML Composer v0.32.1 that this library spells otherwise -> (the key here, how to convert).
_RENAMED_KEYS = {
    "device_train_microbatch_size": (
        "grad_accum",
        "it counts the microbatches each batch is split into, not the samples per microbatch: grad_accum = "
        "ceil(train_batch_size / device_train_microbatch_size), and 'auto' stays 'auto'",
    ),
}


def suggest(name: str, choices: Iterable[str]) -> str:
    """A ``" Did you mean 'x'?"`` hint for a misspelled name, or an empty string when nothing is close.

    A key of MosaicML Composer v0.32.1 that is spelled otherwise here (``device_train_microbatch_size``) gets its
    replacement and how to convert.

    Example:
        >>> suggest("mixupp", ["mixup", "cutmix"])
        " Did you mean 'mixup'?"
        >>> suggest("zzz", ["mixup"])
        ''
    """
    choices = list(choices)
    if name in _RENAMED_KEYS and _RENAMED_KEYS[name][0] in choices:
        key, how = _RENAMED_KEYS[name]
        return f" Use {key!r} instead ({how})."
    close = difflib.get_close_matches(name, choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
