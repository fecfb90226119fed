"""A recipe's ``alibi: {max_sequence_length: N}`` is filled in from its model, as ``Alibi.from_model`` does in Python.

Through ``composer train`` (and ``--print-config``) with a tiny, randomly initialised Hugging Face GPT-2, against
``Alibi.from_model`` on the model itself; the recipe trains the weights the Python form trains; and the errors for a
model ALiBi cannot fill in name the recipe key and the fix.
"""

from __future__ import annotations

import pytest
import torch
import yaml

from composer import Trainer
from composer.algorithms import Alibi
from composer.cli.__main__ import main
from composer.config import ConfigError, TrainerHparams, load_recipe
from composer.config.datasets import SyntheticTokensHparams
from composer.config.from_model import ALIBI_PATHS
from composer.config.models import HuggingFaceHparams
from composer.models import HuggingFaceModel
from composer.utils.seeding import seed_all

transformers = pytest.importorskip("transformers")

# A model built for 16 positions; evaluated on 32 tokens, which only ALiBi's surgery makes it take.
GPT2 = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "vocab_size": 64,
    "n_positions": 16,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
RECIPE = f"""
model: {{huggingface: {{model_type: gpt2, config: {GPT2}}}}}
train_dataset: {{synthetic_tokens: {{seq_len: 16, vocab_size: 64, num_samples: 8}}}}
eval_dataset: {{synthetic_tokens: {{seq_len: 32, vocab_size: 64, num_samples: 4}}}}
train_batch_size: 4
max_duration: 2ba
progress_bar: false
seed: 0
algorithms:
  alibi: {{max_sequence_length: 64, train_sequence_length_scaling: 1.0}}
"""


def _reference(max_sequence_length: int, task: str = "causal_lm", **config) -> dict:
    """What ``Alibi.from_model`` gives for the model itself, built by transformers with its weights."""
    auto = transformers.AutoModelForCausalLM if task == "causal_lm" else transformers.AutoModelForMaskedLM
    model = HuggingFaceModel(auto.from_config(config["config"]))
    alibi = Alibi.from_model(model, max_sequence_length=max_sequence_length, train_sequence_length_scaling=1.0)
    return dict(vars(alibi))


def test_composer_train_fills_in_alibi_from_a_hugging_face_gpt2(tmp_path, capsys):
    recipe = tmp_path / "gpt2_alibi.yaml"
    recipe.write_text(RECIPE)
    assert main(["train", "-f", str(recipe), "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    expected = _reference(64, config=transformers.GPT2Config(**GPT2))
    assert printed["algorithms"]["alibi"] == expected
    assert expected["position_embedding_attribute"] == "model.transformer.wpe"
    # Trains, and evaluates on sequences twice as long as the model was built for: the surgery happened.
    assert main(["train", "-f", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "metrics/eval/CrossEntropy: " in out, out


def test_the_recipe_trains_the_weights_alibi_from_model_trains(tmp_path):
    recipe = tmp_path / "gpt2_alibi.yaml"
    recipe.write_text(RECIPE)
    with load_recipe(recipe, ["eval_dataset=null"]).initialize_object() as trainer:
        trainer.fit()
        from_recipe = {k: v.clone() for k, v in trainer.state.model.state_dict().items()}
    # The Python form: the same seed, model and data, with Alibi.from_model.
    seed_all(0)
    model = HuggingFaceHparams(model_type="gpt2", config=GPT2).initialize_object()
    data = SyntheticTokensHparams(seq_len=16, vocab_size=64, num_samples=8).initialize_object(4, True, 0)
    alibi = Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=1.0)
    with Trainer(model=model, train_dataloader=data, max_duration="2ba", algorithms=[alibi], seed=0,
                 progress_bar=False) as trainer:  # fmt: skip
        trainer.fit()
        from_python = trainer.state.model.state_dict()
    assert from_recipe.keys() == from_python.keys() and not any(".wpe." in key for key in from_python)
    assert all(torch.equal(from_recipe[key], from_python[key]) for key in from_python)


def test_bert_gets_its_mask_replacement_function_and_a_given_one_is_kept(tmp_path):
    bert = {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 16, "intermediate_size": 32,
            "vocab_size": 64, "max_position_embeddings": 16}  # fmt: skip
    model = {"huggingface": {"model_type": "bert", "task": "masked_lm", "config": bert}}
    recipe = {"model": model, "train_dataset": "python_docs", "train_batch_size": 2, "max_duration": "1ba"}
    filled = TrainerHparams.from_dict({**recipe, "algorithms": {"alibi": {"max_sequence_length": 32}}})
    expected = _reference(32, task="masked_lm", config=transformers.BertConfig(**bert))
    assert filled.algorithms["alibi"].to_dict() == {**expected, "train_sequence_length_scaling": 0.25}
    assert expected["mask_replacement_function"] == "composer.algorithms.alibi.policies.enlarge_position_buffers"
    kept = TrainerHparams.from_dict({**recipe, "algorithms": ["alibi"]})
    assert kept.algorithms["alibi"].max_sequence_length == 8192  # the list form, with the defaults
    unset = TrainerHparams.from_dict({**recipe, "algorithms": {"alibi": {"mask_replacement_function": None}}})
    assert unset.algorithms["alibi"].mask_replacement_function is None  # the entry's own value wins


def test_a_model_alibi_cannot_fill_in_names_the_key_and_the_fix(tmp_path, capsys):
    recipe = tmp_path / "mlp_alibi.yaml"
    recipe.write_text(
        "model: {mlp: {in_features: 16, hidden: [8]}}\n"
        "train_dataset: {synthetic_classification: {shape: [16]}}\n"
        "train_batch_size: 8\nmax_duration: 1ba\nalgorithms: {alibi: {max_sequence_length: 128}}\n"
    )
    assert main(["train", "-f", str(recipe), "--print-config"]) == 2
    error = capsys.readouterr().err
    assert "algorithms.alibi: cannot fill in ALiBi's paths from model.mlp" in error, error
    assert "model.gpt, or model.huggingface with model_type gpt2 or bert" in error
    assert all(name in error for name in ALIBI_PATHS)


def test_some_paths_but_not_all_are_refused_with_the_missing_ones():
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_head": 2, "n_embd": 16}},
        "train_dataset": "python_docs",
        "train_batch_size": 2,
        "max_duration": "1ba",
        "algorithms": {"alibi": {"position_embedding_attribute": "wpe"}},
    }
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict(recipe)
    assert info.value.where == "algorithms.alibi"
    assert "but not ['attention_module_name', 'attr_to_replace', 'alibi_attention']" in info.value.message
    assert "Give all four paths, or none of them" in info.value.message
    del recipe["model"]  # nothing to fill them in from: the model's problem, and ALiBi's pointing at it
    recipe["algorithms"] = {"alibi": {}}
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict(recipe)
    assert sorted(where for where, _ in info.value.problems) == ["algorithms.alibi", "model"]


def test_a_pretrained_model_is_read_from_its_config_without_its_weights(tmp_path):
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**GPT2))
    model.save_pretrained(tmp_path / "gpt2", safe_serialization=True)
    for weights in (tmp_path / "gpt2").glob("*.safetensors"):
        weights.write_bytes(b"not read")  # the structure comes from config.json alone
    recipe = {
        "model": {"huggingface": {"pretrained": str(tmp_path / "gpt2")}},
        "train_dataset": "python_docs",
        "train_batch_size": 2,
        "max_duration": "1ba",
        "algorithms": {"alibi": {"max_sequence_length": 64, "train_sequence_length_scaling": 1.0}},
    }
    filled = TrainerHparams.from_dict(recipe).algorithms["alibi"].to_dict()
    assert filled == _reference(64, config=transformers.GPT2Config(**GPT2))
