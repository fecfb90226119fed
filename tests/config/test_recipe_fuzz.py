"""A recipe fuzzer: every mutation of a shipped recipe trains a few batches, or exits 2 naming the key it mutated.

Each recipe in recipes/ is first made tiny and portable (CPU, fp32, 4 synthetic samples of its input shape in batches
of 2, 2 batches, a smaller model, no loggers or checkpoints). One mutation is then applied through ``composer train``:
a key deleted, misspelt or added, or a value replaced by one of a fixed set of wrong types, out-of-range and edge
values. The command must exit 0 (it trained) or 2, printing no traceback and naming the mutated key: a problem located
at that key, at a key inside its value, or at the entry that holds it with the rest of the path in the message.

Sizes stay small on purpose: a huge value for a valid size field (``n_layer: 2**40``) is a run that takes for ever, not
a mistake the config can refuse, so the values are either wrong or small. Seeded (``derandomize=True``) with
``max_examples=_EXAMPLES`` (60): about 8 s on 2 cores.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import math
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from composer.cli.__main__ import main
from composer.config import load_recipe
from composer.core.time import Time, TimeUnit

RECIPES = sorted((Path(__file__).parents[2] / "recipes").glob("*.yaml"))
_EXAMPLES = 60

_PORTABLE = ["device=cpu", "precision=fp32", "save_folder=null", "autoresume=false", "progress_bar=false"]

# Wrong types, out-of-range numbers and edge values; no large sizes (see the module docstring).
_VALUES: list[Any] = [
    None,
    True,
    False,
    "oops",
    "",
    [],
    [1],
    {"k": 1},
    -1,
    0,
    1,
    2,
    0.5,
    -0.5,
    math.nan,
    math.inf,
    -math.inf,
]

_NEW_KEY = "no_such_key"


def _shrink_model(model: dict[str, Any]) -> dict[str, Any]:
    """The recipe's model, with fewer layers where it has many."""
    ((name, fields),) = model.items()
    smaller = {
        "cifar_resnet": {"depth": 8},
        "imagenet_resnet": {"depth": 18},
        "gpt": {"n_layer": 1, "n_head": 2, "n_embd": 32},
    }.get(name, {})
    return {name: {**fields, **smaller}}


def _shrink_data(data: dict[str, Any]) -> dict[str, Any]:
    """A synthetic stand-in, with images no larger than 64x64."""
    ((name, fields),) = data.items()
    if name == "synthetic_classification":
        fields = {**fields, "shape": [min(size, 64) for size in fields["shape"]]}
    return {name: fields}


@functools.cache
def _tiny(path: Path) -> dict[str, Any]:
    """The recipe on 4 synthetic samples in batches of 2, its schedule scaled down to 2 batches (as tests/recipes)."""
    config = load_recipe(path, _PORTABLE)
    duration = Time.from_input(config.max_duration, default_unit=TimeUnit.EPOCH)
    config = dataclasses.replace(
        config,
        train_dataset=config.train_dataset.synthetic(num_samples=4),
        eval_dataset=config.eval_dataset.synthetic(num_samples=4) if config.eval_dataset is not None else None,
        train_batch_size=2,
        eval_batch_size=2,
        scale_schedule_ratio={TimeUnit.EPOCH: 1.5, TimeUnit.BATCH: 2.5}[duration.unit] / duration.value,
        eval_subset_num_batches=1,
        loggers={},
        callbacks={},
    )
    recipe = config.to_dict()
    recipe["model"] = _shrink_model(recipe["model"])
    for field in ("train_dataset", "eval_dataset"):
        if recipe[field] is not None:
            recipe[field] = _shrink_data(recipe[field])
    return recipe


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a recipe (list items by index)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    paths: list[tuple[Any, ...]] = []
    for key, value in items:
        paths.append((*prefix, key))
        paths.extend(_paths(value, (*prefix, key)))
    return paths


def _mutate(recipe: dict[str, Any], path: tuple[Any, ...], kind: str, value: Any) -> tuple[Any, ...]:
    """Applies one mutation in place; returns the key path an error must name."""
    parent: Any = recipe
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if kind == "value":
        parent[last] = value
        return path
    if kind == "delete":
        del parent[last]
        return path[:-1] or path
    if kind == "add" and isinstance(parent, dict):
        parent[_NEW_KEY] = 1
        return (*path[:-1], _NEW_KEY)
    if kind == "rename" and isinstance(parent, dict):
        renamed = last[:-1] if len(last) > 1 else last + "x"
        parent[renamed] = parent.pop(last)
        return (*path[:-1], renamed)
    parent[last] = value  # a list item cannot be renamed or get a key: change its value instead
    return path


def _problems(err: str) -> list[tuple[list[str], str]]:
    """The (key paths, line) of each problem in a `composer train` error message."""
    text = err.removeprefix("composer train: error: ")
    lines = text.splitlines()[1:] if re.match(r"\d+ problems in the recipe:", text) else text.splitlines()[:1]
    problems = []
    for line in lines:
        where, _, _ = line.strip().partition(": ")
        problems.append(([key for part in where.split(" and ") for key in part.split(" / ")], line))
    return problems


def _names(err: str, path: tuple[Any, ...]) -> bool:
    """Whether a problem is located at ``path``, inside its value, or at an entry above it that names the rest."""
    dotted = ".".join(str(key) for key in path)
    for keys, line in _problems(err):
        for key in keys:
            if key == dotted or key.startswith(dotted + "."):
                return True
            for depth in range(1, len(path)):
                rest = [str(k) for k in path[depth:] if not isinstance(k, int)]
                if key == ".".join(str(k) for k in path[:depth]) and all(k in line for k in rest):
                    return True
    return False


@st.composite
def _mutations(draw: st.DrawFn) -> tuple[Path, tuple[Any, ...], str, Any]:
    recipe = draw(st.sampled_from(RECIPES))
    path = draw(st.sampled_from(_paths(_tiny(recipe))))
    kind = draw(st.sampled_from(["value", "value", "delete", "rename", "add"]))
    return recipe, path, kind, draw(st.sampled_from(_VALUES))


def _train(recipe: dict[str, Any]) -> tuple[int, str]:
    """``composer train`` on the recipe, in a fresh folder; the exit status and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        (Path(folder) / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = main(["train", "-f", "recipe.yaml"])
        finally:
            torch.use_deterministic_algorithms(False)  # `deterministic_mode: true` sets it for the process
    return code, err.getvalue()


@settings(derandomize=True, deadline=None, max_examples=_EXAMPLES)
@given(_mutations())
def test_a_mutated_recipe_trains_or_exits_2_naming_the_key(mutation):
    path, key_path, kind, value = mutation
    recipe = copy.deepcopy(_tiny(path))
    named = _mutate(recipe, key_path, kind, value)
    code, err = _train(recipe)
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.startswith("composer train: error: "), err
        assert _names(err, named), (named, err)
