import math

import pytest
import torch
import torch.nn.functional as F

from composer.datasets import byte_unigram_entropy, load_python_docs, python_docs_dataloaders
from composer.models import GPT, GPTConfig
from composer.models.gpt import CausalSelfAttention
from composer.trainer import Trainer


def tiny_gpt(**overrides):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{"n_layer": 2, "n_head": 2, "n_embd": 16, "max_sequence_length": 16, **overrides}))


def test_config_rejects_bad_shapes():
    with pytest.raises(ValueError, match="n_embd=30 must be a multiple of n_head=4"):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="n_layer must be a positive int, got 0"):
        GPTConfig(n_layer=0)
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(dropout=1.0)
    with pytest.raises(TypeError, match="GPTConfig"):
        GPT({"n_layer": 2})  # type: ignore[arg-type]


def test_attention_is_causal_and_matches_a_hand_written_reference():
    torch.manual_seed(0)
    attention = CausalSelfAttention(GPTConfig(n_embd=8, n_head=2)).eval()
    x = torch.randn(2, 5, 8)
    # Reference: softmax(QK^T / sqrt(d) + causal mask) V per head, then the output projection.
    q, k, v = attention.c_attn(x).split(8, dim=2)
    q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(4)
    scores = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    expected = attention.c_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(attention(x), expected, atol=1e-5, rtol=1e-5)

    # Changing a later token leaves earlier outputs alone.
    changed = x.clone()
    changed[:, 3:] += 1.0
    torch.testing.assert_close(attention(changed)[:, :3], attention(x)[:, :3])


def test_loss_is_next_token_cross_entropy_and_ignores_unscored_labels():
    model = tiny_gpt()
    ids = torch.randint(0, 256, (2, 10), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[1, 6:] = -100
    batch = {"input_ids": ids, "labels": labels}
    logits = model(batch)
    scored = [(b, t) for b in range(2) for t in range(9) if labels[b, t + 1] != -100]
    expected = torch.stack([F.cross_entropy(logits[b, t], labels[b, t + 1]) for b, t in scored]).mean()
    torch.testing.assert_close(model.loss(logits, batch), expected)


def test_labels_default_to_input_ids_with_padding_unscored():
    model = tiny_gpt()
    ids = torch.tensor([[5, 6, 7, 8]])
    assert torch.equal(model.labels({"input_ids": ids}), ids)
    assert torch.equal(model.labels(ids), ids)
    masked = model.labels({"input_ids": ids, "attention_mask": torch.tensor([[1, 1, 1, 0]])})
    assert masked.tolist() == [[5, 6, 7, -100]]


def test_output_embedding_ties_on_request_and_shapes_follow_the_config():
    tied = tiny_gpt(tie_embeddings=True)
    assert tied.lm_head.weight is tied.wte.weight
    untied = tiny_gpt()
    assert untied.lm_head.weight is not untied.wte.weight
    model = tiny_gpt(vocab_size=50)
    assert model({"input_ids": torch.zeros(3, 7, dtype=torch.long)}).shape == (3, 7, 50)


def test_refuses_longer_sequences_and_bad_batches():
    model = tiny_gpt()
    with pytest.raises(ValueError, match="length 17, longer than max_sequence_length=16"):
        model({"input_ids": torch.zeros(1, 17, dtype=torch.long)})
    with pytest.raises(ValueError, match="'input_ids'"):
        model({"tokens": torch.zeros(1, 4, dtype=torch.long)})
    with pytest.raises(ValueError, match=r"shape \(B, S\)"):
        model(torch.zeros(4, dtype=torch.long))


def test_metrics_score_the_shifted_predictions():
    model = tiny_gpt()
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(2))
    batch = {"input_ids": ids}
    logits = model(batch)
    metrics = model.get_metrics(is_train=False)
    for metric in metrics.values():
        model.update_metric(batch, logits, metric)
    loss = model.loss(logits, batch)
    torch.testing.assert_close(metrics["CrossEntropy"].compute(), loss)
    torch.testing.assert_close(metrics["Perplexity"].compute(), loss.exp())
    torch.testing.assert_close(metrics["BitsPerByte"].compute(), loss / math.log(2))  # a byte vocabulary
    accuracy = (logits[:, :-1].argmax(-1) == ids[:, 1:]).float().mean()
    torch.testing.assert_close(metrics["TokenAccuracy"].compute(), accuracy)


@pytest.mark.slow
def test_learns_the_built_in_text_below_its_byte_unigram_entropy():
    # The best model without context scores the byte-unigram entropy; a few hundred steps must beat it by 0.5 nats.
    torch.set_num_threads(1)
    seq_len = 64
    train_dl, eval_dl = python_docs_dataloaders(seq_len=seq_len, batch_size=16, eval_batch_size=64, seed=0)
    model = tiny_gpt(n_embd=64, n_head=4, max_sequence_length=seq_len)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        max_duration="250ba",
        optimizers=torch.optim.AdamW(model.parameters(), lr=3e-3),
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    loss = trainer.eval(eval_dl, subset_num_batches=4)["metrics/eval/CrossEntropy"]  # the first 16 KB
    entropy = byte_unigram_entropy(load_python_docs("train"))
    assert loss <= entropy - 0.5, f"validation loss {loss:.3f} nats vs byte-unigram entropy {entropy:.3f}"
