"""Gated Linear Units: the hidden size keeps the parameter budget, the blocks compute the GLU formula, the GPT with
GLU blocks trains, Hugging Face GPT-2 and BERT run after the surgery, and an optimizer built before it follows."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from composer.algorithms import GatedLinearUnits, GatedLinearUnitsHparams
from composer.algorithms.gated_linear_units import GatedLinearUnit, GLUFeedForward, glu_hidden_size
from composer.functional import apply_gated_linear_units
from composer.models import GPT, GPTConfig

ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": lambda x: x * torch.sigmoid(x)}


def _num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _tiny_gpt(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(n_layer=2, n_head=2, n_embd=24, max_sequence_length=32))


def _hf_gpt2() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=64, n_positions=32)
    return transformers.GPT2LMHeadModel(config)


def _hf_bert() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=64,
        max_position_embeddings=32,
    )
    return transformers.BertForMaskedLM(config)


@pytest.mark.parametrize(
    ("d_model", "d_hidden", "bias", "multiple_of"),
    [(128, 512, True, 8), (24, 96, True, 8), (16, 64, False, 8), (768, 3072, True, 64), (10, 40, True, 1)],
)
def test_hidden_size_is_the_largest_multiple_within_the_budget(d_model, d_hidden, bias, multiple_of):
    def params(width: int, matrices: int) -> int:
        return matrices * d_model * width + ((matrices - 1) * width + d_model if bias else 0)

    budget = params(d_hidden, 2)
    # Reference: the largest multiple of multiple_of not above 2h/3 whose GLU block fits the budget (brute force).
    candidates = [h for h in range(multiple_of, 2 * d_hidden // 3 + 1, multiple_of) if params(h, 3) <= budget]
    size = glu_hidden_size(d_model, d_hidden, bias=bias, multiple_of=multiple_of)
    assert size == max(candidates)
    assert size % multiple_of == 0 and params(size, 3) <= budget


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match=r"activation='tanh'.*'gelu'"):
        GatedLinearUnits(activation="tanh")
    with pytest.raises(ValueError, match="multiple_of=0"):
        GatedLinearUnitsHparams(multiple_of=0)
    with pytest.raises(ValueError, match="multiple_of=64"):
        glu_hidden_size(8, 32, multiple_of=64)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_the_gpt_block_computes_the_glu_formula_and_has_no_more_parameters(activation: str):
    model = _tiny_gpt()
    before = _num_params(model)
    apply_gated_linear_units(model, activation=activation, generator=torch.Generator().manual_seed(0))
    assert _num_params(model) <= before
    mlp = model.blocks[0].mlp
    assert isinstance(mlp, GLUFeedForward)
    assert mlp.glu.w.out_features == glu_hidden_size(24, 96) == 56
    x = torch.randn(2, 5, 24, generator=torch.Generator().manual_seed(1))
    w, v, w2 = mlp.glu.w, mlp.glu.v, mlp.w2
    # Written out by hand: (act(x W^T + b) * (x V^T + c)) W2^T + d.
    expected = (ACTIVATIONS[activation](x @ w.weight.T + w.bias) * (x @ v.weight.T + v.bias)) @ w2.weight.T + w2.bias
    torch.testing.assert_close(mlp(x), expected)


def test_new_weights_follow_the_original_scales_and_the_seed():
    model = _tiny_gpt()
    std_in = float(model.blocks[0].mlp[0].weight.detach().std())
    std_out = float(model.blocks[0].mlp[2].weight.detach().std())  # GPT-2's smaller residual projection
    apply_gated_linear_units(model, generator=torch.Generator().manual_seed(0))
    mlp = model.blocks[0].mlp
    assert float(mlp.glu.w.weight.detach().std()) == pytest.approx(std_in, rel=0.1)
    assert float(mlp.w2.weight.detach().std()) == pytest.approx(std_out, rel=0.1)
    assert torch.count_nonzero(mlp.glu.w.bias) == 0
    again = apply_gated_linear_units(_tiny_gpt(), generator=torch.Generator().manual_seed(0))
    assert torch.equal(again.blocks[1].mlp.w2.weight, model.blocks[1].mlp.w2.weight)


def test_the_gpt_with_glu_blocks_trains():
    model = _tiny_gpt()
    apply_gated_linear_units(model, activation="silu", generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = {"input_ids": torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(2))}
    losses = []
    for _ in range(8):
        loss = model.loss(model(batch), batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    # Memorising one batch: the loss falls at every step, by more than 10% over 8 steps.
    assert all(b < a for a, b in itertools.pairwise(losses)) and losses[-1] < 0.9 * losses[0], losses


def test_hf_gpt2_runs_after_surgery_and_the_optimizer_follows():
    model = _hf_gpt2()
    before = _num_params(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    apply_gated_linear_units(model, generator=torch.Generator().manual_seed(0), optimizers=optimizer)
    assert _num_params(model) <= before
    mlp = model.transformer.h[0].mlp
    assert isinstance(mlp, GLUFeedForward) and mlp.glu.w.out_features == glu_hidden_size(16, 64) == 40
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert trained == {id(p) for p in model.parameters()}
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (2, 8, 64)
    out.loss.backward()
    old = mlp.glu.v.weight.detach().clone()
    optimizer.step()
    assert not torch.equal(old, mlp.glu.v.weight)


def test_hf_bert_runs_after_surgery_with_the_glu_in_the_feed_forward():
    model = _hf_bert().eval()
    before = _num_params(model)
    apply_gated_linear_units(model, activation="gelu", generator=torch.Generator().manual_seed(0))
    assert _num_params(model) <= before
    layer = model.bert.encoder.layer[0]
    assert isinstance(layer.intermediate, GatedLinearUnit) and layer.output.dense.in_features == 40
    # The layer's feed-forward is the GLU block, then BertOutput's dropout (off) and LayerNorm of the residual.
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    w, v, dense = layer.intermediate.w, layer.intermediate.v, layer.output.dense
    glu = (F.gelu(x @ w.weight.T + w.bias) * (x @ v.weight.T + v.bias)) @ dense.weight.T + dense.bias
    torch.testing.assert_close(layer.feed_forward_chunk(x), layer.output.LayerNorm(glu + x))
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(2))
    assert model(input_ids=ids).logits.shape == (2, 8, 64)


def test_a_model_without_known_blocks_warns_and_a_second_application_changes_nothing():
    with pytest.warns(UserWarning, match="replaced nothing"):
        apply_gated_linear_units(nn.Sequential(nn.Linear(4, 4)))
    model = apply_gated_linear_units(_tiny_gpt(), generator=torch.Generator().manual_seed(0))
    weights = dict(model.named_parameters())
    apply_gated_linear_units(model)
    assert all(p is weights[name] for name, p in model.named_parameters())


def test_the_trainer_remaps_an_optimizer_built_before_the_surgery_of_a_hugging_face_model():
    from torch.utils.data import DataLoader

    from composer import Trainer
    from composer.models import HuggingFaceModel

    model = HuggingFaceModel(_hf_gpt2())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # built from the original feed-forward weights
    ids = torch.randint(0, 64, (8, 8), generator=torch.Generator().manual_seed(0))
    data = DataLoader([{"input_ids": row, "labels": row} for row in ids], batch_size=4)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        max_duration="2ba",
        optimizers=optimizer,
        algorithms=[GatedLinearUnits(activation="gelu_tanh")],
        progress_bar=False,
        seed=0,
    )
    glu = model.model.transformer.h[1].mlp.glu
    before = glu.w.weight.detach().clone()
    trainer.fit()
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert trained == {id(p) for p in model.parameters()}  # the old weights left, the GLU weights joined
    assert not torch.equal(before, glu.w.weight) and torch.isfinite(torch.as_tensor(trainer.state.loss))
