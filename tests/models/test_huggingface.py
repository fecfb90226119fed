"""HuggingFaceModel: loss from the model, metrics against hand computations, the optional-dependency guard."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import composer.models.huggingface as huggingface
from composer import Trainer
from composer.models import HuggingFaceModel

transformers = pytest.importorskip("transformers")

IDS = torch.randint(1, 64, (2, 10), generator=torch.Generator().manual_seed(0))


def gpt2() -> HuggingFaceModel:
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=64, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    return HuggingFaceModel(transformers.GPT2LMHeadModel(config))


def bert_mlm() -> HuggingFaceModel:
    config = transformers.BertConfig(
        num_hidden_layers=1, num_attention_heads=2, hidden_size=16, intermediate_size=32, vocab_size=64
    )
    torch.manual_seed(0)
    return HuggingFaceModel(transformers.BertForMaskedLM(config))


def _all_metrics(model: HuggingFaceModel, batch: dict[str, torch.Tensor]) -> tuple[dict[str, float], torch.Tensor]:
    model.eval()
    outputs = model(batch)
    metrics = model.get_metrics(is_train=False)
    for metric in metrics.values():
        model.update_metric(batch, outputs, metric)
    return {name: float(metric.compute()) for name, metric in metrics.items()}, outputs


def test_causal_lm_loss_and_metrics_score_the_next_token():
    model = gpt2()
    assert model.shift_labels
    labels = IDS.clone()
    labels[1, 7:] = -100
    batch = {"input_ids": IDS, "labels": labels}
    values, outputs = _all_metrics(model, batch)
    logits, targets = outputs.logits[:, :-1], labels[:, 1:]
    expected = F.cross_entropy(logits.reshape(-1, 64), targets.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(model.loss(outputs, batch), expected)
    assert values["CrossEntropy"] == pytest.approx(expected.item(), rel=1e-5)
    assert values["Perplexity"] == pytest.approx(expected.exp().item(), rel=1e-5)
    scored = targets != -100
    accuracy = (logits.argmax(-1) == targets)[scored].float().mean()
    assert values["TokenAccuracy"] == pytest.approx(accuracy.item())


def test_masked_lm_metrics_score_each_position_itself():
    model = bert_mlm()
    assert not model.shift_labels
    labels = torch.full_like(IDS, -100)
    labels[:, 2] = IDS[:, 2]  # only the masked positions are scored
    labels[0, 5] = IDS[0, 5]
    batch = {"input_ids": IDS, "labels": labels}
    values, outputs = _all_metrics(model, batch)
    expected = F.cross_entropy(outputs.logits.reshape(-1, 64), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(model.loss(outputs, batch), expected)
    assert values["CrossEntropy"] == pytest.approx(expected.item(), rel=1e-5)
    scored = labels != -100
    accuracy = (outputs.logits.argmax(-1) == labels)[scored].float().mean()
    assert values["TokenAccuracy"] == pytest.approx(accuracy.item())


def test_trains_with_the_trainer():
    model = gpt2()
    samples = [{"input_ids": ids, "labels": ids} for ids in IDS]
    loader = DataLoader(samples, batch_size=2)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        eval_dataloader=loader,
        max_duration="3ba",
        optimizers=torch.optim.AdamW(model.parameters(), lr=1e-2),
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    before = trainer.eval()["metrics/eval/CrossEntropy"]
    trainer.fit()
    assert trainer.eval()["metrics/eval/CrossEntropy"] < before
    trainer.close()


def test_model_kind_must_be_known_or_given():
    config = transformers.BertConfig(
        num_hidden_layers=1, num_attention_heads=2, hidden_size=16, intermediate_size=32, vocab_size=64
    )
    with pytest.raises(ValueError, match="cannot tell whether BertModel is a causal or a masked"):
        HuggingFaceModel(transformers.BertModel(config))
    assert HuggingFaceModel(transformers.BertModel(config), shift_labels=False).shift_labels is False
    with pytest.raises(TypeError, match="PreTrainedModel"):
        HuggingFaceModel(torch.nn.Linear(2, 2))


def test_bad_batches_are_explained():
    model = gpt2()
    with pytest.raises(TypeError, match="dict of model inputs"):
        model(IDS)
    outputs = model({"input_ids": IDS})
    with pytest.raises(ValueError, match="needs a 'labels' entry"):
        model.loss(outputs, {"input_ids": IDS})


def test_missing_or_old_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(huggingface, "is_transformers_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'opencomposer\[nlp\]'"):
        gpt2()
    monkeypatch.setattr(huggingface, "is_transformers_available", lambda: True)
    monkeypatch.setattr(huggingface.importlib.metadata, "version", lambda name: "4.39.0")
    with pytest.raises(ImportError, match=r"needs transformers >= 5.0, but 4.39.0 is installed"):
        gpt2()
