"""The command's contract for recipes with problems: exit 2 and one message listing every problem by its recipe key.

Each message names the key as the recipe spells it (never the Trainer's internal argument), the value, what was
expected and the fix, without a traceback; nothing starts training.
"""

from __future__ import annotations

import pytest

from composer.cli.__main__ import main
from tests.cli.recipes import write_recipe


def _refused(capsys, argv: list[str]) -> list[str]:
    """Runs ``composer`` expecting exit 2; the lines of its message (stdout stays empty)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.startswith(f"composer {argv[0]}: error: ")
    return captured.err.removeprefix(f"composer {argv[0]}: error: ").splitlines()


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("seed=-1", "seed: received -1; expected an integer in [0, 4294967295]"),
        ("seed=1099511627776", "seed: received 1099511627776; expected an integer in [0, 4294967295]"),
        ("grad_clip_norm=.nan", "grad_clip_norm: received nan; expected a finite number > 0"),
        ("train_batch_size=true", "train_batch_size: received True (bool); expected int (a bool is not a number"),
        ("max_duration=true", "max_duration: received True (bool); expected str or int (a bool is not a number"),
        ("scale_schedule_ratio=true", "scale_schedule_ratio: received True (bool); expected float or int (a bool"),
        ("save_num_checkpoints_to_keep=-5", "save_num_checkpoints_to_keep: received -5; expected the number of"),
        ("eval_subset_num_batches=0", "eval_subset_num_batches: received 0; expected an integer >= 1"),
        ("grad_accum=9", "grad_accum: received 9, more microbatches than the 8 samples of a batch"),
        ("device=tpu", "device: received 'tpu': Unknown device 'tpu'; expected 'cpu'"),
    ],
)
def test_a_bad_value_exits_2_naming_its_recipe_key(tmp_path, capsys, override, expected):
    folder = tmp_path / "ckpt"
    lines = _refused(capsys, ["train", "-f", str(write_recipe(tmp_path)), override, f"save_folder={folder}"])
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert "Set " in lines[0] or "expected" in lines[0]  # says what to write instead
    assert "Evaluator" not in lines[0] and "num_checkpoints_to_keep=" not in lines[0]  # not the Trainer's names
    assert not folder.exists()  # nothing started


@pytest.mark.parametrize(
    ("override", "keys", "detail"),
    [
        (
            "model.mlp.in_features=15",
            "model.mlp.in_features and train_dataset.synthetic_classification.shape",
            "Set model.mlp.in_features: 16",
        ),
        (
            "model.mlp.num_classes=5",
            "model.mlp.num_classes and train_dataset.synthetic_classification.num_classes",
            "Set model.mlp.num_classes to 10 or more",
        ),
        (
            "eval_dataset.synthetic_classification.shape=[17]",
            "model.mlp.in_features and eval_dataset.synthetic_classification.shape",
            "first input of shape [17]",
        ),
    ],
)
def test_a_model_and_data_that_do_not_fit_exit_2_naming_both_keys(tmp_path, capsys, override, keys, detail):
    folder = tmp_path / "ckpt"
    lines = _refused(capsys, ["train", "-f", str(write_recipe(tmp_path)), override, f"save_folder={folder}"])
    problems = [line.strip() for line in lines if keys in line]
    assert problems and problems[0].startswith(f"{keys}: do not fit: ") and detail in problems[0], lines
    assert not folder.exists()  # refused before the Trainer was built


def test_every_problem_of_a_recipe_is_listed_in_one_message(tmp_path, capsys):
    recipe = tmp_path / "typos.yaml"
    recipe.write_text(
        write_recipe(tmp_path)
        .read_text()
        .replace("optimizer: {sgd: {lr: 0.1}}", "optimizer: {sgd: {lr: 0.1, momentun: 0.9}}")
        + "eval_intervl: 1ep\nalgorithms: {mixupp: {alpha: 0.2}}\n"
    )
    lines = _refused(capsys, ["train", "-f", str(recipe), "seed=-3", "progress_bar"])
    # The keys, names and types are checked first, without torch (composer.config.recipe_schema): all in one message.
    assert lines[0] == "4 problems in the recipe:"
    located = [line.strip().split(":", 1)[0] for line in lines[1:]]
    assert located == ["progress_bar", "optimizer.sgd", "eval_intervl", "algorithms.mixupp"]
    assert (
        "'momentun'" in lines[2] and "Did you mean 'eval_interval'?" in lines[3] and "Did you mean 'mixup'" in lines[4]
    )
    # Once those are right, the values, all in one message too.
    lines = _refused(capsys, ["train", "-f", str(write_recipe(tmp_path)), "seed=-3", "train_batch_size=0"])
    assert [line.strip().split(":", 1)[0] for line in lines] == ["2 problems in the recipe", "train_batch_size", "seed"]


def test_eval_without_load_path_is_refused_unless_random_init_is_asked_for(tmp_path, capsys):
    recipe = str(write_recipe(tmp_path))
    (line,) = _refused(capsys, ["eval", "-f", recipe])
    assert line.startswith("load_path: not set, so composer eval would score the model's random initial weights")
    assert "--random-init" in line
    lines = _refused(capsys, ["eval", "-f", recipe, "seed=-1"])  # listed with the recipe's own problems
    assert lines[0] == "2 problems in the recipe:" and [line.split(":")[0].strip() for line in lines[1:]] == [
        "seed",
        "load_path",
    ]
    assert main(["eval", "-f", recipe, "--random-init"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "checkpoint: none (--random-init: the model's initial weights)"
    assert out[1].startswith("metrics/eval/Accuracy: ")
