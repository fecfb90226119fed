"""Recipes from YAML with command-line overrides (OmegaConf dotlists), and their file and override errors."""

from __future__ import annotations

import pytest

from composer.config import ConfigError, load_config, load_recipe

RECIPE = """
model: {mlp: {in_features: 16, hidden: [8]}}
train_dataset: {synthetic_classification: {shape: [16], num_samples: 16}}
train_batch_size: 4
eval_batch_size: ${train_batch_size}
max_duration: 2ba
optimizer: {decoupled_sgdw: {lr: 0.1}}
algorithms:
  mixup: {alpha: 0.2}
  label_smoothing: {alpha: 0.1}
"""


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE)
    return path


def test_overrides_reach_nested_keys_and_add_entries(recipe):
    config = load_recipe(
        recipe,
        [
            "algorithms.mixup.alpha=0.3",
            "model.mlp.hidden=[32,16]",
            "optimizer.decoupled_sgdw.momentum=0.9",
            "algorithms.cutout={n_holes: 1, length: 4}",
            "max_duration=3ep",
            "seed=7",
        ],
    )
    assert config.algorithms["mixup"].alpha == 0.3
    assert list(config.algorithms) == ["mixup", "label_smoothing", "cutout"]
    assert config.model.hidden == [32, 16] and config.optimizer.momentum == 0.9
    assert config.max_duration == "3ep" and config.seed == 7
    assert config.eval_batch_size == 4  # ${train_batch_size} resolves


def test_overrides_apply_in_order_and_can_remove_and_switch(recipe):
    config = load_recipe(recipe, ["algorithms.mixup=false", "train_batch_size=8", "train_batch_size=2"])
    assert list(config.algorithms) == ["label_smoothing"] and config.eval_batch_size == 2
    switched = load_recipe(recipe, ["model.mlp=false", "model.simple_cnn.in_channels=1"])
    assert type(switched.model).__name__ == "SimpleCNNHparams" and switched.model.in_channels == 1
    assert type(load_recipe(recipe, ["model=gpt"]).model).__name__ == "GPTHparams"


def test_overrides_without_a_file(recipe):
    data = load_config(None, ["a.b=1", "c=[x, y]"])
    assert data == {"a": {"b": 1}, "c": ["x", "y"]}


def test_file_and_override_errors(recipe, tmp_path):
    with pytest.raises(ConfigError, match=r"nowhere\.yaml: the recipe file does not exist"):
        load_recipe(tmp_path / "nowhere.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: {mlp: [\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: is not a valid YAML recipe"):
        load_recipe(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_recipe(listed)
    with pytest.raises(ConfigError, match=r"^seed: an override must be KEY=VALUE"):
        load_recipe(recipe, ["seed"])
    with pytest.raises(ConfigError, match=r"cannot parse the overrides"):
        load_recipe(recipe, ["model.mlp.hidden=[1,2"])
    with pytest.raises(ConfigError, match=r"^algorithms\.mixup: .*'alpha' received 'x' \(str\)"):
        load_recipe(recipe, ["algorithms.mixup.alpha=x"])
