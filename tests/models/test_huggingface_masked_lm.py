"""A masked language model on the built-in byte corpus: masked batches, or a refusal that names the fix."""

from __future__ import annotations

import pytest
import torch

from composer import Trainer
from composer.config import ConfigError
from composer.config.trainer_hparams import TrainerHparams
from composer.datasets import MASKED_BYTE_VOCAB_SIZE, mask_token_id_of, python_docs_dataloaders
from composer.models import HuggingFaceModel

transformers = pytest.importorskip("transformers")

SEQ_LEN = 64
BERT_CONFIG = {
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "hidden_size": 16,
    "intermediate_size": 32,
    "vocab_size": MASKED_BYTE_VOCAB_SIZE,  # the 256 bytes and the byte vocabulary's mask token
    "max_position_embeddings": SEQ_LEN,
}


def tiny_bert() -> HuggingFaceModel:
    torch.manual_seed(0)
    return HuggingFaceModel(transformers.BertForMaskedLM(transformers.BertConfig(**BERT_CONFIG)))


def _trainer(model: HuggingFaceModel, loader: torch.utils.data.DataLoader) -> Trainer:
    return Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="10ba",
        optimizers=torch.optim.AdamW(model.parameters(), lr=3e-2),
        device="cpu",
        seed=0,
        progress_bar=False,
    )


def test_masked_batches_score_only_masked_positions_and_copying_does_not_pay():
    model = tiny_bert()
    mask_token_id = mask_token_id_of(model.config)
    train_dl, eval_dl = python_docs_dataloaders(
        seq_len=SEQ_LEN, batch_size=16, mlm_probability=0.15, mask_token_id=mask_token_id
    )
    trainer = _trainer(model, train_dl)
    trainer.fit()
    trainer.close()
    metric = model.get_metrics(is_train=False)["TokenAccuracy"]
    model.eval()
    scored = 0
    batches = iter(eval_dl)
    with torch.no_grad():
        for _ in range(5):
            batch = next(batches)
            model.update_metric(batch, model(batch), metric)
            scored += int((batch["labels"] != -100).sum())
    assert int(metric.total) == scored  # only the masked positions are scored
    assert scored < 0.3 * 5 * 16 * SEQ_LEN
    # Copying the input scores about 0.55-0.65 after 10 unmasked batches; on masked positions copying is worth only
    # the 10% left unchanged, so the accuracy stays near what byte frequencies give.
    assert float(metric.compute()) < 0.3


def test_unmasked_batches_are_refused_with_the_fix():
    model = tiny_bert()
    train_dl, _ = python_docs_dataloaders(seq_len=SEQ_LEN, batch_size=16)
    trainer = _trainer(model, train_dl)
    with pytest.raises(
        ValueError, match=r"BertForMaskedLM is a masked language model, but the batch's labels equal"
    ) as info:
        trainer.fit()
    trainer.close()
    message = str(info.value)
    assert "mlm_probability=0.15" in message and "MaskingCollator" in message
    assert "BYTE_MASK_TOKEN_ID" in message  # BertConfig has no mask_token_id: the byte vocabulary's is named
    ids = torch.randint(0, 256, (2, 8))
    with pytest.raises(ValueError, match="masked language model"):
        model.eval_forward({"input_ids": ids, "labels": ids})
    model({"input_ids": ids})  # no labels: inference is fine
    labels = ids.clone()
    labels[:, 1:] = -100
    model({"input_ids": ids, "labels": labels})


def test_causal_models_still_take_labels_equal_to_their_inputs():
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=256, n_positions=SEQ_LEN)
    model = HuggingFaceModel(transformers.GPT2LMHeadModel(config))
    ids = torch.randint(0, 256, (2, 8))
    assert model({"input_ids": ids, "labels": ids}).loss is not None


def _recipe(dataset: dict[str, object]) -> TrainerHparams:
    return TrainerHparams.from_dict(
        {
            "model": {"huggingface": {"model_type": "bert", "task": "masked_lm", "config": BERT_CONFIG}},
            "train_dataset": {"python_docs": dataset},
            "eval_dataset": {"python_docs": dataset},
            "train_batch_size": 8,
            "max_duration": "2ba",
            "seed": 0,
            "progress_bar": False,
        }
    )


def test_recipe_masks_with_mlm_probability_and_refuses_without():
    trainer = _recipe({"seq_len": SEQ_LEN, "mlm_probability": 0.15}).initialize_object()
    batch = next(iter(trainer.state.train_dataloader))
    chosen = batch["labels"] != -100
    assert 0.05 < chosen.float().mean().item() < 0.3
    assert bool((batch["input_ids"][chosen] == 256).any())
    trainer.fit()
    trainer.close()
    with pytest.raises(ConfigError) as info:
        _recipe({"seq_len": SEQ_LEN}).initialize_object()
    # Named by the dataset's masking key (not as a shape mismatch), with the model's mask token and the fix.
    message = str(info.value)
    assert "train_dataset.python_docs.mlm_probability: received null" in message
    assert "eval_dataset.python_docs.mlm_probability: received null" in message
    assert "Set train_dataset.python_docs.mlm_probability: 0.15" in message
    assert "mask_token_id: 256" in message and "vocab_size, 257" in message
    assert "do not fit" not in message and "seq_len" not in message
    with pytest.raises(ConfigError, match=r"mlm_probability=1.5 must be in \(0, 1\)"):
        _recipe({"seq_len": SEQ_LEN, "mlm_probability": 1.5}).initialize_object()


def test_padded_unmasked_batches_are_refused_and_small_masked_ones_are_not():
    model = tiny_bert()
    ids = torch.randint(1, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 10:] = 0
    labels = ids.masked_fill(attention_mask == 0, -100)  # padding is not scored, every other token is its input
    with pytest.raises(ValueError, match="labels equal its input_ids wherever scored"):
        model({"input_ids": ids, "attention_mask": attention_mask, "labels": labels})
    kept = torch.full_like(ids, -100)
    kept[0, 3] = ids[0, 3]  # one chosen token that the 80/10/10 rule left unchanged: a masked batch all the same
    model({"input_ids": ids, "attention_mask": attention_mask, "labels": kept})


def test_synthetic_stand_in_of_a_masked_recipe_is_masked():
    recipe = _recipe({"seq_len": SEQ_LEN, "mlm_probability": 0.15})
    stand_in = recipe.train_dataset.synthetic(num_samples=32)
    assert stand_in.mlm_probability == 0.15  # type: ignore[attr-defined]
    batch = next(iter(stand_in.initialize_object(batch_size=32, train=True).dataloader))
    chosen = batch["labels"] != -100
    assert bool(chosen.any()) and not bool((chosen & (batch["attention_mask"] == 0)).any())
    model = tiny_bert()
    model(batch)  # masked: accepted
