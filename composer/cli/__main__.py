"""The ``composer`` command line: parse the subcommand, run it, and turn configuration mistakes into exit code 2.

A user's mistakes (a :class:`~composer.config.ConfigError`: unknown name, missing field, wrong type, value out of
range, missing or malformed data, a model that does not fit its data) print one message to standard error and exit
with status 2, without a traceback: one line for one problem, or a first line with the count and one line per problem,
each named by its recipe key. argparse reports malformed command lines the same way.

``composer --import MODULE ...`` (repeatable) imports ``MODULE`` before the subcommand runs, from the current
directory or the path: a module of yours that calls :func:`composer.config.register`, so that a recipe can name your
classes. A recipe never imports anything itself.

Exit status: 0 on success; 2 for a mistake in the command line or the recipe; 75 (``EX_TEMPFAIL``: run the same
command again) when a SIGTERM or SIGINT stopped training: the Trainer finished the batch, saved a checkpoint (with
``save_folder``; the message names it) and raised :class:`~composer.trainer.preemption.Preempted`; 1, with one line
naming the shard and the recipe key, when a streamed shard could not be read mid-epoch (a
:class:`~composer.datasets.streaming.StreamError`: the shard vanished, or the store stayed down past ``retry_budget``;
fix it and run the same command again, which resumes with ``autoresume``); 130 for another Ctrl-C (outside training, or
with ``handle_sigint: false``); 141 when the reader of the output went away.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from composer.cli import launch
from composer.config import ConfigError

__all__ = ["PREEMPTED", "STREAM_FAILED", "build_parser", "import_modules", "main"]

PREEMPTED = 75
"""The exit status of a run stopped by SIGTERM or SIGINT, its checkpoint saved (``EX_TEMPFAIL``: try again)."""

STREAM_FAILED = 1
"""The exit status of a run stopped mid-epoch because a shard could not be read (the message names it)."""


# Subcommand -> module; a module is imported only when its subcommand can run (``launch`` alone skips the models).
_COMMANDS = {
    "train": "train",
    "eval": "evaluate",
    "list": "listing",
    "compare": "compare",
    "launch": "launch",
    "checkpoint": "checkpoint",
    "tokenizer": "tokenizer",
    "data": "data",
}


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``composer`` and its subcommands (``commands``: only these; default: all).

    Example:
        >>> build_parser().parse_args(["list", "algorithms"]).kinds
        ['algorithms']
    """
    parser = argparse.ArgumentParser(
        prog="composer", description="Train from YAML recipes, and measure which recipe reaches your accuracy fastest."
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable): a module that registers your classes with composer.config.register",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(_COMMANDS) + "}")
    for name in commands or _COMMANDS:
        importlib.import_module(f"composer.cli.{_COMMANDS[name]}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``composer`` with ``argv`` (default: the process's arguments) and returns the exit status.

    Example:
        >>> main(["train", "-f", "no/such/recipe.yaml"])
        2
    """
    argv = launch.route(sys.argv[1:] if argv is None else argv)
    args = build_parser(["launch"] if argv[:1] == ["launch"] else None).parse_args(argv)
    try:
        import_modules(args.imports)
        code: int = args.run(args)
    except ConfigError as error:
        print(f"composer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`composer list | head`): stop quietly, as Unix tools do
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit; give it somewhere to go
        return 141
    except BaseException as error:  # Ctrl-C, and the Trainer's Preempted (under SIGINT a KeyboardInterrupt too)
        if _preempted(error):
            print(f"composer {args.command}: {error}", file=sys.stderr)
            return PREEMPTED
        if _raised(error, "composer.datasets.streaming", "StreamError"):  # its message names the shard and the key
            print(f"composer {args.command}: error: {error}", file=sys.stderr)
            return STREAM_FAILED
        if not isinstance(error, KeyboardInterrupt):
            raise
        print(f"composer {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


def import_modules(modules: Sequence[str]) -> None:
    """Imports each module of ``--import``, the current directory first on the path as for ``python -m``.

    Raises:
        ConfigError: At ``--import MODULE``, for a module that cannot be found.
    """
    if modules and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is None or not (module == error.name or module.startswith(f"{error.name}.")):
                raise  # the module was found, and something it imports is missing: its own traceback says what
            raise ConfigError(
                f"--import {module}",
                f"no module named {error.name!r} in the current directory or on the path; give a module's dotted "
                "name (my_methods, not my_methods.py), run from its folder, or add its folder to PYTHONPATH.",
            ) from None


def _preempted(error: BaseException) -> bool:
    """Whether ``error`` is the Trainer's :class:`~composer.trainer.preemption.Preempted`."""
    return _raised(error, "composer.trainer.preemption", "Preempted")


def _raised(error: BaseException, module: str, name: str) -> bool:
    """Whether ``error`` is ``module``'s exception ``name``; looked up only when the module was imported (importing
    it here would import torch for every command)."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(error, getattr(loaded, name))


if __name__ == "__main__":
    sys.exit(main())
