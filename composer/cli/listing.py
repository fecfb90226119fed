"""``composer list [KIND]``: every registered algorithm, model, dataset, optimizer, scheduler, callback and logger.

The listing is read from the registry manifest (:mod:`composer.config.manifest`, generated from
:data:`composer.config.REGISTRIES`), one line each: the name a recipe uses and the first line of the class's
docstring. Reading the manifest imports no torch, so the listing appears at once.
"""

from __future__ import annotations

import argparse
from typing import Any

from composer.config.config_error import ConfigError
from composer.config.manifest import load_manifest

__all__ = ["add_parser", "describe", "format_listing"]


def describe(kind: str, name: str) -> str:
    """The first line of the docstring of what ``name`` builds (the algorithm, callback or logger class itself where
    there is one, else its config class).

    Example:
        >>> describe("models", "simple_cnn")
        'Small CNN for images of any size; the model of the built-in digits task (simple_cnn).'
    """
    summary: str = load_manifest()[kind][name]["summary"]
    return summary


def format_listing(kinds: list[str] | None = None) -> str:
    """The listing of ``kinds`` (default: all), a heading per kind and a line per name.

    Example:
        >>> print(format_listing(["optimizers"]).splitlines()[0])
        optimizers:
    """
    manifest = load_manifest()
    lines: list[str] = []
    for kind in kinds or list(manifest):
        entries = manifest[kind]
        width = max(len(name) for name in entries)
        lines.append(f"{kind}:")
        lines += [f"  {name:<{width}}  {entries[name]['summary']}" for name in sorted(entries)]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _run(args: argparse.Namespace) -> int:
    kinds = list(load_manifest())
    unknown = [kind for kind in args.kinds if kind not in kinds]
    if unknown:
        raise ConfigError("list", f"unknown kind(s) {unknown}; choose from {kinds}.")
    print(format_listing(args.kinds or None))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer list`` to the command line's subcommands."""
    parser = subparsers.add_parser("list", help="list what recipes can name", description=__doc__)
    parser.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {list(load_manifest())} (default: all)")
    parser.set_defaults(run=_run)
