"""Factorize restricted to some layers (``modules=``): which layers of this library's GPT and of Hugging Face's GPT-2
are replaced, against names and parameter counts worked out by hand; the errors of a pattern that selects nothing;
the text recipe factorizing its GPT's MLPs only."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from composer.algorithms import Factorize, FactorizeHparams
from composer.algorithms.factorize import FactorizedLinear
from composer.config import load_recipe
from composer.functional import apply_factorization
from composer.models import GPT, GPTConfig

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "text_factorize.yaml"
MLPS = {"blocks.0.mlp.0", "blocks.0.mlp.2", "blocks.1.mlp.0", "blocks.1.mlp.2"}


def _gpt(n_embd: int = 32) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, max_sequence_length=16, n_layer=2, n_head=2, n_embd=n_embd))


def _factorized(model: nn.Module) -> set[str]:
    return {name for name, m in model.named_modules() if isinstance(m, FactorizedLinear)}


def _num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("modules", ["*.mlp.*", ["*.mlp"], ["blocks.?.mlp.[02]"]])
def test_the_patterns_select_exactly_the_mlp_layers_of_the_gpt(modules):
    model, reference = _gpt(), _gpt()
    ids = torch.randint(0, 64, (3, 16), generator=torch.Generator().manual_seed(0))
    apply_factorization(model, min_features=32, latent_features=8, modules=modules)
    assert _factorized(model) == MLPS
    assert all(type(m) is nn.Linear for b in model.blocks for m in (b.attn.c_attn, b.attn.c_proj))
    assert type(model.lm_head) is nn.Linear
    # Each MLP layer (32 -> 128 and 128 -> 32): 32 * 128 weights become 8 * (32 + 128); the biases stay.
    assert _num_params(reference) - _num_params(model) == 4 * (32 * 128 - 8 * (32 + 128))
    assert model.logits(ids).shape == reference.logits(ids).shape == (3, 16, 64)
    # Without the option, attention's projections (32 -> 96, 32 -> 32) and the head (32 -> 64) go too.
    everything = apply_factorization(_gpt(), min_features=32, latent_features=8)
    attention = {f"blocks.{i}.attn.{p}" for i in (0, 1) for p in ("c_attn", "c_proj")}
    assert _factorized(everything) == MLPS | attention | {"lm_head"}


def test_a_predicate_and_several_patterns_select_their_union():
    model = apply_factorization(_gpt(), min_features=32, latent_features=8, modules=lambda name, m: "mlp.2" in name)
    assert _factorized(model) == {"blocks.0.mlp.2", "blocks.1.mlp.2"}
    model = apply_factorization(_gpt(), min_features=32, latent_features=8, modules=["blocks.0.*", "lm_head"])
    block0 = {"blocks.0.attn.c_attn", "blocks.0.attn.c_proj", "blocks.0.mlp.0", "blocks.0.mlp.2"}
    assert _factorized(model) == block0 | {"lm_head"}
    # The size rules still apply to the layers selected: at min_features=64 no 32-wide layer is factorized.
    with pytest.warns(UserWarning, match="all kept by their policy"):
        model = apply_factorization(_gpt(), min_features=64, latent_features=8, modules="*.mlp.*")
    assert _factorized(model) == set()


def test_applying_twice_with_the_same_pattern_changes_nothing_more():
    model = apply_factorization(_gpt(), min_features=32, latent_features=8, modules="*.mlp.*")
    count = _num_params(model)
    with pytest.warns(UserWarning, match="all kept by their policy"):
        apply_factorization(model, min_features=32, latent_features=8, modules="*.mlp.*")
    assert _factorized(model) == MLPS and _num_params(model) == count


def test_a_pattern_that_selects_nothing_names_the_argument_the_pattern_and_some_layers():
    model = _gpt()
    with pytest.raises(ValueError) as caught:
        apply_factorization(model, min_features=32, modules=["*.mlp.*", "*.ffn.*"])
    message = str(caught.value)
    assert "modules=['*.mlp.*', '*.ffn.*']" in message and "the pattern '*.ffn.*' selects no" in message
    assert "'blocks.0.attn.c_attn', 'blocks.0.attn.c_proj', 'blocks.0.mlp.0'" in message and "(9 in all)" in message
    assert _factorized(model) == set()  # checked before anything is replaced
    with pytest.raises(ValueError, match="the predicate .* selects no Linear layer"):
        apply_factorization(model, factorize_convs=False, modules=lambda name, m: False)
    with pytest.raises(ValueError, match="Sequential has no Linear layer at all"):
        apply_factorization(nn.Sequential(nn.ReLU()), factorize_convs=False, modules="*")
    for bad, error in [([], ValueError), (3, TypeError), (["*.mlp.*", ""], TypeError)]:
        with pytest.raises(error, match="modules="):
            apply_factorization(model, modules=bad)
        with pytest.raises(error, match="modules="):
            Factorize(modules=bad)
    with pytest.raises(ValueError, match=r"modules=\[\] selects no layer"):
        FactorizeHparams.from_dict({"modules": []})


def test_hugging_face_gpt2_conv1d_mlps_are_factorized_to_their_truncated_svd():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    config.bos_token_id = config.eos_token_id = 0
    model = transformers.GPT2LMHeadModel(config).eval()
    conv1d = model.transformer.h[0].mlp.c_fc  # x @ weight + bias, weight (32, 128)
    weight, bias = conv1d.weight.detach().clone(), conv1d.bias.detach().clone()
    before = _num_params(model)
    apply_factorization(model, min_features=32, latent_features=4, modules="*.mlp.*")
    mlps = {f"transformer.h.{i}.mlp.{p}" for i in (0, 1) for p in ("c_fc", "c_proj")}
    assert _factorized(model) == mlps
    assert type(model.transformer.h[0].attn.c_attn).__name__ == "Conv1D"
    assert before - _num_params(model) == 4 * (32 * 128 - 4 * (32 + 128))
    # The new layer computes x @ W_4 + b, W_4 the rank-4 truncated SVD of the Conv1D's weight.
    u, s, vh = torch.linalg.svd(weight.double())
    w4 = (u[:, :4] * s[:4]) @ vh[:4]
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(1))
    expected = (x.double() @ w4 + bias.double()).float()
    torch.testing.assert_close(model.transformer.h[0].mlp.c_fc(x), expected, atol=1e-5, rtol=1e-4)
    assert model(torch.randint(0, 64, (2, 8))).logits.shape == (2, 8, 64)


def test_the_text_recipe_factorizes_its_gpts_mlps_only():
    config = load_recipe(RECIPE, ["device=cpu", "progress_bar=false", "log_to_console=false", "save_folder=null"])
    assert config.algorithms["factorize"].modules == ["*.mlp.*"]
    config = dataclasses.replace(
        config, train_dataset=config.train_dataset.synthetic(num_samples=4), eval_dataset=None, train_batch_size=2
    )
    trainer = config.initialize_object()  # Factorize runs at Event.INIT
    model = trainer.state.model
    assert _factorized(model) == MLPS
    # The recipe's GPT (2 layers, 64 wide): each MLP layer's 64 * 256 weights become 32 * (64 + 256).
    reference = GPT(GPTConfig(vocab_size=256, max_sequence_length=64, n_layer=2, n_head=4, n_embd=64))
    assert _num_params(reference) - _num_params(model) == 4 * (64 * 256 - 32 * (64 + 256))
    trainer.close()
