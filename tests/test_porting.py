"""Porting from MosaicML Composer v0.32.1: a script in its style runs here, and every line that cannot is answered
with its replacement (docs/guides/coming-from-mosaicml.md has the table these tests cover, row by row).
"""

from __future__ import annotations

import importlib
import math
import re

import pytest
import torch
import torch.nn.functional as F

from composer.core.time import Time, TimeUnit


def _model():
    from composer.models import MLP, ComposerClassifier

    return ComposerClassifier(MLP(in_features=64, hidden=(32,), num_classes=10), num_classes=10)


def test_a_v0_32_1_script_trains_and_reads_back_as_it_did(capsys):
    # ---- the script, in v0.32.1's words ----
    from composer import Trainer
    from composer.callbacks import LRMonitor
    from composer.datasets import digits_dataloaders
    from composer.loggers import InMemoryLogger
    from composer.optim import CosineAnnealingWithWarmupScheduler, DecoupledSGDW
    from composer.utils import reproducibility

    reproducibility.seed_all(42)
    train_dl, eval_dl = digits_dataloaders(batch_size=256)  # 6 batches an epoch
    model = _model()
    logger = InMemoryLogger()
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        eval_dataloader=eval_dl,
        max_duration="2ep",
        optimizers=DecoupledSGDW(model.parameters(), lr=0.1),
        schedulers=CosineAnnealingWithWarmupScheduler(t_warmup="3ba", alpha_f=0.1),
        console_log_interval="2ba",
        loggers=[logger],
        callbacks=[LRMonitor()],
        progress_bar=False,
        seed=42,
    )
    trainer.fit()
    accuracy = trainer.state.eval_metrics["eval"]["MulticlassAccuracy"].compute()
    timestamp = trainer.state.timestamp
    trainer.close()

    # ---- what it reads back ----
    # state.timestamp: v0.32.1's fields, as Time.
    expected = {
        "epoch": (2, "ep"),
        "batch": (12, "ba"),
        "sample": (len(train_dl.dataset) * 2, "sp"),
        "token": (0, "tok"),
    }
    for field, (value, unit) in expected.items():
        assert getattr(timestamp, field) == Time(value, TimeUnit(unit)), field
    assert timestamp.batch_in_epoch == Time(0, "ba") and timestamp.sample_in_epoch.unit == TimeUnit.SAMPLE
    assert timestamp.token_in_epoch.unit == TimeUnit.TOKEN
    with pytest.raises(AttributeError, match="read-only"):
        trainer.state.timestamp = timestamp
    # The alias finds the metric logged and reported as Accuracy; nothing is logged under the alias.
    assert accuracy == trainer.state.eval_metrics["eval"]["Accuracy"].compute()
    assert float(accuracy) == logger.values("metrics/eval/Accuracy")[-1]
    assert not any("Multiclass" in key for key in logger.data)
    assert list(trainer.state.eval_metrics["eval"]) == ["Accuracy", "CrossEntropy"]
    # The scheduler class drives the learning rate with v0.32.1's formula: a 3-batch warmup, then a cosine to 0.1.
    for batch, lr in enumerate(logger.values("lr-DecoupledSGDW/group0")):
        if batch < 3:
            expected_lr = 0.1 * batch / 3
        else:
            expected_lr = 0.1 * (0.1 + 0.9 * (1 + math.cos(math.pi * (batch - 3) / (12 - 3))) / 2)
        assert lr == pytest.approx(expected_lr, abs=1e-9), batch
    # console_log_interval='2ba' reached the console logger: the training loss every 2 batches.
    printed = re.findall(r"\[BATCH\]\[epoch=\d+ batch=(\d+)\]: .*loss/train", capsys.readouterr().err)
    assert [int(batch) for batch in printed] == [0, 2, 4, 6, 8, 10]


def test_reproducibility_module():
    from composer.utils import reproducibility

    reproducibility.seed_all(42)
    first = torch.rand(3)
    reproducibility.seed_all(42)
    assert torch.equal(torch.rand(3), first)
    with reproducibility.seed_context(42):
        assert torch.equal(torch.rand(3), first)
    assert 0 <= reproducibility.get_random_seed() <= reproducibility.MAX_SEED
    assert callable(reproducibility.configure_deterministic_mode)
    with pytest.raises(ImportError, match=r"State.capture_rng\(\)"):
        from composer.utils.reproducibility import get_rng_state  # noqa: F401


V0_32_1_SCHEDULERS = [
    "ComposerScheduler",
    "ConstantScheduler",
    "ConstantWithWarmupScheduler",
    "CosineAnnealingScheduler",
    "CosineAnnealingWarmRestartsScheduler",
    "CosineAnnealingWithWarmupScheduler",
    "ExponentialScheduler",
    "LinearScheduler",
    "LinearWithWarmupScheduler",
    "MultiStepScheduler",
    "MultiStepWithWarmupScheduler",
    "PolynomialScheduler",
    "PolynomialWithWarmupScheduler",
    "StepScheduler",
    "compile_composer_scheduler",
    "DecoupledAdamW",
    "DecoupledSGDW",
]


def test_every_name_composer_optim_exported_in_v0_32_1_imports():
    optim = importlib.import_module("composer.optim")
    missing = [name for name in V0_32_1_SCHEDULERS if not hasattr(optim, name)]
    assert not missing


def test_mlflow_logger_alias():
    from composer.loggers import MLFlowLogger, MLflowLogger

    assert MLFlowLogger is MLflowLogger


def test_composer_metrics_names_import_and_compute_like_torch():
    from composer.metrics import (  # every name v0.32.1 exported there, but the four pointed elsewhere
        CrossEntropy,
        LanguageCrossEntropy,
        LanguagePerplexity,
        LossMetric,
        MaskedAccuracy,
    )

    g = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(2, 5, 7, generator=g), torch.randint(0, 7, (2, 5), generator=g)
    labels[0, :2] = -100
    reference = F.cross_entropy(logits.reshape(-1, 7), labels.reshape(-1), ignore_index=-100)
    language = LanguageCrossEntropy()
    language.update({"logits": logits}, labels)
    torch.testing.assert_close(language.compute(), reference)
    perplexity = LanguagePerplexity()
    perplexity.update(logits, labels)
    torch.testing.assert_close(perplexity.compute(), reference.exp())
    flat = CrossEntropy()
    flat.update(logits.reshape(-1, 7)[labels.reshape(-1) != -100], labels.reshape(-1)[labels.reshape(-1) != -100])
    torch.testing.assert_close(flat.compute(), reference)
    accuracy = MaskedAccuracy(ignore_index=-100)
    accuracy.update(logits, labels)
    scored = labels != -100
    assert accuracy.compute() == ((logits.argmax(-1) == labels) & scored).sum() / scored.sum()
    loss = LossMetric(torch.nn.MSELoss())
    loss.update(torch.ones(3), torch.zeros(3))
    loss.update(torch.zeros(3), torch.zeros(3))
    assert loss.compute() == 0.5
    for name, replacement in [("MAP", "MeanAveragePrecision"), ("MIoU", "JaccardIndex"), ("Dice", "DiceScore")]:
        with pytest.raises(ImportError, match=replacement):
            exec(f"from composer.metrics import {name}", {})


@pytest.mark.parametrize(
    ("line", "replacement"),
    [
        ("LabelSmoothing(smoothing=0.1)", "LabelSmoothing(alpha=0.1)"),
        ("BlurPool()", "BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)"),
        ("Alibi(max_sequence_length=128)", "Alibi.from_model(model, max_sequence_length=128)"),
    ],
)
def test_algorithm_calls_get_their_replacement(line, replacement):
    from composer.algorithms import Alibi, BlurPool, LabelSmoothing

    namespace = {"Alibi": Alibi, "BlurPool": BlurPool, "LabelSmoothing": LabelSmoothing}
    with pytest.raises(TypeError, match=re.escape(replacement)):
        eval(line, namespace)
    if line.startswith("BlurPool"):
        for name in ("replace_convs", "replace_maxpools", "blur_first"):
            with pytest.raises(TypeError, match=name):
                eval(line, namespace)


def test_the_replacements_work():
    from composer.algorithms import Alibi, BlurPool, LabelSmoothing
    from composer.models import GPT, GPTConfig

    assert LabelSmoothing(alpha=0.1).alpha == 0.1
    assert BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True).blur_first
    assert Alibi.from_model(GPT(GPTConfig(n_layer=1)), max_sequence_length=128).max_sequence_length == 128


def test_device_train_microbatch_size_says_how_to_write_grad_accum():
    from composer import Trainer
    from composer.datasets import digits_dataloaders

    train_dl, _ = digits_dataloaders(batch_size=32)
    with pytest.raises(TypeError) as error:
        Trainer(model=_model(), train_dataloader=train_dl, max_duration="1ba", device_train_microbatch_size=8)
    message = str(error.value)
    assert "grad_accum" in message and "not the samples per microbatch" in message
    assert "batch_size is 32, so device_train_microbatch_size=8 is grad_accum=4" in message
    with pytest.raises(TypeError, match="device_train_microbatch_size='auto' is grad_accum='auto'"):
        Trainer(model=_model(), train_dataloader=train_dl, max_duration="1ba", device_train_microbatch_size="auto")


def test_other_v0_32_1_names_point_to_what_to_use():
    from composer import Trainer
    from composer.datasets import digits_dataloaders

    with pytest.raises(ImportError, match="RemoteUploader uploads the run's log files"):
        exec("from composer.loggers import RemoteUploaderDownloader", {})
    with pytest.raises(ImportError, match="no destination for that service"):
        exec("from composer.loggers import SlackLogger", {})
    train_dl, _ = digits_dataloaders(batch_size=32)
    with pytest.raises(TypeError, match=r"'parallelism_config'. Did you mean fsdp_config\?"):
        Trainer(model=_model(), train_dataloader=train_dl, max_duration="1ba", parallelism_config={"fsdp": {}})
