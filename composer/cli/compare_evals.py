"""What ``composer compare`` measures of each run besides its time and metric, and the table that shows it.

Every run records its other evaluation metrics (``CrossEntropy``, ``BitsPerByte``, ...), its training throughput in
tokens per second when its batches count tokens, and the metric of each extra evaluation given with ``--eval-also``:
the trained model evaluated once more on the recipe's ``eval_dataset`` under some overrides (for a language model,
at twice the training length). An evaluation the model refuses (a learned-position GPT given sequences longer than
its ``max_sequence_length`` raises a ``ValueError`` naming both lengths) is recorded as ``refused: <the error>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.config import ConfigError, load_recipe

__all__ = [
    "EVAL_ALSO_HELP",
    "evaluate_also",
    "format_evaluations",
    "mean_tokens_per_s",
    "parse_eval_also",
    "throughput",
]

EVAL_ALSO_HELP = (
    "evaluate each trained model once more on its eval_dataset with these overrides, recorded as METRIC@LABEL "
    "(repeatable), for example --eval-also 2x eval_dataset.python_docs.seq_len=128 eval_batch_size=64"
)


def parse_eval_also(groups: Sequence[Sequence[str]] | None) -> dict[str, list[str]]:
    """``--eval-also LABEL KEY=VALUE...`` groups as ``{label: overrides}``.

    Example:
        >>> parse_eval_also([["2x", "eval_dataset.python_docs.seq_len=128"]])
        {'2x': ['eval_dataset.python_docs.seq_len=128']}
    """
    parsed: dict[str, list[str]] = {}
    for group in groups or []:
        label, *overrides = group
        if not overrides or "=" in label or label in parsed:
            raise ConfigError(
                "--eval-also", f"expected a new label, then KEY=VALUE overrides (as '2x key=value'), got {group}."
            )
        parsed[label] = list(overrides)
    return parsed


def evaluate_also(
    trainer: Any, recipe: str | Path, overrides: Sequence[str], seed: int, metric: str, extra: Mapping[str, list[str]]
) -> dict[str, float | str]:
    """``metric`` of the trained model on each extra evaluation, keyed ``METRIC@LABEL``; a refusal as its error.

    Args:
        trainer: The trained Trainer.
        recipe: Its recipe file.
        overrides: The overrides it was trained with.
        seed: The run's seed (the evaluation data's order, as for the main evaluation).
        metric: The metric to record.
        extra: ``{label: overrides}`` of each extra evaluation (see :func:`parse_eval_also`).
    """
    results: dict[str, float | str] = {}
    for label, keys in extra.items():
        config = load_recipe(recipe, [*overrides, *keys])
        if config.eval_dataset is None:
            raise ConfigError(str(recipe), f"--eval-also {label}: the recipe has no eval_dataset.")
        loader = config.eval_dataset.initialize_object(config.eval_batch_size or config.train_batch_size, False, seed)
        try:
            values = trainer.eval(loader)
        except ValueError as error:  # the model refuses this data (a sequence longer than its positions)
            results[f"{metric}@{label}"] = f"refused: {error}"
            continue
        results[f"{metric}@{label}"] = {key.rsplit("/", 1)[-1]: v for key, v in values.items()}[metric]
    return results


def throughput(trainer: Any, seconds: float) -> dict[str, float]:
    """``{'tokens_per_s': ...}`` of a fit that took ``seconds``, or nothing when its batches counted no tokens."""
    tokens = int(trainer.state.timer.token)
    return {"tokens_per_s": tokens / seconds} if tokens and seconds > 0 else {}


def mean_tokens_per_s(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """Each (recipe, duration)'s mean training tokens per second over its kept runs (outliers left out); empty when
    no run counted tokens.

    Example:
        >>> runs = [{"recipe": "a", "duration": "9ba", "tokens_per_s": rate, "status": "ok"} for rate in (90, "110")]
        >>> mean_tokens_per_s(runs)
        {('a', '9ba'): 100.0}
    """
    rates: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        if run.get("status", "ok") != "outlier" and _is_number(run.get("tokens_per_s")):
            rates.setdefault((run["recipe"], run["duration"]), []).append(float(run["tokens_per_s"]))
    return {key: sum(values) / len(values) for key, values in rates.items()}


def _mean(values: Sequence[Any]) -> str:
    numbers = [float(v) for v in values if _is_number(v)]
    refused = [str(v) for v in values if str(v).startswith("refused")]
    if refused:  # its first sentence: the full error is in the CSV
        return refused[0].split(". ")[0]
    if not numbers:
        return ""
    mean = sum(numbers) / len(numbers)
    return f"{mean:,.0f}" if abs(mean) >= 1000 else f"{mean:.4g}"  # tokens per second: 28,208, not 2.821e+04


def _is_number(value: Any) -> bool:
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def format_evaluations(runs: Sequence[dict[str, Any]], metric: str) -> str:
    """A Markdown table of each (recipe, duration): the mean over its kept runs of every recorded evaluation.

    Columns: the metric, the other evaluation metrics, ``METRIC@LABEL`` of each extra evaluation (or the refusal's
    first sentence), and tokens per second. Empty when the runs record nothing besides the metric.

    Example:
        >>> runs = [{"recipe": "a", "duration": "9ba", "seed": s, "seconds": 1.0, "Perplexity": 3.0 + s,
        ...          "Perplexity@2x": "refused: too long", "tokens_per_s": 100.0, "status": "ok"} for s in (0, 1)]
        >>> print(format_evaluations(runs, "Perplexity"))
        | recipe | duration | Perplexity | Perplexity@2x | tokens/s |
        |---|---|---|---|---|
        | a | 9ba | 3.5 | refused: too long | 100 |
    """
    fixed = {"recipe", "duration", "seed", "repeat", "seconds", "status", "slowdown", metric, "tokens_per_s"}
    columns = [metric, *dict.fromkeys(k for run in runs for k in run if k not in fixed)]
    if "tokens_per_s" in {k for run in runs for k in run}:
        columns.append("tokens_per_s")
    if columns == [metric]:
        return ""
    kept = [run for run in runs if run.get("status", "ok") != "outlier"]
    header = ["recipe", "duration", *("tokens/s" if c == "tokens_per_s" else c for c in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for recipe, duration in dict.fromkeys((run["recipe"], run["duration"]) for run in runs):  # the runs' order
        mine = [run for run in kept if (run["recipe"], run["duration"]) == (recipe, duration)]
        if not mine:
            continue
        cells = [_mean([run.get(c, "") for run in mine]) for c in columns]
        lines.append("| " + " | ".join([recipe, duration, *cells]) + " |")
    return "\n".join(lines)
