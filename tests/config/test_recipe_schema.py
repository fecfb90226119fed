"""The torch-free first check of a recipe finds what TrainerHparams.from_dict finds, in the same words and order.

Every mutation of a valid recipe below goes through both; each problem of the first check must be one of the full
check's problems, word for word and in the same order, so that ``composer train`` says the same thing whichever check
finds a mistake. Recipes the first check cannot word are left to the full check (it returns nothing for them).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from composer.config import ConfigError, TrainerHparams, load_config
from composer.config.manifest import load_manifest, load_trainer_schema
from composer.config.recipe_schema import schema_problems

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))

BASE: dict[str, Any] = yaml.safe_load(
    """
model: {mlp: {in_features: 16, hidden: [8]}}
train_dataset: {synthetic_classification: {shape: [16], num_samples: 32}}
train_batch_size: 8
max_duration: 2ba
optimizer: {sgd: {lr: 0.1}}
algorithms: {label_smoothing: {alpha: 0.1}, mixup: {alpha: 0.2}}
callbacks: [lr_monitor]
progress_bar: false
"""
)

# (key path, new value); None as a value deletes the key. Each changes BASE into a recipe with a problem.
MUTATIONS: list[list[tuple[tuple[Any, ...], Any]]] = [
    [(("max_duraton",), "1ep")],
    [(("train_batch_size",), "many")],
    [(("train_batch_size",), True)],
    [(("train_batch_size",), 8.5)],
    [(("precision",), None)],
    [(("load_ignore_keys",), "a")],
    [(("seed",), "zero")],
    [(("compile_config",), 3)],
    [(("profiler",), [1])],
    [(("model",), "mlpp")],
    [(("model",), {"mlp": {"in_features": 16}, "gpt": {}})],
    [(("model",), ["mlp"])],
    [(("model", "mlp", "hidden_size"), 8)],
    [(("model", "mlp"), 16)],
    [(("model", "mlp", "in_feature"), True)],  # a bool among unknown keys: left to the full check
    [(("optimizer",), {"sgdd": {"lr": 0.1}})],
    [(("optimizer", "sgd", "momentun"), 0.9)],
    [(("algorithms", "mixupp"), {"alpha": 0.2})],
    [(("algorithms",), ["mixup", {"mixup": {}}, 3])],
    [(("algorithms",), "mixup")],
    [(("algorithms", "label_smoothing", "alfa"), 0.1)],
    [(("callbacks",), [{"lr_monitor": {}, "speed_monitor": {}}])],
    [(("loggers",), {"progressbar": {}})],
    [(("schedulers",), {"cosine_decay": {"t_maxx": 2}})],
    [(("train_dataset",), None)],
    [(("model",), None), (("max_duration",), None)],
    [(("eval_dataset",), {"digitz": {}})],
    # several at once, of both kinds: the first check reports its own, in the full check's order
    [(("seed",), -1), (("train_batch_size",), "x"), (("algorithms", "mixupp"), {}), (("optimiser",), {})],
    [(("grad_clip_norm",), float("nan")), (("model", "mlp", "hiden"), [8])],
]


def _mutated(changes: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    recipe = copy.deepcopy(BASE)
    for path, value in changes:
        parent = recipe
        for key in path[:-1]:
            parent = parent[key]
        if value is None and path[-1] in parent:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return recipe


def _full(recipe: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        TrainerHparams.from_dict(recipe)
    except ConfigError as error:
        return error.problems
    return []


def _agree(recipe: dict[str, Any]) -> list[tuple[str, str]]:
    first = [problem for error in schema_problems(recipe) for problem in error.problems]
    full = _full(recipe)
    remaining = iter(full)
    assert all(problem in remaining for problem in first), f"first check: {first}\nfull check: {full}"
    return first


@pytest.mark.parametrize("changes", MUTATIONS, ids=lambda changes: "+".join(".".join(map(str, p)) for p, _ in changes))
def test_the_first_check_words_problems_as_the_full_check_does(changes):
    recipe = _mutated(changes)
    first = _agree(recipe)
    assert _full(recipe), "every mutation is a mistake"
    undecided = changes == [(("model", "mlp", "in_feature"), True)]
    assert bool(first) != undecided, "the first check finds each of these (but the bool case)"


def test_valid_recipes_pass_the_first_check():
    assert schema_problems(BASE) == []
    for path in RECIPES:
        assert schema_problems(load_config(path)) == [], path.name


@pytest.mark.parametrize("path", RECIPES, ids=lambda path: path.stem)
def test_every_shipped_recipe_with_a_typo_in_each_key(path):
    recipe = load_config(path)
    for key, value in itertools.islice(recipe.items(), 12):
        typo = {("x" + k if k == key else k): v for k, v in recipe.items()}
        assert _agree(typo)
        if isinstance(value, dict) and len(value) == 1 and key in load_trainer_schema()["one_of"]:
            ((name, fields),) = value.items()
            renamed = {**recipe, key: {name + "z": fields}}
            assert _agree(renamed)


def test_every_registry_name_is_known_to_the_first_check():
    manifest = load_manifest()
    for field, (kind, _) in load_trainer_schema()["sets"].items():
        for name in manifest[kind]:
            assert not [e for e in schema_problems({**BASE, field: {name: None}}) if e.where.startswith(field)], name
