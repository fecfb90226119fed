"""``composer eval -f RECIPE.yaml load_path=CHECKPOINT [key=value ...]``: evaluate a recipe's trained model.

Without ``load_path`` the model would be scored with the random weights it starts from, which is rarely what anyone
wants and easy to miss in the numbers; that is refused unless ``--random-init`` asks for it.
"""

from __future__ import annotations

import argparse
from typing import Any

from composer.cli.train import add_recipe_arguments, format_metrics
from composer.config import ConfigError, load_recipe, to_yaml

__all__ = ["add_parser"]


def _eval_problems(load_path: Any, has_eval_dataset: bool, random_init: bool) -> list[ConfigError]:
    """What ``composer eval`` needs beyond a valid recipe: weights to evaluate, and data to evaluate them on."""
    problems: list[ConfigError] = []
    if not has_eval_dataset:
        problems.append(
            ConfigError("eval_dataset", "composer eval needs an eval_dataset; add one to the recipe or override it.")
        )
    if load_path is None and not random_init:
        problems.append(
            ConfigError(
                "load_path",
                "not set, so composer eval would score the model's random initial weights. Give the checkpoint to "
                "evaluate, e.g. load_path=runs/ckpt/latest-rank0.pt load_weights_only=true, or pass --random-init to "
                "evaluate an untrained model on purpose.",
            )
        )
    if load_path is not None and random_init:
        problems.append(
            ConfigError(
                "load_path",
                f"received {load_path!r} together with --random-init; give one: the checkpoint, or --random-init.",
            )
        )
    return problems


def _run(args: argparse.Namespace) -> int:
    try:
        config = load_recipe(args.file, args.overrides)
    except ConfigError as error:
        if args.print_config:
            raise
        # List what eval needs too, so that one run reports every problem (from the raw values: the recipe is not
        # valid). Malformed overrides are already in `error`.
        from composer.config.recipe import _load_config

        try:
            raw, _ = _load_config(args.file, args.overrides)
        except ConfigError:
            raise error from None  # the file itself cannot be read: that is the whole story
        extra = _eval_problems(raw.get("load_path"), raw.get("eval_dataset") is not None, args.random_init)
        raise ConfigError.combine([error, *extra]) from None
    if args.print_config:
        print(to_yaml(config), end="")
        return 0
    problems = _eval_problems(config.load_path, config.eval_dataset is not None, args.random_init)
    if problems:
        if config.eval_dataset is not None:
            try:  # the recipe's other problems (files, a model that does not fit its data) in the same message
                config.initialize_object().close()
            except ConfigError as error:
                problems.insert(0, error)
        raise ConfigError.combine(problems)
    with config.initialize_object() as trainer:
        print(format_metrics(trainer.eval()))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer eval`` to the command line's subcommands."""
    parser = subparsers.add_parser(
        "eval", help="evaluate a recipe's trained model (give load_path=CHECKPOINT)", description=__doc__
    )
    add_recipe_arguments(parser)
    parser.add_argument(
        "--random-init",
        action="store_true",
        help="evaluate the model's random initial weights (without load_path; refused otherwise)",
    )
    parser.set_defaults(run=_run)
