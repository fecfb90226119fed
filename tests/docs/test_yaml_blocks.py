"""Every ```yaml block of the pages the site shows (the guides, the method cards, the recipes' notes) parses, and a
block that is a recipe, or a part of one, passes the recipe checks: the torch-free schema check ``composer train``
makes first (:func:`composer.config.recipe_schema.schema_problems`), then :meth:`TrainerHparams.from_dict`, which
checks every value. A part of a recipe (``callbacks: {...}`` alone) is checked inside a minimal whole recipe.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "composer" / "algorithms").glob("*/README.md")),
    ROOT / "recipes" / "README.md",
]
# What a part of a recipe is completed with: the smallest model, data and duration (its own keys win).
WHOLE = {
    "model": {"mlp": {"in_features": 8}},
    "train_dataset": {"synthetic_classification": {"shape": [8]}},
    "train_batch_size": 4,
    "max_duration": "1ba",
}


def yaml_blocks() -> list[tuple[str, str]]:
    """(page and block number, the block's text) of every ```yaml block."""
    return [
        (f"{page.relative_to(ROOT)}[{index}]", block)
        for page in PAGES
        for index, block in enumerate(re.findall(r"^```ya?ml\n(.*?)^```", page.read_text(), re.M | re.S))
    ]


def test_the_pages_have_yaml_blocks():
    assert len(yaml_blocks()) >= 5


@pytest.mark.parametrize(("where", "block"), yaml_blocks(), ids=[where for where, _ in yaml_blocks()])
def test_yaml_block_parses_and_a_recipe_passes_the_recipe_checks(where, block):
    from composer.config.manifest import load_trainer_schema
    from composer.config.recipe_schema import schema_problems

    data = yaml.safe_load(block)  # a YAML error fails here, naming the block
    keys = set(load_trainer_schema()["fields"])
    if not (isinstance(data, dict) and data and set(data) <= keys):
        return  # not a recipe: parsing it is the check
    recipe = {**WHOLE, **data}
    assert not schema_problems(recipe), f"{where}: {[str(p) for p in schema_problems(recipe)]}"
    from composer.config import TrainerHparams

    TrainerHparams.from_dict(recipe)  # raises ConfigError naming every problem


def test_the_check_finds_a_bad_block():
    from composer.config.recipe_schema import schema_problems

    with pytest.raises(yaml.YAMLError):  # the exporting guide's mistake: braces inside a {...} mapping
        yaml.safe_load("callbacks:\n  export_for_inference: {save_path: exports/{run_name}/model}\n")
    assert schema_problems({**WHOLE, "callbacks": {"lr_monitr": {}}})
