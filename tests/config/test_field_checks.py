"""The checks of a recipe's values: strict numbers, ranges, every problem at once, each at its recipe key."""

from __future__ import annotations

import dataclasses

import pytest

from composer.config import ConfigError, TrainerHparams, load_recipe
from composer.trainer.arguments import SEED_LIMIT
from tests.config.test_trainer_hparams import TINY

_NUMERIC = [
    "train_batch_size",
    "max_duration",
    "eval_batch_size",
    "seed",
    "grad_accum",
    "grad_clip_norm",
    "scale_schedule_ratio",
    "eval_interval",
    "eval_subset_num_batches",
    "train_subset_num_batches",
    "save_interval",
    "save_num_checkpoints_to_keep",
    "dist_timeout",
]


def _problems(**change: object) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict({**TINY, **change})
    return info.value.problems


@pytest.mark.parametrize("field", _NUMERIC)
def test_a_bool_is_not_a_number(field):
    ((where, message),) = _problems(**{field: True})
    assert (
        where == field and message.startswith("received True (bool); expected ") and "a bool is not a number" in message
    )


def test_a_bool_is_not_a_number_in_any_entry_either():
    recipe = {**TINY, "model": {"mlp": {"in_features": True, "hidden": [8], "num_classes": False}}}
    ((where, message),) = _problems(**recipe)
    assert where == "model.mlp" and message == (
        "Invalid MLPHparams: field 'in_features' received True (bool) but expects int (a bool is not a number here); "
        "field 'num_classes' received False (bool) but expects int (a bool is not a number here)."
    )
    ((where, message),) = _problems(algorithms={"mixup": {"alpha": True, "beta": 1}})
    assert where == "algorithms.mixup" and "'alpha' received True (bool)" in message and "['beta']" in message


def test_numbers_keep_their_types_and_ints_are_floats():
    config = TrainerHparams.from_dict({**TINY, "scale_schedule_ratio": 2, "grad_clip_norm": 1, "dist_timeout": 30})
    assert config.scale_schedule_ratio == 2 and config.grad_clip_norm == 1 and config.dist_timeout == 30


@pytest.mark.parametrize("seed", [0, SEED_LIMIT - 1, None])
def test_the_seed_range_is_numpys(seed):
    assert TrainerHparams.from_dict({**TINY, "seed": seed}).seed == seed


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        ({"seed": -1}, "seed", "received -1; expected an integer in [0, 4294967295]"),
        ({"seed": SEED_LIMIT}, "seed", "received 4294967296; expected an integer in [0, 4294967295]"),
        ({"grad_clip_norm": float("nan")}, "grad_clip_norm", "received nan; expected a finite number > 0"),
        ({"grad_clip_norm": float("inf")}, "grad_clip_norm", "received inf; expected a finite number > 0"),
        ({"scale_schedule_ratio": float("inf")}, "scale_schedule_ratio", "received inf; expected a finite number"),
        ({"save_num_checkpoints_to_keep": 0}, "save_num_checkpoints_to_keep", "received 0; expected the number"),
        ({"train_subset_num_batches": 0}, "train_subset_num_batches", "received 0; expected an integer >= 1"),
        ({"eval_interval": 0}, "eval_interval", "received 0; expected a positive time"),
        ({"max_duration": "0.5dur"}, "max_duration", "received '0.5dur', a fraction of the run"),
        ({"grad_accum": 5}, "grad_accum", "received 5, more microbatches than the 4 samples of a batch"),
        ({"dist_timeout": -1}, "dist_timeout", "received -1; expected a finite number > 0"),
        ({"device": "tpu"}, "device", "received 'tpu': Unknown device 'tpu'"),
        (
            {"max_duration": "2ba", "scale_schedule_ratio": 0.1},
            "max_duration and scale_schedule_ratio",
            "max_duration '2ba' times scale_schedule_ratio 0.1 rounds down to zero",
        ),
    ],
)
def test_values_out_of_range_are_located_at_their_key(change, where, message):
    ((located, text),) = _problems(**change)
    assert located == where and text.startswith(message), text


def test_every_problem_is_reported_in_recipe_order():
    data = {
        "seed": -1,
        **{key: value for key, value in TINY.items() if key != "seed"},
        "optimiser": {"sgd": {}},
        "algorithms": {"mixupp": {}, "label_smoothing": {"alpha": "x"}},
        "train_batch_size": "many",
        "grad_clip_norm": float("nan"),
    }
    del data["model"]
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict(data)
    located = [where for where, _ in info.value.problems]
    assert located == [
        "seed",
        "train_batch_size",
        "algorithms.mixupp",
        "algorithms.label_smoothing",
        "optimiser",
        "grad_clip_norm",
        "model",
    ]
    assert str(info.value).startswith("7 problems in the recipe:\n  seed: received -1;")
    assert info.value.where == ""


def test_overrides_and_the_recipe_are_reported_together(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("model: {mlp: {in_features: 16}}\ntrain_dataset: synthetic_classification\nmax_duration: 1ba\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["seed", "train_batch_size=0", "model.mlp.hidden=[1,2"])
    assert [where for where, _ in info.value.problems] == ["seed", "model.mlp.hidden=[1,2", "train_batch_size"]


def test_a_list_that_does_not_compose_is_refused_with_the_malformed_overrides(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("algorithms: {ema: {}, swa: {}}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["seed"])
    assert [where for where, _ in info.value.problems] == ["seed", "algorithms"]


def test_the_trainers_own_checks_are_located_at_the_recipe_key():
    # A value the Trainer's arguments check (trainer/arguments.py) is refused as the recipe is read, at its key.
    with pytest.raises(ConfigError, match=r"^autoresume: autoresume=True needs save_folder") as info:
        TrainerHparams.from_dict({**TINY, "autoresume": True})
    assert info.value.where == "autoresume"
    warmup = {"cosine_decay_with_warmup": {"warmup_time": "3ba"}}
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict({**TINY, "schedulers": warmup}).initialize_object()
    assert info.value.where == "schedulers.cosine_decay_with_warmup" and "warmup_time=" in info.value.message
    with pytest.raises(ConfigError, match=r"^load_path: No checkpoint at nowhere/model\.pt"):
        TrainerHparams.from_dict({**TINY, "load_path": "nowhere/model.pt"}).initialize_object()


def test_assignment_is_checked_too():
    config = TrainerHparams.from_dict(TINY)
    with pytest.raises(ValueError, match=r"seed: received 4294967296"):
        config.seed = SEED_LIMIT
    with pytest.raises(ValueError, match=r"'train_batch_size' received True"):
        config.train_batch_size = True
    assert dataclasses.replace(config, seed=7).seed == 7 and config.seed == 0


def test_a_large_momentum_warns_and_a_non_finite_learning_rate_is_refused(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(
        "model: {mlp: {in_features: 16}}\ntrain_dataset: synthetic_classification\ntrain_batch_size: 4\n"
        "max_duration: 1ba\noptimizer: {sgd: {lr: 0.1}}\n"
    )
    with pytest.warns(UserWarning, match=r"SGDHparams momentum=152\.0 is outside \[0, 1\).*almost surely a typo"):
        assert load_recipe(path, ["optimizer.sgd.momentum=152"]).optimizer.momentum == 152
    with pytest.raises(ConfigError, match=r"^optimizer\.sgd: Invalid SGDHparams: lr=nan must be a finite number >= 0"):
        load_recipe(path, ["optimizer.sgd.lr=.nan"])


def test_grad_accum_auto_reaches_the_trainer():
    config = TrainerHparams.from_dict({**TINY, "grad_accum": "auto"})
    assert config.grad_accum == "auto"
    trainer = config.initialize_object()
    try:
        assert trainer._microbatching.auto and trainer.state.grad_accum == 1
    finally:
        trainer.close()


def test_a_grad_accum_word_other_than_auto_names_the_choices():
    ((where, message),) = _problems(grad_accum="automatic")
    assert where == "grad_accum"
    assert message.startswith("received 'automatic'; expected an integer >= 1 (the microbatches per batch) or auto")
    assert "Set grad_accum: auto" in message
