"""The Generate callback and composer.callbacks.generate: against hand-written decoding loops on tiny random models."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from composer import Trainer
from composer.callbacks import ByteTokenizer, Generate, generate
from composer.datasets import ByteTextDataset
from composer.loggers import ConsoleLogger, InMemoryLogger
from composer.models import GPT, GPTConfig, HuggingFaceModel


def _gpt(max_len: int = 32, dropout: float = 0.0) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=max_len, dropout=dropout))


def _argmax_loop(logits_of, ids: torch.Tensor, steps: int, window: int | None = None) -> torch.Tensor:
    for _ in range(steps):
        context = ids if window is None else ids[:, -window:]
        with torch.no_grad():
            ids = torch.cat([ids, logits_of(context)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids


PROMPT = torch.tensor([list(b"def f(x):")])


def test_greedy_equals_an_argmax_loop_and_respects_the_context_limit():
    gpt = _gpt(max_len=12).eval()
    assert torch.equal(generate(gpt, PROMPT, 8), _argmax_loop(gpt.logits, PROMPT, 8, window=12))
    assert generate(gpt, PROMPT, 8).shape == (1, 9 + 8)  # beyond 12 tokens: the last 12 are the context


def test_sampling_is_reproducible_by_seed_and_matches_a_reference_sampler():
    gpt = _gpt().eval()

    def draw(seed, **kwargs):
        return generate(gpt, PROMPT, 10, do_sample=True, generator=torch.Generator().manual_seed(seed), **kwargs)

    assert torch.equal(draw(1, top_k=20, temperature=0.7), draw(1, top_k=20, temperature=0.7))
    assert not torch.equal(draw(1, top_k=20, temperature=0.7), draw(2, top_k=20, temperature=0.7))
    # The reference: scale by the temperature, zero the probability of all but the 20 largest, draw over the
    # vocabulary from the same generator.
    generator, ids = torch.Generator().manual_seed(1), PROMPT
    for _ in range(10):
        with torch.no_grad():
            scores = gpt.logits(ids)[0, -1] / 0.7
        probabilities = torch.zeros(256)
        keep = scores.topk(20).indices
        probabilities[keep] = torch.softmax(scores[keep], -1)
        ids = torch.cat([ids, torch.multinomial(probabilities, 1, generator=generator)[None]], dim=1)
    assert torch.equal(draw(1, top_k=20, temperature=0.7), ids)
    # top_k=1 is greedy whatever the seed.
    assert torch.equal(draw(3, top_k=1), generate(gpt, PROMPT, 10))


def test_eval_mode_no_grad_and_each_modules_mode_restored():
    gpt = _gpt(dropout=0.5).train()
    gpt.blocks[0].ln_1.eval()  # kept in eval mode during training on purpose
    first, second = generate(gpt, PROMPT, 6), generate(gpt, PROMPT, 6)
    assert torch.equal(first, second)  # dropout is off while generating
    assert gpt.training and gpt.drop.training and not gpt.blocks[0].ln_1.training
    assert all(p.grad is None for p in gpt.parameters())


def test_a_model_compiled_in_place_generates_without_compiling():
    gpt = _gpt().eval()
    expected = generate(gpt, PROMPT, 4)
    gpt.compile()  # as Trainer(compile_config=...) does; generation would otherwise recompile for every length
    calls = []
    gpt._compiled_call_impl = lambda *args, **kwargs: calls.append(1)
    assert torch.equal(generate(gpt, PROMPT, 4), expected) and calls == []


def test_huggingface_model_uses_its_key_value_cache():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=256, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    model = HuggingFaceModel(transformers.GPT2LMHeadModel(config)).eval()
    lengths: list[int] = []
    model.model.transformer.register_forward_pre_hook(
        lambda module, args, kwargs: lengths.append((args[0] if args else kwargs["input_ids"]).shape[1]),
        with_kwargs=True,
    )
    out = generate(model, PROMPT, 5)
    assert lengths == [9, 1, 1, 1, 1]  # the prompt once, then one new token per step
    lengths.clear()
    assert torch.equal(out, _argmax_loop(lambda ids: model.model(input_ids=ids, use_cache=False).logits, PROMPT, 5))
    # Past the 16 positions the cache is dropped and the last 16 tokens are recomputed.
    assert torch.equal(
        generate(model, PROMPT, 10),
        _argmax_loop(lambda ids: model.model(input_ids=ids, use_cache=False).logits, PROMPT, 10, window=16),
    )


def _text_loader() -> DataLoader:
    # 64 bytes: 4 samples of 16, 2 batches per epoch.
    return DataLoader(ByteTextDataset(b"def add(a, b):\n    return a + b\n" * 2, seq_len=16), batch_size=2)


def test_the_callback_logs_at_its_interval_to_every_text_destination():
    memory, stream = InMemoryLogger(), io.StringIO()
    callbacks = [
        Generate(["def ", "x = "], interval="3ba", max_new_tokens=4),
        Generate(["def "], interval="1ep", max_new_tokens=4, do_sample=True, top_k=5, seed=7, name="sampled"),
    ]
    model = _gpt(max_len=16)
    trainer = Trainer(model=model, train_dataloader=_text_loader(), max_duration="5ba", loggers=[memory],
                      callbacks=callbacks, progress_bar=False)  # fmt: skip
    trainer.logger.destinations.append(ConsoleLogger(stream=stream))  # prints EPOCH values, as by default
    trainer.fit()
    assert sorted(memory.texts) == ["generate/0", "generate/1", "sampled/0"]
    assert [int(t.batch) for t, _ in memory.texts["generate/0"]] == [3]
    # The ends of epochs 1 and 2; the third, cut short by max_duration, stays open (no epoch end).
    assert [int(t.batch) for t, _ in memory.texts["sampled/0"]] == [2, 4]
    assert all(text.startswith("x = ") for _, text in memory.texts["generate/1"])
    # The greedy text after batch 3 is generate() of the model as it was then; at the end it may differ, so compare
    # the form: the prompt and 4 bytes, decoded.
    ((_, text),) = memory.texts["generate/0"]
    assert text.startswith("def ") and len(text.encode("utf-8", errors="surrogatepass")) >= 4
    assert "[EPOCH][epoch=1 batch=3]: generate/0:\n  def " in stream.getvalue()
    assert model.training
    trainer.close()
    final = ByteTokenizer().decode(generate(model, torch.tensor([list(b"def ")]), 4)[0].tolist())
    assert final.startswith("def ")


def test_a_default_trainer_prints_the_text_once_with_or_without_log_to_console(capsys):
    for log_to_console in (False, True):
        generate_text = Generate(["def "], interval="2ba", max_new_tokens=4)
        trainer = Trainer(model=_gpt(max_len=16), train_dataloader=_text_loader(), max_duration="2ba", seed=0,
                          callbacks=[generate_text], log_to_console=log_to_console)  # fmt: skip
        trainer.fit()
        trainer.close()
        captured = capsys.readouterr()
        assert captured.err.count("generate/0") == 1, log_to_console
        assert "generate/0 at epoch 0, batch 2:\n  def " in captured.err and captured.out == ""
    trainer = Trainer(model=_gpt(max_len=16), train_dataloader=_text_loader(), max_duration="2ba", seed=0,
                      callbacks=[Generate(["def "], interval="2ba", log_level="batch")], log_to_console=True)  # fmt: skip
    trainer.fit()
    assert "generate/0" not in capsys.readouterr().err  # BATCH text: for loggers of BATCH values only


def test_sampled_text_is_seeded_by_the_batch_count():
    model = _gpt(max_len=16)
    runs = []
    for _ in range(2):
        memory = InMemoryLogger()
        callback = Generate(["def "], interval="1ba", max_new_tokens=6, do_sample=True, seed=3)
        trainer = Trainer(model=_gpt(max_len=16), train_dataloader=_text_loader(), max_duration="2ba",
                          loggers=[memory], callbacks=[callback], progress_bar=False, seed=0)  # fmt: skip
        trainer.fit()
        runs.append([text for _, text in memory.texts["generate/0"]])
        trainer.close()
    assert runs[0] == runs[1] and len(runs[0]) == 2
    del model


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompts": []}, "prompts=.* must be a non-empty list"),
        ({"prompts": "def "}, "prompts='def ' must be a non-empty list"),
        ({"prompts": ["ok", ""]}, r"prompts \[1\] are empty"),
        ({"prompts": ["a"], "interval": "0.5dur"}, "interval='0.5dur' must be a whole number of batches or epochs"),
        ({"prompts": ["a"], "max_new_tokens": 0}, "max_new_tokens=0 must be a positive int"),
        ({"prompts": ["a"], "do_sample": True, "temperature": 0.0}, "temperature=0.0 must be positive"),
        ({"prompts": ["a"], "top_k": 0}, "top_k=0 must be a positive int or None"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Generate(**kwargs)


def test_a_prompt_beyond_the_vocabulary_and_a_non_language_model_are_refused():
    torch.manual_seed(0)
    small = GPT(GPTConfig(vocab_size=64, n_layer=1, n_head=2, n_embd=16, max_sequence_length=16))
    trainer = Trainer(model=small, train_dataloader=DataLoader(torch.randint(0, 64, (4, 16)), batch_size=2),
                      max_duration="1ba", callbacks=[Generate(["é"], interval="1ba")], progress_bar=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"encodes the prompt 'é' to id 195, beyond the model's vocab_size=64"):
        trainer.fit()
    trainer.close()
    with pytest.raises(ValueError, match=r"logits of shape \(B, S, vocab\)"):
        generate(nn.Sequential(nn.Embedding(256, 4), nn.Flatten()), PROMPT, 2)  # (B, S * 4): not logits
    with pytest.raises(ValueError, match="a non-empty prompt"):
        generate(_gpt(), torch.zeros(1, 0, dtype=torch.long), 2)


def test_the_gpt_recipe_runs_with_generate_added():
    from composer.config import load_recipe
    from tests.recipes.test_recipes import _PORTABLE, _two_batches

    recipe = Path(__file__).parents[2] / "recipes" / "gpt_baseline.yaml"
    generate_fields = ["prompts=['def ']", "interval=1ba", "max_new_tokens=4"]
    config = _two_batches(load_recipe(recipe, [*_PORTABLE, *(f"callbacks.generate.{f}" for f in generate_fields)]))
    trainer = config.initialize_object()
    memory = InMemoryLogger()
    trainer.logger.destinations.append(memory)
    trainer.fit()
    assert [int(t.batch) for t, _ in memory.texts["generate/0"]] == [1, 2]
    assert all(text.startswith("def ") for _, text in memory.texts["generate/0"])
    trainer.close()
