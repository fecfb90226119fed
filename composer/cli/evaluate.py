"""``composer eval -f RECIPE.yaml [load_path=CHECKPOINT] [key=value ...]``: evaluate a recipe's model, no training."""

from __future__ import annotations

import argparse
from typing import Any

from composer.cli.train import add_recipe_arguments, format_metrics
from composer.config import ConfigError, load_recipe, to_yaml

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    config = load_recipe(args.file, args.overrides)
    if args.print_config:
        print(to_yaml(config), end="")
        return 0
    if config.eval_dataset is None:
        raise ConfigError("eval_dataset", "composer eval needs an eval_dataset; add one to the recipe or override it.")
    with config.initialize_object() as trainer:
        print(format_metrics(trainer.eval()))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer eval`` to the command line's subcommands."""
    parser = subparsers.add_parser(
        "eval", help="evaluate a recipe's model (give load_path=CHECKPOINT for trained weights)", description=__doc__
    )
    add_recipe_arguments(parser)
    parser.set_defaults(run=_run)
