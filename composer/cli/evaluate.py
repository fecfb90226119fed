"""``composer eval -f RECIPE.yaml load_path=CHECKPOINT [key=value ...]``: evaluate a recipe's trained model.

It scores exactly the checkpoint ``load_path`` names (a folder: its newest checkpoint), and says which, with the
checkpoint's epoch and batch, on the first line of its output; the metrics follow. The recipe that trained the run
works as it is: evaluation writes nothing and resumes nothing, so the recipe's ``autoresume``, ``save_folder``,
``checkpoint_saver`` callback and loggers are left out (a line on standard error says which).

Without ``load_path`` the model would be scored with the random weights it starts from, which is rarely what anyone
wants and easy to miss in the numbers; that is refused unless ``--random-init`` asks for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from composer.cli.provenance import checkpoint_time
from composer.cli.train import add_recipe_arguments, format_metrics
from composer.config import ConfigError, load_recipe, to_yaml

if TYPE_CHECKING:
    from composer.config import TrainerHparams
    from composer.trainer import Trainer

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
        from composer.config.recipe import read_config

        try:
            raw, _ = read_config(args.file, args.overrides)
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
    config, left_out = _for_evaluation(config)
    if left_out:
        print(f"composer eval: left out {', '.join(left_out)}: evaluation saves and resumes nothing.", file=sys.stderr)
    with config.initialize_object() as trainer:
        scored = _scored(config, trainer)
        metrics = trainer.eval()
    print(scored)
    print(format_metrics(metrics))
    return 0


def _for_evaluation(config: TrainerHparams) -> tuple[TrainerHparams, list[str]]:
    """The recipe without what would pick another checkpoint than ``load_path`` or write files, and those keys."""
    changes: dict[str, Any] = {}
    left_out: list[str] = []
    if config.autoresume:  # it would score the newest checkpoint in save_folder instead of load_path
        changes["autoresume"] = False
        left_out.append("autoresume")
    if config.save_folder is not None:  # its saver refuses a folder that holds the run's checkpoints
        changes["save_folder"] = None
        left_out.append("save_folder")
    if "checkpoint_saver" in config.callbacks:
        changes["callbacks"] = {k: v for k, v in config.callbacks.items() if k != "checkpoint_saver"}
        left_out.append("callbacks.checkpoint_saver")
    if config.loggers:  # a file logger would cut the training run's log back to the checkpoint's length
        changes["loggers"] = {}
        left_out.append(f"loggers ({', '.join(config.loggers)})")
    return dataclasses.replace(config, **changes), left_out


def _scored(config: TrainerHparams, trainer: Trainer) -> str:
    """``checkpoint: WHERE (epoch E, batch B)``: the checkpoint loaded, as named (its file, when a folder was)."""
    if config.load_path is None:
        return "checkpoint: none (--random-init: the model's initial weights)"
    named = str(config.load_path).rstrip("/")
    loaded = trainer.checkpointing.loaded_path
    where = named if loaded is None or loaded.name == PurePosixPath(named).name else f"{named}/{loaded.name}"
    return f"checkpoint: {where} ({checkpoint_time(trainer, config.load_weights_only)})"


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
