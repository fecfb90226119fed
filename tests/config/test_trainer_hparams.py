"""TrainerHparams: the YAML form of polymorphic fields, round trips, building the Trainer, and located errors."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from composer.config import ConfigError, TrainerHparams, load_recipe, to_yaml
from composer.config.trainer_hparams import _SETS
from composer.core.hparams import field_docs
from composer.trainer import Trainer

TINY = {
    "model": {"mlp": {"in_features": 16, "hidden": [8]}},
    "train_dataset": {"synthetic_classification": {"shape": [16], "num_samples": 16}},
    "eval_dataset": {"synthetic_classification": {"shape": [16], "num_samples": 8}},
    "train_batch_size": 4,
    "max_duration": "2ba",
    "optimizer": {"sgd": {"lr": 0.1}},
    "schedulers": {"cosine_decay_with_warmup": {"warmup_time": "1ba"}},
    "algorithms": {"mixup": {"alpha": 0.2}, "label_smoothing": {"alpha": 0.1}},  # MixUp must come first
    "callbacks": {"lr_monitor": {}},
    "loggers": {"in_memory": {}},
    "progress_bar": False,
    "seed": 0,
}


def test_full_round_trip_through_yaml(tmp_path):
    config = TrainerHparams.from_dict(TINY)
    path = tmp_path / "recipe.yaml"
    path.write_text(to_yaml(config))
    assert load_recipe(path) == config
    assert list(config.to_dict()["algorithms"].items()) == [
        ("mixup", {"alpha": 0.2}),
        ("label_smoothing", {"alpha": 0.1}),
    ]


def test_builds_a_trainer_that_trains():
    trainer = TrainerHparams.from_dict(TINY).initialize_object()
    assert isinstance(trainer, Trainer)
    assert [type(a).__name__ for a in trainer.state.algorithms] == ["MixUp", "LabelSmoothing"]  # in recipe order
    assert type(trainer.state.optimizers[0]).__name__ == "SGD" and trainer.seed == 0
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2
    assert 0.0 <= trainer.eval()["metrics/eval/Accuracy"] <= 1.0
    trainer.close()


def test_the_seed_fixes_the_model_initialization():
    weights = []
    for seed in (3, 3, 4):
        trainer = TrainerHparams.from_dict({**TINY, "seed": seed}).initialize_object()
        weights.append(next(trainer.state.model.parameters()).detach().clone())
        trainer.close()
    assert weights[0].equal(weights[1]) and not weights[0].equal(weights[2])


def test_names_lists_and_empty_entries_are_accepted():
    config = TrainerHparams.from_dict(
        {
            **TINY,
            "model": "gpt",
            "train_dataset": "python_docs",
            "eval_dataset": None,
            "algorithms": ["channels_last", {"label_smoothing": {"alpha": 0.2}}],
            "callbacks": {"nan_monitor": None},
        }
    )
    assert type(config.model).__name__ == "GPTHparams"
    assert list(config.algorithms) == ["channels_last", "label_smoothing"]
    assert list(config.callbacks) == ["nan_monitor"]
    without = TrainerHparams.from_dict({**TINY, "algorithms": {**TINY["algorithms"], "mixup": False}})
    assert list(without.algorithms) == ["label_smoothing"]  # false removes an entry


def test_trainer_fields_match_the_trainer_defaults():
    parameters = inspect.signature(Trainer).parameters
    config = TrainerHparams.from_dict(
        {k: TINY[k] for k in ("model", "train_dataset", "train_batch_size")} | {"max_duration": 1}
    )
    for name, value in config.to_dict().items():
        if name in parameters and name not in ("model", "max_duration", "seed", *_SETS):
            default = parameters[name].default
            assert value == default or (name == "precision" and value == default.value), name


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (
            {"algorithms": {"mixupp": {"alpha": 0.2}}},
            "algorithms.mixupp",
            r"unknown algorithm 'mixupp'\. Did you mean 'mixup'",
        ),
        ({"algorithms": {"mixup": {}}}, "algorithms.mixup", r"required field 'alpha' is missing"),
        (
            {"algorithms": {"mixup": {"alpha": "high"}}},
            "algorithms.mixup",
            r"'alpha' received 'high' \(str\) but expects float",
        ),
        ({"algorithms": {"mixup": {"alpha": 0.2, "beta": 1}}}, "algorithms.mixup", r"unknown key\(s\) \['beta'\]"),
        ({"algorithms": {"mixup": 0.2}}, "algorithms.mixup", r"expected a mapping of MixUpHparams fields \['alpha'\]"),
        ({"model": {"mlp": {"in_features": 16}, "gpt": {}}}, "model", r"expected one model .* got \['gpt', 'mlp'\]"),
        ({"model": {"resnet": {}}}, "model.resnet", r"unknown model 'resnet'.*'cifar_resnet'"),
        ({"train_batch_size": "many"}, "train_batch_size", r"received 'many' \(str\); expected int"),
        ({"max_duration": "ten epochs"}, "max_duration", r"received 'ten epochs', which is not a time"),
        ({"precision": "fp8"}, "precision", r"received 'fp8'; expected one of \['fp32', 'amp', 'bf16'\]"),
        ({"ddp_sync_strategy": "sometimes"}, "ddp_sync_strategy", r"received 'sometimes'; .*'single_auto_sync'"),
        ({"optimiser": {"sgd": {"lr": 0.1}}}, "optimiser", r"unknown key\. Did you mean 'optimizer'"),
        (
            {"schedulers": [{"cosine_decay_with_warmup": {}}]},
            "schedulers.cosine_decay_with_warmup",
            "'warmup_time' is missing",
        ),
    ],
)
def test_mistakes_name_the_key_path_the_value_and_the_choices(change, where, message):
    with pytest.raises(ConfigError, match=message) as info:
        TrainerHparams.from_dict({**TINY, **change})
    assert info.value.where == where


def test_a_missing_required_field_lists_the_choices():
    data = {k: v for k, v in TINY.items() if k != "model"}
    with pytest.raises(ConfigError, match=r"^model: required field is missing\. Choose one of \[.*'simple_cnn'"):
        TrainerHparams.from_dict(data)


def test_building_errors_are_located(tmp_path):
    missing = {**TINY, "train_dataset": {"cifar10": {"path": str(tmp_path / "nowhere")}}}
    with pytest.raises(ConfigError, match=r"^train_dataset\.cifar10: CIFAR-10 path .*nowhere' does not exist"):
        TrainerHparams.from_dict(missing).initialize_object()
    (tmp_path / "notes.txt").write_text("not an archive")
    wrong = {**TINY, "eval_dataset": {"cifar10": {"path": str(tmp_path / "notes.txt")}}}
    with pytest.raises(ConfigError, match=r"^eval_dataset\.cifar10: .*notes.txt' is not a readable tar archive"):
        TrainerHparams.from_dict(wrong).initialize_object()


def test_distributed_fields_reach_the_trainer():
    trainer = TrainerHparams.from_dict(
        {**TINY, "ddp_sync_strategy": "multi_auto_sync", "dist_timeout": 30}
    ).initialize_object()
    assert trainer.parallel.sync_strategy.value == "multi_auto_sync"
    trainer.close()


def test_compile_config_reaches_the_trainer_and_its_mistakes_are_located():
    trainer = TrainerHparams.from_dict({**TINY, "compile_config": {"backend": "eager"}}).initialize_object()
    assert trainer.compilation is not None and trainer.compilation.options["backend"] == "eager"
    trainer.close()
    with pytest.raises(ConfigError, match=r"^compile_config: .*'backnd'.*Did you mean 'backend'"):
        TrainerHparams.from_dict({**TINY, "compile_config": {"backnd": "eager"}}).initialize_object()
    with pytest.raises(ConfigError, match=r"^compile_config: received 'yes'"):
        TrainerHparams.from_dict({**TINY, "compile_config": "yes"})


class LoudTrainer(Trainer):
    """A Trainer with one keyword more.

    Args:
        volume (int): How loud the run is, in decibels.
    """

    def __init__(self, *, volume: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.volume = volume


def test_a_new_trainer_keyword_is_a_recipe_key_with_its_type_and_doc() -> None:
    """Signature and docstring are the only edits: the config, its type check and its doc follow from them."""
    config_class = TrainerHparams.for_trainer(LoudTrainer)
    recipe = {
        "model": {"mlp": {"in_features": 64, "hidden": [32]}},
        "train_dataset": {"synthetic_classification": {"shape": [64], "num_samples": 32}},
        "train_batch_size": 8,
        "max_duration": "2ba",
        "progress_bar": False,
    }
    assert field_docs(config_class)["volume"] == "How loud the run is, in decibels."
    assert "volume: How loud the run is, in decibels." in (config_class.__doc__ or "")
    with pytest.raises(ConfigError, match=r"^volume: received 'x' \(str\); expected int\. Set volume: 3\.$"):
        config_class.from_dict({**recipe, "volume": "x"})
    with pytest.raises(ConfigError, match=r"volume: received True \(bool\); expected int \(a bool is not a number"):
        config_class.from_dict({**recipe, "volume": True})
    config = config_class.from_dict({**recipe, "volume": 7})
    assert config.to_dict()["volume"] == 7 and config_class.from_dict(config.to_dict()) == config
    trainer = config.initialize_object()
    assert isinstance(trainer, LoudTrainer) and trainer.volume == 7
    trainer.close()


def test_the_trainer_fields_are_its_keywords() -> None:
    """Every keyword of Trainer.__init__ a recipe can give is a field, with the Trainer's default and doc."""
    parameters = inspect.signature(Trainer).parameters
    fields = {field.name: field for field in dataclasses.fields(TrainerHparams)}
    built_from_other_keys = {"model", "train_dataloader", "eval_dataloader", "optimizers"}
    assert {name for name in parameters if name not in built_from_other_keys} <= set(fields)
    docs = field_docs(TrainerHparams)
    assert docs["save_interval"].startswith("How often to save") and docs["train_batch_size"]
    assert fields["grad_accum"].default == 1 and fields["precision"].default == "fp32"
    assert fields["ddp_sync_strategy"].default == "single_auto_sync"  # the enum default, as a recipe writes it
