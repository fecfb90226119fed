"""The dry run at construction: one sample through the model, leaving the model and the run as they were."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from composer.config import ConfigError, TrainerHparams
from composer.config.datasets import SyntheticClassificationHparams, SyntheticTokensHparams
from composer.config.dry_run import fit_problems
from composer.config.models import GPTHparams, MLPHparams, SimpleCNNHparams
from composer.core.data_spec import DataSpec
from composer.utils.seeding import seed_all

_IMAGES = {
    "model": {"simple_cnn": {"in_channels": 1, "widths": [4, 8], "num_classes": 4}},
    "train_dataset": {"synthetic_classification": {"shape": [1, 8, 8], "num_classes": 4, "num_samples": 8}},
    "eval_dataset": {"synthetic_classification": {"shape": [1, 8, 8], "num_classes": 4, "num_samples": 4}},
    "train_batch_size": 4,
    "max_duration": "1ba",
    "progress_bar": False,
    "seed": 3,
}


def test_the_dry_run_leaves_the_model_as_built():
    trainer = TrainerHparams.from_dict(_IMAGES).initialize_object()
    seed_all(3)
    fresh = SimpleCNNHparams(in_channels=1, widths=[4, 8], num_classes=4).initialize_object()
    model = trainer.state.model
    assert model.training  # the mode is restored
    assert all(p.grad is None for p in model.parameters())  # under no_grad
    built, expected = model.state_dict(), fresh.state_dict()
    assert built.keys() == expected.keys()
    assert all(torch.equal(built[k], expected[k]) for k in built)  # BatchNorm's statistics too: run in eval mode
    trainer.close()


def test_the_mode_is_restored_when_the_model_was_in_eval_mode():
    config = MLPHparams(in_features=16, hidden=[8])
    model = config.initialize_object().eval()
    data = SyntheticClassificationHparams(shape=[16], num_samples=4)
    spec = data.initialize_object(batch_size=2, train=True)
    assert fit_problems(config, "model.mlp", model, data, "train_dataset.synthetic_classification", spec, True) == []
    assert not model.training


def test_the_dry_run_draws_nothing_from_the_runs_generators():
    losses = []
    for _ in range(2):
        trainer = TrainerHparams.from_dict({**_IMAGES, "max_duration": "2ba"}).initialize_object()
        trainer.fit()
        losses.append(float(trainer.state.loss))
        trainer.close()
    assert losses[0] == losses[1]


_GPT_KEYS = (
    "model.gpt.vocab_size / model.gpt.max_sequence_length and "
    "train_dataset.synthetic_tokens.seq_len / train_dataset.synthetic_tokens.vocab_size"
)


@pytest.mark.parametrize(
    ("tokens", "detail"),
    [
        ({"vocab_size": 300}, "IndexError: index out of range in self"),  # token ids past the embedding
        ({"seq_len": 64}, "(first input of shape [64])"),  # longer than max_sequence_length
    ],
)
def test_a_language_model_and_its_data_must_fit(tokens, detail):
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_head": 2, "n_embd": 16, "max_sequence_length": 32}},
        "train_dataset": {"synthetic_tokens": {"num_samples": 4, "seq_len": 16, **tokens}},
        "train_batch_size": 2,
        "max_duration": "1ba",
        "seed": 0,
    }
    with pytest.raises(ConfigError) as info:
        TrainerHparams.from_dict(recipe).initialize_object()
    assert info.value.where == _GPT_KEYS and detail in info.value.message, info.value


def test_a_sequence_must_fit_alibis_max_sequence_length():
    alibi = {
        "position_embedding_attribute": "wpe",
        "attention_module_name": "composer.models.gpt.CausalSelfAttention",
        "attr_to_replace": "forward",
        "alibi_attention": "composer.algorithms.alibi.policies.gpt_alibi_forward",
        "max_sequence_length": 8,
    }
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_head": 2, "n_embd": 16, "max_sequence_length": 32}},
        "train_dataset": {"synthetic_tokens": {"num_samples": 4, "seq_len": 16}},
        "train_batch_size": 2,
        "max_duration": "1ba",
        "algorithms": {"alibi": alibi},
        "seed": 0,
    }
    with pytest.raises(
        ConfigError, match=r"holds 16 tokens, but with algorithms\.alibi\.max_sequence_length=8"
    ) as info:
        TrainerHparams.from_dict(recipe).initialize_object()
    assert info.value.where.startswith(
        "algorithms.alibi.max_sequence_length and train_dataset.synthetic_tokens.seq_len"
    )
    alibi["max_sequence_length"] = 16
    TrainerHparams.from_dict(recipe).initialize_object().close()


def test_with_alibi_the_dry_run_takes_longer_sequences_than_the_model_was_built_for():
    # Train short, evaluate long: the sample goes through the model as ALiBi's surgery (at INIT) leaves it.
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_head": 2, "n_embd": 16, "max_sequence_length": 16}},
        "train_dataset": {"synthetic_tokens": {"num_samples": 4, "seq_len": 16}},
        "eval_dataset": {"synthetic_tokens": {"num_samples": 2, "seq_len": 32}},
        "train_batch_size": 2,
        "max_duration": "1ba",
        "algorithms": {"alibi": {"max_sequence_length": 32, "train_sequence_length_scaling": 1.0}},
        "progress_bar": False,
        "seed": 0,
    }
    with TrainerHparams.from_dict(recipe).initialize_object() as trainer:
        trainer.fit()
        assert "wpe.weight" not in trainer.state.model.state_dict()
        assert all(group["params"] for group in trainer.state.optimizers[0].param_groups)
    without = {key: value for key, value in recipe.items() if key != "algorithms"}
    with pytest.raises(ConfigError, match=r"GPT got a sequence of length 32, longer than max_sequence_length=16"):
        TrainerHparams.from_dict(without).initialize_object()


def test_the_smallest_images_of_progressive_resizing_must_fit_the_model():
    recipe = {**_IMAGES, "algorithms": {"progressive_resizing": {"initial_scale": 0.1}}}
    with pytest.raises(ConfigError, match=r"becomes of shape \[1, 1, 1\]") as info:
        TrainerHparams.from_dict(recipe).initialize_object()
    assert info.value.where == "algorithms.progressive_resizing.initial_scale and model.simple_cnn"
    ok = {**_IMAGES, "algorithms": {"progressive_resizing": {"initial_scale": 0.5}}}
    TrainerHparams.from_dict(ok).initialize_object().close()


class _Stream(IterableDataset):
    def __iter__(self):
        yield from ((torch.zeros(3), 0) for _ in range(4))


def test_data_without_an_indexable_dataset_is_not_checked():
    config = MLPHparams(in_features=16, hidden=[])
    spec = DataSpec(DataLoader(_Stream(), batch_size=2))
    data = SyntheticClassificationHparams()
    assert fit_problems(config, "model.mlp", config.initialize_object(), data, "train_dataset.x", spec, True) == []
    tokens = SyntheticTokensHparams(num_samples=2, seq_len=8)
    gpt = GPTHparams(n_layer=1, n_head=2, n_embd=16, max_sequence_length=8)
    spec = tokens.initialize_object(batch_size=2, train=False)
    assert fit_problems(gpt, "model.gpt", gpt.initialize_object(), tokens, "eval_dataset.t", spec, False) == []
