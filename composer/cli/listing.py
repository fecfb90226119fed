"""``composer list [KIND]``: every registered algorithm, model, dataset, optimizer, scheduler, callback and logger.

The listing is generated from the registries (:data:`composer.config.REGISTRIES`), one line each: the name a recipe
uses and the first line of the class's docstring.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from composer.config import REGISTRIES, ConfigError

__all__ = ["add_parser", "describe", "format_listing"]


def describe(kind: str, name: str) -> str:
    """The first line of the docstring of what ``name`` builds (the algorithm, callback or logger class itself where
    there is one, else its config class).

    Example:
        >>> describe("models", "simple_cnn")
        'Small CNN for images of any size; the model of the built-in digits task (simple_cnn).'
    """
    from composer.algorithms import ALGORITHMS
    from composer.callbacks import CALLBACKS
    from composer.loggers import LOGGERS

    built: dict[str, dict[str, type]] = {"algorithms": ALGORITHMS, "callbacks": CALLBACKS, "loggers": LOGGERS}
    target = built.get(kind, {}).get(name) or REGISTRIES[kind][name]
    doc = (target.__doc__ or "").strip()
    line = doc.splitlines()[0].strip() if doc else ""
    # Plain text for a terminal: ":func:`~a.b.c`" -> "c", "``x``" -> "x".
    line = re.sub(r":\w+:`~?([\w.]*?)([\w]+)`", r"\2", line)
    return line.replace("``", "")


def format_listing(kinds: list[str] | None = None) -> str:
    """The listing of ``kinds`` (default: all), a heading per kind and a line per name.

    Example:
        >>> print(format_listing(["optimizers"]).splitlines()[0])
        optimizers:
    """
    lines: list[str] = []
    for kind in kinds or list(REGISTRIES):
        registry = REGISTRIES[kind]
        width = max(len(name) for name in registry)
        lines.append(f"{kind}:")
        lines += [f"  {name:<{width}}  {describe(kind, name)}" for name in sorted(registry)]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _run(args: argparse.Namespace) -> int:
    unknown = [kind for kind in args.kinds if kind not in REGISTRIES]
    if unknown:
        raise ConfigError("list", f"unknown kind(s) {unknown}; choose from {list(REGISTRIES)}.")
    print(format_listing(args.kinds or None))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer list`` to the command line's subcommands."""
    parser = subparsers.add_parser("list", help="list what recipes can name", description=__doc__)
    parser.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {list(REGISTRIES)} (default: all)")
    parser.set_defaults(run=_run)
