"""``composer train -f RECIPE.yaml [key=value ...]``: train the run a recipe describes, then evaluate it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from composer.cli.provenance import resumption_line
from composer.config import load_recipe, to_yaml

__all__ = ["add_parser", "add_recipe_arguments", "format_metrics"]


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe file and its overrides, shared by ``train`` and ``eval``."""
    parser.add_argument("-f", "--file", type=Path, required=True, metavar="RECIPE.yaml", help="the recipe")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="override any key, nested ones with dots: algorithms.mixup.alpha=0.3 max_duration=2ep",
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")


def format_metrics(metrics: dict[str, float]) -> str:
    """One ``name: value`` line per metric, sorted.

    Example:
        >>> print(format_metrics({"metrics/eval/CrossEntropy": 0.1234567, "metrics/eval/Accuracy": 0.98}))
        metrics/eval/Accuracy: 0.9800
        metrics/eval/CrossEntropy: 0.1235
    """
    return "\n".join(f"{name}: {value:.4f}" for name, value in sorted(metrics.items()))


def _final_metrics_recorder() -> Any:
    """A callback that keeps each evaluator's latest metrics and the batch count they were computed at."""
    from composer.core import Callback

    class FinalMetrics(Callback):
        def __init__(self) -> None:
            self.latest: dict[str, tuple[int, dict[str, float]]] = {}

        def eval_end(self, state: Any, logger: Any) -> None:
            label = state.dataloader_label
            metrics = {f"metrics/{label}/{n}": float(m.compute()) for n, m in state.eval_metrics[label].items()}
            self.latest[label] = (int(state.timer.batch), metrics)

    return FinalMetrics()


def _run(args: argparse.Namespace) -> int:
    config = load_recipe(args.file, args.overrides)
    if args.print_config:
        print(to_yaml(config), end="")
        return 0
    with config.initialize_object() as trainer:
        resumed = resumption_line(trainer)  # autoresume found a checkpoint: which, and from where
        if resumed is not None:
            print(f"composer train: {resumed}", file=sys.stderr)
        recorder = _final_metrics_recorder()
        trainer.state.callbacks.append(recorder)
        trainer.fit()
        # Evaluated at the end of fit already (the usual case): print those metrics instead of evaluating again.
        labels = [evaluator.label for evaluator in trainer.state.evaluators]
        final_batch = int(trainer.state.timer.batch)
        if all(recorder.latest.get(label, (-1,))[0] == final_batch for label in labels):
            metrics = {name: value for label in labels for name, value in recorder.latest[label][1].items()}
        else:
            metrics = trainer.eval()
    if metrics:
        print(format_metrics(metrics))
    return 0


def add_parser(subparsers: Any) -> None:
    """Adds ``composer train`` to the command line's subcommands."""
    parser = subparsers.add_parser("train", help="train from a recipe", description=__doc__)
    add_recipe_arguments(parser)
    parser.set_defaults(run=_run)
