"""Overrides on the command line take the list form of algorithms (and the other sets) as the recipe file does."""

from __future__ import annotations

import yaml

from composer.cli.__main__ import main
from tests.cli.recipes import IMAGE_RECIPE


def _printed_algorithms(capsys, recipe, *overrides) -> dict:
    assert main(["train", "-f", str(recipe), *overrides, "--print-config"]) == 0, capsys.readouterr().err
    return yaml.safe_load(capsys.readouterr().out)["algorithms"]


def test_a_list_of_algorithms_replaces_the_recipes_mapping_and_trains(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(IMAGE_RECIPE + "algorithms: {label_smoothing: {alpha: 0.1}}\n")
    algorithms = _printed_algorithms(capsys, recipe, "algorithms=[blurpool, channels_last]")
    assert list(algorithms) == ["blurpool", "channels_last"]  # as any list does, it replaces: no label_smoothing
    assert main(["train", "-f", str(recipe), "algorithms=[blurpool, {mixup: {alpha: 0.3}}]"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    # MixUp has no default alpha (MixUp(alpha)): the plain name gets the usual one-line error, not OmegaConf's.
    assert main(["train", "-f", str(recipe), "algorithms=[blurpool, mixup]"]) == 2
    assert "algorithms.mixup: Invalid MixUpHparams: required field 'alpha' is missing" in capsys.readouterr().err


def test_a_dotted_override_adds_to_the_recipes_list(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(IMAGE_RECIPE + "algorithms: [blurpool, {mixup: {alpha: 0.1}}]\n")
    algorithms = _printed_algorithms(
        capsys, recipe, "algorithms.mixup.alpha=0.3", "algorithms.label_smoothing.alpha=0.2"
    )
    assert list(algorithms) == ["blurpool", "mixup", "label_smoothing"]
    assert (algorithms["mixup"]["alpha"], algorithms["label_smoothing"]["alpha"]) == (0.3, 0.2)
    assert list(_printed_algorithms(capsys, recipe, "algorithms.blurpool=false")) == ["mixup"]
