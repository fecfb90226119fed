"""Every recipe in recipes/ parses, builds its Trainer and trains 2 batches of 2 on synthetic data of its input shape.

The CIFAR recipe also reads a small archive written in the standard format, through its real data path.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from composer.config import load_recipe
from composer.core.time import Time, TimeUnit
from tests.datasets.cifar_archive import write_cifar_archive

RECIPES = sorted((Path(__file__).parents[2] / "recipes").glob("*.yaml"))
# The ResNet-50 recipe runs a 224x224 ResNet-50: seconds, not milliseconds, on a CPU.
SLOW = {"imagenet_resnet50"}

# Run anywhere, quickly, and leave nothing behind: CPU, fp32, no checkpoints, no progress bar.
_PORTABLE = ["device=cpu", "precision=fp32", "save_folder=null", "autoresume=false", "progress_bar=false"]


def _two_batches(config):
    """The recipe on 4 synthetic samples in batches of 2, its schedule scaled down to 2 batches.

    Scaling the schedule (rather than setting max_duration=2ba) keeps every time in the recipe consistent: an 8-epoch
    warmup of a 90-epoch run shrinks with it. Durations are truncated, so 1.5 epochs run 1 epoch (2 batches).
    """
    duration = Time.from_input(config.max_duration, default_unit=TimeUnit.EPOCH)
    target = {TimeUnit.EPOCH: 1.5, TimeUnit.BATCH: 2.5}[duration.unit]
    return dataclasses.replace(
        config,
        train_dataset=config.train_dataset.synthetic(num_samples=4),
        eval_dataset=config.eval_dataset.synthetic(num_samples=4) if config.eval_dataset is not None else None,
        train_batch_size=2,
        eval_batch_size=2,
        scale_schedule_ratio=target / duration.value,
        eval_interval="1ba",
        loggers={},
    )


def test_the_recipes_are_there():
    names = {path.stem for path in RECIPES}
    assert {
        "digits_baseline",
        "gpt_baseline",
        "gpt_alibi_seqwarmup",
        "bert_mlm",
        "cifar10_resnet56",
        "imagenet_resnet50",
    } <= names
    assert len([n for n in names if n.startswith("digits_")]) >= 3  # a baseline and speed-up recipes
    # The text job's (bash scripts/train text): a baseline and one recipe per language-model method.
    assert {
        "text_baseline",
        "text_alibi",
        "text_alibi_seqwarmup",
        "text_glu",
        "text_glu_alibi",
        "text_factorize",
        "text_ema",
        "text_lowprec_ln",
    } <= names


@pytest.mark.parametrize(
    "recipe",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in RECIPES],
    ids=[p.stem for p in RECIPES],
)
def test_recipe_trains_two_batches_on_synthetic_data(recipe):
    config = _two_batches(load_recipe(recipe, _PORTABLE))
    trainer = config.initialize_object()
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2
    metrics = trainer.eval()
    assert metrics and all(value == value for value in metrics.values())  # evaluated, no NaN
    trainer.close()


def test_cifar_recipe_reads_a_standard_archive(tmp_path):
    archive = write_cifar_archive(tmp_path, num_classes=10, per_batch=2)
    config = load_recipe(
        Path(__file__).parents[2] / "recipes" / "cifar10_resnet56.yaml",
        [
            *_PORTABLE,
            f"train_dataset.cifar10.path={archive}",
            f"eval_dataset.cifar10.path={archive}",
            "train_dataset.cifar10.num_workers=0",
            "eval_dataset.cifar10.num_workers=0",
            "train_batch_size=2",
            "eval_batch_size=2",
            "max_duration=2ba",
        ],
    )
    trainer = config.initialize_object()
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2 and int(trainer.state.timer.sample) == 4
    assert 0.0 <= trainer.eval()["metrics/eval/Accuracy"] <= 1.0
    trainer.close()
