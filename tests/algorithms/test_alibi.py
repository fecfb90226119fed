"""Alibi: slopes and bias against hand-built references, the surgeries (GPT, HF GPT-2, HF BERT), bad inputs."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import Alibi, AlibiHparams
from composer.algorithms.alibi import AlibiBias, alibi_bias, alibi_slopes, apply_alibi, scale_sequence_length
from composer.algorithms.alibi.bias import apply_bias_to_mask
from composer.algorithms.alibi.policies import gpt_alibi_forward
from composer.core import Engine, Event, State
from composer.datasets import ByteTextDataset, load_python_docs, python_docs_dataloaders
from composer.models import GPT, GPTConfig, HuggingFaceModel
from composer.models.gpt import CausalSelfAttention
from tests.common import SimpleModel

LOWEST = torch.finfo(torch.float32).min


def tiny_gpt(max_sequence_length: int = 16, n_head: int = 4) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=2, n_head=n_head, n_embd=16, max_sequence_length=max_sequence_length))


def run_init(model: torch.nn.Module, alibi: Alibi, optimizer: torch.optim.Optimizer | None = None) -> State:
    state = State(model=model, max_duration="1ep", algorithms=[alibi], optimizers=optimizer)
    Engine(state).run_event(Event.INIT)
    return state


# ---- slopes and bias ---------------------------------------------------------------------------------------------


def test_slopes_for_8_heads_are_the_geometric_sequence_from_one_half():
    expected = torch.tensor([2.0 ** -(i + 1) for i in range(8)])
    torch.testing.assert_close(alibi_slopes(8), expected)


def test_slopes_for_12_heads_interleave_the_16_head_sequence():
    # 8 heads: 2^-1 .. 2^-8; then every other slope of the 16-head sequence (2^-0.5 each): 2^-0.5, 2^-1.5, ...
    expected = [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(0.5 + i) for i in range(4)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))


def _hand_built_bias(num_heads: int, seq_len: int, causal: bool) -> torch.Tensor:
    slopes = alibi_slopes(num_heads)
    bias = torch.empty(num_heads, seq_len, seq_len)
    for h in range(num_heads):
        for i in range(seq_len):
            for j in range(seq_len):
                if causal:
                    bias[h, i, j] = -slopes[h] * (i - j) if j <= i else LOWEST
                else:
                    bias[h, i, j] = -slopes[h] * abs(i - j)
    return bias


@pytest.mark.parametrize("causal", [True, False])
def test_bias_matches_a_hand_built_matrix(causal: bool):
    torch.testing.assert_close(alibi_bias(4, 6, causal=causal), _hand_built_bias(4, 6, causal))


def test_bias_in_half_precision_masks_with_the_dtype_minimum():
    bias = alibi_bias(2, 4, causal=True, dtype=torch.float16)
    assert bias.dtype == torch.float16
    assert bias[0, 0, 1].item() == torch.finfo(torch.float16).min
    assert torch.isfinite(bias).all()


def test_bias_is_built_once_per_length_and_shorter_lengths_are_views():
    cache = AlibiBias(num_heads=4, max_sequence_length=32)
    cpu = torch.device("cpu")
    full = cache(16, 16, causal=True, device=cpu, dtype=torch.float32)
    again = cache(16, 16, causal=True, device=cpu, dtype=torch.float32)
    shorter = cache(8, 8, causal=True, device=cpu, dtype=torch.float32)
    assert again.data_ptr() == full.data_ptr() and shorter.data_ptr() == full.data_ptr()
    assert full.shape == (1, 4, 16, 16)
    torch.testing.assert_close(shorter[0], _hand_built_bias(4, 8, causal=True))
    # Generation: the last query of 16 keys is row 15 of the full matrix.
    torch.testing.assert_close(cache(1, 16, causal=True, device=cpu, dtype=torch.float32), full[:, :, 15:16])
    longer = cache(24, 24, causal=True, device=cpu, dtype=torch.float32)
    torch.testing.assert_close(longer[0], _hand_built_bias(4, 24, causal=True))
    with pytest.raises(ValueError, match="length 33, longer than max_sequence_length=32"):
        cache(33, 33, causal=True, device=cpu, dtype=torch.float32)


def test_bias_combines_with_boolean_and_additive_masks():
    bias = alibi_bias(2, 3, causal=False)[None]  # (1, 2, 3, 3)
    keep = torch.tensor([True, True, False]).view(1, 1, 1, 3)
    combined = apply_bias_to_mask(bias, keep)
    assert combined.shape == (1, 2, 3, 3)
    torch.testing.assert_close(combined[0, :, :, :2], bias[0, :, :, :2])
    assert (combined[..., 2] == LOWEST).all()
    additive = torch.zeros(1, 1, 1, 3)
    additive[..., 2] = LOWEST
    torch.testing.assert_close(apply_bias_to_mask(bias, additive), combined)
    with pytest.raises(TypeError, match="boolean or additive float"):
        apply_bias_to_mask(bias, [True, False])  # type: ignore[arg-type]


# ---- composer GPT ------------------------------------------------------------------------------------------------


def test_gpt_surgery_removes_position_parameters_and_keeps_the_optimizer_consistent():
    model = tiny_gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    before = model({"input_ids": ids})
    run_init(model, Alibi.from_model(model, max_sequence_length=64), optimizer)
    assert not [name for name, _ in model.named_parameters() if name.startswith("wpe")]
    assert "wpe.weight" not in model.state_dict()
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert trained == {id(p) for p in model.parameters()}
    assert not torch.allclose(model({"input_ids": ids}), before)
    # One optimizer step works on the new parameter set.
    batch = {"input_ids": ids}
    model.loss(model(batch), batch).backward()
    optimizer.step()


def test_gpt_alibi_attention_matches_a_hand_written_reference():
    torch.manual_seed(0)
    attention = CausalSelfAttention(GPTConfig(n_embd=16, n_head=4)).eval()
    x = torch.randn(2, 6, 16)
    reference_q, reference_k, reference_v = attention.split_heads(x)
    attention.alibi = AlibiBias(4, 32)  # what apply_alibi installs, without a position embedding to remove
    scores = reference_q @ reference_k.transpose(-1, -2) / math.sqrt(4) + _hand_built_bias(4, 6, causal=True)
    expected = attention.merge_heads(scores.softmax(-1) @ reference_v)
    torch.testing.assert_close(gpt_alibi_forward(attention, x), expected, atol=1e-5, rtol=1e-5)


def test_gpt_accepts_sequences_beyond_its_trained_length_up_to_the_new_maximum():
    model = tiny_gpt(max_sequence_length=16)
    run_init(model, Alibi.from_model(model, max_sequence_length=48))
    assert model({"input_ids": torch.zeros(1, 48, dtype=torch.long)}).shape == (1, 48, 256)
    with pytest.raises(ValueError, match="max_sequence_length=48"):
        model({"input_ids": torch.zeros(1, 49, dtype=torch.long)})


def test_applying_twice_replaces_the_first_setup():
    model = tiny_gpt()
    run_init(model, Alibi.from_model(model, max_sequence_length=32))
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    assert model({"input_ids": torch.zeros(1, 64, dtype=torch.long)}).shape == (1, 64, 256)


def test_heads_per_layer_is_read_from_the_model_and_checked():
    model = tiny_gpt(n_head=2)
    run_init(model, Alibi.from_model(model, max_sequence_length=32))
    assert model.blocks[0].attn.alibi.num_heads == 2
    wrong = tiny_gpt(n_head=2)
    run_init(wrong, Alibi.from_model(wrong, max_sequence_length=32, heads_per_layer=4))
    with pytest.raises(ValueError, match="heads_per_layer=4, but the attention has 2 heads"):
        wrong({"input_ids": torch.zeros(1, 8, dtype=torch.long)})


def test_training_batches_are_reshaped_to_shorter_sequences_every_key_alike():
    model = tiny_gpt()
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=0.25)
    state = run_init(model, alibi)
    ids = torch.arange(32).view(2, 16)
    state.batch = {"input_ids": ids, "labels": ids + 100, "attention_mask": torch.ones(2, 16, dtype=torch.long)}
    Engine(state).run_event(Event.AFTER_DATALOADER)
    assert state.batch["input_ids"].shape == (8, 4)
    assert torch.equal(state.batch["input_ids"].flatten(), ids.flatten())
    assert torch.equal(state.batch["labels"], state.batch["input_ids"] + 100)
    assert state.batch["attention_mask"].shape == (8, 4)


def test_scaling_of_one_leaves_batches_alone():
    alibi = Alibi.from_model(tiny_gpt(), train_sequence_length_scaling=1.0)
    state = State(model=tiny_gpt(), max_duration="1ep")
    assert not alibi.match(Event.AFTER_DATALOADER, state)
    assert alibi.match(Event.INIT, state)


def test_train_sequence_length_is_the_scaled_length_and_checks_it():
    alibi = Alibi.from_model(tiny_gpt(), train_sequence_length_scaling=0.25)
    assert [alibi.train_sequence_length(n) for n in (4, 16, 64)] == [1, 4, 16]
    assert Alibi.from_model(tiny_gpt(), train_sequence_length_scaling=1.0).train_sequence_length(10) == 10
    with pytest.raises(ValueError, match=r"train_sequence_length_scaling=0.25 turns sequences of 10 tokens into 2.5"):
        alibi.train_sequence_length(10)


def test_with_seq_length_warmup_alibi_leaves_the_training_batch_to_it():
    from composer.algorithms import SeqLengthWarmup

    model = tiny_gpt()
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=0.5)
    alone = State(model=model, max_duration="1ep", algorithms=[alibi])
    assert alibi.match(Event.AFTER_DATALOADER, alone)
    for algorithms in ([alibi, SeqLengthWarmup()], [SeqLengthWarmup(), alibi]):
        state = State(model=tiny_gpt(), max_duration="1ep", algorithms=algorithms)
        assert alibi.match(Event.INIT, state)
        Engine(state).run_event(Event.INIT)  # each says its part in state.sequence_cut
        assert state.sequence_cut.scaling == 0.5 and state.sequence_cut.scheduled
        assert not alibi.match(Event.AFTER_DATALOADER, state)  # the warmup cuts once for both


# ---- bad input ---------------------------------------------------------------------------------------------------


def test_a_model_family_without_policy_needs_dotted_paths():
    with pytest.raises(ValueError, match=r"no built-in policy for SimpleModel.*position_embedding_attribute="):
        Alibi.from_model(SimpleModel())


def test_missing_or_wrong_paths_are_named():
    with pytest.raises(ValueError, match="position_embedding_attribute must be a non-empty string"):
        Alibi("", "composer.models.gpt.CausalSelfAttention", "forward", "x.y", None, None, 64, 1.0)
    model = tiny_gpt()
    good = Alibi.from_model(model)
    paths = {
        "attention_module_name": "composer.models.gpt.NoSuchAttention",
        "alibi_attention": "no_such_module.function",
        "mask_replacement_function": "nodots",
    }
    for argument, value in paths.items():
        alibi = Alibi(**{**vars(good), argument: value})
        with pytest.raises(ValueError, match=argument):
            run_init(tiny_gpt(), alibi)
    wrong_embedding = Alibi(**{**vars(good), "position_embedding_attribute": "pos"})
    with pytest.raises(ValueError, match=r"position_embedding_attribute='pos'.*\['wte', 'wpe'\]"):
        run_init(tiny_gpt(), wrong_embedding)
    with pytest.raises(ValueError, match="has no Linear module"):
        apply_alibi(torch.nn.Sequential(torch.nn.ReLU()), 4, 64, "wpe", torch.nn.Linear, "forward", gpt_alibi_forward)


def test_numbers_out_of_range_are_refused():
    model = tiny_gpt()
    with pytest.raises(ValueError, match="max_sequence_length must be a positive int, got 0"):
        Alibi.from_model(model, max_sequence_length=0)
    with pytest.raises(ValueError, match=r"train_sequence_length_scaling must be in \(0, 1\], got 2"):
        Alibi.from_model(model, train_sequence_length_scaling=2)
    with pytest.raises(ValueError, match="heads_per_layer"):
        Alibi.from_model(model, heads_per_layer=0)


def test_scaling_must_divide_the_length_and_needs_input_ids():
    batch = {"input_ids": torch.zeros(2, 10, dtype=torch.long)}
    with pytest.raises(ValueError, match=r"train_sequence_length_scaling=0.25 turns sequences of 10 tokens into 2.5"):
        scale_sequence_length(batch, 0.25)
    with pytest.raises(ValueError, match="'input_ids'"):
        scale_sequence_length({"tokens": torch.zeros(2, 8)}, 0.5)


def test_hparams_have_the_seed_defaults():
    config = AlibiHparams(
        position_embedding_attribute="wpe",
        attention_module_name="composer.models.gpt.CausalSelfAttention",
        attr_to_replace="forward",
        alibi_attention="composer.algorithms.alibi.policies.gpt_alibi_forward",
    )
    assert (config.mask_replacement_function, config.heads_per_layer) == (None, None)
    assert (config.max_sequence_length, config.train_sequence_length_scaling) == (8192, 0.25)
    with pytest.raises(ValueError, match="train_sequence_length_scaling"):
        AlibiHparams.from_dict({**config.to_dict(), "train_sequence_length_scaling": 0.0})


# ---- Hugging Face GPT-2 and BERT ---------------------------------------------------------------------------------


def _gpt2(attn_implementation: str = "sdpa") -> HuggingFaceModel:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_head=4, n_embd=32, n_positions=16, vocab_size=64, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel._from_config(config, attn_implementation=attn_implementation)
    return HuggingFaceModel(model.eval())


def _bert(attn_implementation: str = "sdpa") -> HuggingFaceModel:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=16,
        vocab_size=64,
    )
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM._from_config(config, attn_implementation=attn_implementation)
    return HuggingFaceModel(model.eval())


IDS = torch.randint(1, 64, (2, 12), generator=torch.Generator().manual_seed(0))
LONG = torch.randint(1, 64, (2, 40), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("build,embedding", [(_gpt2, "model.transformer.wpe"), (_bert, "position_embeddings")])
def test_hf_surgery_under_sdpa_removes_position_parameters_and_changes_outputs(build, embedding):
    model = build()
    assert model.config._attn_implementation == "sdpa"  # the installed transformers' default
    before = model({"input_ids": IDS}).logits
    alibi = Alibi.from_model(model, max_sequence_length=64)
    assert alibi.position_embedding_attribute.endswith(embedding)
    run_init(model, alibi)
    assert not [name for name, _ in model.named_parameters() if "wpe" in name or "position_embeddings" in name]
    after = model({"input_ids": IDS}).logits
    assert not torch.allclose(before, after)
    # Longer than the 16 positions the model was built with.
    assert model({"input_ids": LONG}).logits.shape == (2, 40, 64)
    with pytest.raises(ValueError, match="max_sequence_length=64"):
        model({"input_ids": torch.ones(1, 65, dtype=torch.long)})


@pytest.mark.parametrize("build", [_gpt2, _bert])
def test_hf_alibi_gives_the_same_outputs_under_sdpa_and_eager(build):
    outputs = []
    for implementation in ("sdpa", "eager"):
        model = build(implementation)
        run_init(model, Alibi.from_model(model, max_sequence_length=64))
        mask = torch.ones(2, 40, dtype=torch.long)
        mask[1, 30:] = 0
        outputs.append(model({"input_ids": LONG, "attention_mask": mask}).logits)
    torch.testing.assert_close(outputs[0][0], outputs[1][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(outputs[0][1, :30], outputs[1][1, :30], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("build", [_gpt2, _bert])
def test_hf_padding_leaves_the_real_tokens_alone(build):
    model = build()
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, 30:] = 0
    padded = model({"input_ids": LONG, "attention_mask": mask}).logits
    alone = model({"input_ids": LONG[1:, :30]}).logits
    torch.testing.assert_close(padded[1, :30], alone[0], atol=1e-5, rtol=1e-5)


def test_hf_bert_as_a_decoder_stays_causal():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=16,
        vocab_size=64,
        is_decoder=True,
    )
    torch.manual_seed(0)
    model = HuggingFaceModel(transformers.BertLMHeadModel(config).eval())
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    changed = LONG.clone()
    changed[:, 30:] = 5
    original, edited = model({"input_ids": LONG}).logits, model({"input_ids": changed}).logits
    torch.testing.assert_close(original[:, :30], edited[:, :30], atol=1e-5, rtol=1e-5)  # the future is not seen
    assert not torch.allclose(original[:, 30:], edited[:, 30:])


def test_hf_gpt2_bias_matches_the_formula_through_the_attention():
    # With the query and key projections zeroed every score is 0, so the attention weights are softmax(bias) and
    # the first head's output at position i is the bias-weighted mean of the values.
    model = _gpt2()
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    attention = model.model.transformer.h[0].attn
    with torch.no_grad():
        attention.c_attn.weight[:, :64] = 0.0  # queries and keys
        attention.c_attn.bias[:64] = 0.0
        attention.c_proj.weight.copy_(torch.eye(32))
        attention.c_proj.bias.zero_()
    hidden = torch.randn(1, 5, 32)
    out, _ = attention(hidden)
    values = attention.c_attn(hidden)[..., 64:].view(1, 5, 4, 8).transpose(1, 2)  # (1, H, S, 8)
    weights = _hand_built_bias(4, 5, causal=True).softmax(-1)
    expected = (weights @ values[0]).transpose(0, 1).reshape(1, 5, 32)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_hf_gpt2_generation_with_a_cache_matches_the_full_forward():
    model = _gpt2()
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    hf = model.model
    full = hf(input_ids=LONG[:, :20]).logits
    prefix = hf(input_ids=LONG[:, :19], use_cache=True)
    step = hf(input_ids=LONG[:, 19:20], cache=prefix.cache, use_cache=True)
    torch.testing.assert_close(step.logits[:, -1], full[:, -1], atol=1e-5, rtol=1e-5)


def test_hf_other_attention_implementations_are_refused():
    model = _gpt2()
    run_init(model, Alibi.from_model(model, max_sequence_length=64))
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match=r"supports attn_implementation \['sdpa', 'eager'\]"):
        model.model.transformer.h[0].attn(torch.randn(1, 4, 32))


# ---- extrapolation ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_alibi_gpt_extrapolates_to_twice_its_training_length():
    torch.set_num_threads(1)
    train_len = 64
    # Batches of 8 x 128 bytes, reshaped by Alibi into 16 x 64: the model trains at length 64.
    train_dl, _ = python_docs_dataloaders(seq_len=2 * train_len, batch_size=8, seed=0)
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=train_len))
    alibi = Alibi.from_model(model, max_sequence_length=4 * train_len, train_sequence_length_scaling=0.5)
    trainer = Trainer(
        model=model,
        train_dataloader=train_dl,
        max_duration="150ba",
        algorithms=[alibi],
        optimizers=torch.optim.AdamW(model.parameters(), lr=3e-3),
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    # The same 16 KB of validation text, cut at the training length and at twice it.
    text = load_python_docs("validation")[: 256 * train_len]
    at_train = trainer.eval(DataLoader(ByteTextDataset(text, train_len), batch_size=64))
    at_double = trainer.eval(DataLoader(ByteTextDataset(text, 2 * train_len), batch_size=32))
    loss, loss_double = at_train["metrics/eval/CrossEntropy"], at_double["metrics/eval/CrossEntropy"]
    assert loss < 3.0, f"the ALiBi model did not learn: loss {loss:.3f}"
    assert loss_double <= loss + 0.1, f"loss at 2x length {loss_double:.3f} vs {loss:.3f} at the training length"

    # The same model without ALiBi has no position embedding for the longer input.
    plain = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=train_len))
    with pytest.raises(ValueError, match=f"longer than max_sequence_length={train_len}"):
        plain({"input_ids": torch.zeros(1, 2 * train_len, dtype=torch.long)})
