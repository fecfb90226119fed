"""The composer command: train, eval, list, and one-line errors with exit code 2 for the user's mistakes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from composer.cli.__main__ import STREAM_FAILED, main
from composer.config import REGISTRIES, load_recipe
from tests.cli.recipes import IMAGE_RECIPE, write_recipe
from tests.datasets.cifar_archive import write_cifar_archive


def test_train_prints_the_final_metrics(tmp_path, capsys):
    assert main(["train", "-f", str(write_recipe(tmp_path)), "max_duration=3ba"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("metrics/eval/Accuracy: ") and lines[1].startswith("metrics/eval/CrossEntropy: ")


def test_print_config_applies_overrides_and_reads_back(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert main(["train", "-f", str(recipe), "algorithms.mixup.alpha=0.3", "--print-config"]) == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    assert load_recipe(printed) == load_recipe(recipe, ["algorithms.mixup.alpha=0.3"])


def test_eval_reads_a_checkpoint(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert main(["train", "-f", str(recipe), f"save_folder={tmp_path / 'ckpt'}", "run_name=tiny"]) == 0
    trained = capsys.readouterr().out
    checkpoint = tmp_path / "ckpt" / "latest-rank0.pt"
    assert checkpoint.exists()
    assert main(["eval", "-f", str(recipe), f"load_path={checkpoint}", "load_weights_only=true"]) == 0
    scored = capsys.readouterr().out.splitlines()
    assert scored[0].startswith(f"checkpoint: {checkpoint} (epoch ") and scored[0].endswith(", batch 2)")
    assert scored[1:] == trained.splitlines()  # the trained weights give the same metrics


def test_list_has_a_line_for_every_registered_name(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for kind, registry in REGISTRIES.items():
        assert f"{kind}:\n" in out
        for name in registry:
            line = next(line for line in out.splitlines() if line.split()[:1] == [name])
            assert len(line.split(maxsplit=1)) == 2  # the name and a description
    assert main(["list", "schedulers"]) == 0
    assert capsys.readouterr().out.startswith("schedulers:\n")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["algorithms.mixupp.alpha=0.2"], "algorithms.mixupp: unknown algorithm 'mixupp'. Did you mean 'mixup'?"),
        (
            ["algorithms.cutout={n_holes: 1}"],
            "algorithms.cutout: Invalid CutOutHparams: required field 'length' is missing",
        ),
        (["train_batch_size=big"], "train_batch_size: received 'big' (str); expected int"),
        (["algorithms.mixup.alpha=[1]"], "algorithms.mixup: Invalid MixUpHparams: field 'alpha' received [1] (list)"),
        (["model=resnet"], "model.resnet: unknown model 'resnet'"),
        (["seed"], "seed: an override must be KEY=VALUE"),
    ],
)
def test_config_mistakes_exit_2_with_one_line(tmp_path, capsys, overrides, expected):
    assert main(["train", "-f", str(write_recipe(tmp_path)), *overrides]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("composer train: error: ") and expected in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_missing_required_field_exits_2(tmp_path, capsys):
    recipe = tmp_path / "no_model.yaml"
    recipe.write_text(write_recipe(tmp_path).read_text().replace("model: {mlp: {in_features: 16, hidden: [8]}}", ""))
    assert main(["train", "-f", str(recipe)]) == 2
    assert "error: model: required field is missing. Choose one of [" in capsys.readouterr().err


def test_data_path_mistakes_exit_2_naming_the_file(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    nowhere = tmp_path / "nowhere"
    assert (
        main(
            [
                "train",
                "-f",
                str(recipe),
                "train_dataset={cifar10: {path: " + str(nowhere) + "}}",
                "train_dataset.synthetic_classification=false",
            ]
        )
        == 2
    )
    assert f"train_dataset.cifar10: CIFAR-10 path '{nowhere}' does not exist" in capsys.readouterr().err
    text = tmp_path / "notes.txt"
    text.write_text("not CIFAR")
    assert (
        main(
            [
                "eval",
                "-f",
                str(recipe),
                "eval_dataset.synthetic_classification=false",
                f"eval_dataset.cifar10.path={text}",
            ]
        )
        == 2
    )
    assert f"eval_dataset.cifar10: CIFAR-10 path '{text}' is not a readable tar archive" in capsys.readouterr().err
    assert main(["train", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: the recipe file does not exist" in capsys.readouterr().err


def test_real_cifar_archive_trains(tmp_path, capsys):
    archive = write_cifar_archive(tmp_path, num_classes=10, per_batch=4)
    overrides = [
        "model={simple_cnn: {in_channels: 3, widths: [4]}}",
        "model.mlp=false",
        "train_dataset.synthetic_classification=false",
        "eval_dataset.synthetic_classification=false",
        f"train_dataset.cifar10.path={archive}",
        f"eval_dataset.cifar10.path={archive}",
    ]
    assert main(["train", "-f", str(write_recipe(tmp_path)), *overrides]) == 0
    assert "metrics/eval/Accuracy" in capsys.readouterr().out


@pytest.mark.slow  # two fresh interpreters importing torch and torchmetrics: seconds each
def test_the_module_runs_as_a_command(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "composer.cli", "list", "loggers"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("loggers:")
    bad = subprocess.run(
        [sys.executable, "-m", "composer.cli", "train", "-f", str(write_recipe(tmp_path)), "algorithms.nope.x=1"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("composer train: error: algorithms.nope: unknown algorithm 'nope'")


def test_a_list_that_does_not_compose_exits_2_before_training(tmp_path, capsys):
    recipe = write_recipe(tmp_path, extra="algorithms: {ema: {half_life: 2ba}, swa: {}}\n")
    assert main(["train", "-f", str(recipe), f"save_folder={tmp_path / 'ckpt'}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err and captured.err.count("\n") == 1
    assert captured.err.startswith("composer train: error: algorithms: EMA and SWA do not compose: ")
    assert not (tmp_path / "ckpt").exists()  # nothing started


def test_recipe_check_refuses_without_importing_torch(tmp_path):
    recipe = write_recipe(tmp_path, extra="algorithms: {swa: {}, ema: {}}\n")
    code = (
        "import sys\n"
        "from composer.config import ConfigError\n"
        "from composer.config.recipe import load_recipe\n"
        "try:\n"
        f"    load_recipe({str(recipe)!r})\n"
        "except ConfigError as error:\n"
        "    print(error.where, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["algorithms", "False"]


@pytest.mark.parametrize("order", ["label_smoothing, mixup", "mixup, label_smoothing", "cutmix, mixup"])
def test_recipes_that_compose_train_in_either_order(tmp_path, capsys, order):
    entries = {"label_smoothing": "{alpha: 0.1}", "mixup": "{alpha: 0.2}", "cutmix": "{alpha: 1.0}"}
    algorithms = ", ".join(f"{name}: {entries[name]}" for name in order.split(", "))
    recipe = tmp_path / "image.yaml"
    recipe.write_text(IMAGE_RECIPE + f"algorithms: {{{algorithms}}}\n")
    assert main(["train", "-f", str(recipe)]) == 0, capsys.readouterr().err


def test_train_evaluates_once_at_the_end_and_prints_those_metrics(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert (
        main(["train", "-f", str(recipe), "max_duration=1ep", "progress_bar=true"]) == 0
    )  # 4 batches, evaluated at the epoch's end
    captured = capsys.readouterr()
    eval_lines = [line for line in captured.err.splitlines() if line.startswith("Eval")]
    assert len(eval_lines) == 1, captured.err
    accuracy = float(captured.out.splitlines()[0].split(": ")[1])
    assert f"Accuracy={accuracy:.4f}" in eval_lines[0]


def test_train_evaluates_after_fit_when_fit_did_not_end_with_an_evaluation(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert (
        main(["train", "-f", str(recipe), "max_duration=3ba", "progress_bar=true"]) == 0
    )  # eval_interval 1ep: none during fit
    captured = capsys.readouterr()
    assert len([line for line in captured.err.splitlines() if line.startswith("Eval")]) == 1
    assert captured.out.splitlines()[0].startswith("metrics/eval/Accuracy: ")


def test_a_shard_unreadable_mid_epoch_ends_composer_train_with_one_line_and_status_1(tmp_path, capsys, monkeypatch):
    from composer.datasets.streaming import stream_error
    from composer.trainer import Trainer

    worker_failure = OSError("Traceback (most recent call last):\n  ...\nFileNotFoundError: chunk-0-5.bin is gone")

    def fail(self, *args, **kwargs):  # what StreamLoader raises when a worker cannot read a shard
        raise stream_error(
            worker_failure, "train_dataset.streaming.path", "s3://b/p", ["chunk-0-4.bin", "chunk-0-5.bin"]
        )

    monkeypatch.setattr(Trainer, "fit", fail)
    assert main(["train", "-f", str(write_recipe(tmp_path))]) == STREAM_FAILED == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "composer train: error: train_dataset.streaming.path: reading shard chunk-0-5.bin of s3://b/p failed "
        "(FileNotFoundError: chunk-0-5.bin is gone); the run stops there."
    )
    assert err.count("\n") == 1 and "Traceback" not in err
