"""The digits and text recipes take the methods of issue 21 by their registry keys and train a couple of batches."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from composer.algorithms import GatedLinearUnits, GyroDropout, LowPrecisionGroupNorm, LowPrecisionLayerNorm
from composer.algorithms.gated_linear_units import GLUFeedForward
from composer.algorithms.gyro_dropout import GyroDropoutLayer
from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNormModule
from composer.config import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SHORT = ["max_duration=2ba", "train_batch_size=8", "eval_dataset=null", "progress_bar=false", "log_to_console=false"]


def _fit(recipe: str, overrides: list[str]) -> tuple[object, object]:
    trainer = load_recipe(RECIPES / recipe, [*SHORT, *overrides]).initialize_object()
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2 and torch.isfinite(torch.as_tensor(trainer.state.loss)).all()
    trainer.close()
    return trainer, trainer.state.model


def test_the_text_recipe_takes_glu_and_low_precision_layernorm_in_bf16():
    trainer, model = _fit(
        "gpt_baseline.yaml",
        [
            "model.gpt={n_layer: 1, n_head: 2, n_embd: 32, max_sequence_length: 32, dropout: 0.1}",
            "train_dataset.python_docs.seq_len=32",
            "precision=bf16",
            "algorithms={gated_linear_units: {activation: silu}, low_precision_layernorm: {}, "
            "gyro_dropout: {sigma: 16, tau: 2}}",
        ],
    )
    kinds = [type(a) for a in trainer.state.algorithms]
    assert kinds == [GatedLinearUnits, LowPrecisionLayerNorm, GyroDropout]
    assert isinstance(model.blocks[0].mlp, GLUFeedForward) and isinstance(model.ln_f, LowPrecisionLayerNormModule)
    assert any(isinstance(m, GyroDropoutLayer) for m in model.modules())


def test_the_digits_recipe_takes_gyro_dropout_on_its_head_and_low_precision_groupnorm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # simple_cnn has batch norms only: LowPrecisionGroupNorm warns, changes nothing
        trainer, model = _fit(
            "digits_baseline.yaml",
            [
                "model.simple_cnn.dropout=0.5",
                "precision=bf16",
                "algorithms={gyro_dropout: {p: 0.5, sigma: 32, tau: 4}, low_precision_groupnorm: {}}",
            ],
        )
    assert [type(a) for a in trainer.state.algorithms] == [GyroDropout, LowPrecisionGroupNorm]
    assert isinstance(model.module.dropout, GyroDropoutLayer) and model.module.dropout.tau == 4


@pytest.mark.parametrize("key", ["gated_linear_units", "gyro_dropout"])
def test_a_bad_field_is_named(key: str):
    bad = {"gated_linear_units": "{activation: tanh}", "gyro_dropout": "{tau: 512}"}[key]
    with pytest.raises(Exception, match="activation='tanh'|tau=512"):
        load_recipe(RECIPES / "digits_baseline.yaml", [f"algorithms.{key}={bad}"]).initialize_object()


def test_the_digits_recipe_takes_factorize_weight_standardization_and_no_op_model():
    from composer.algorithms.factorize import FactorizedConv2d
    from composer.algorithms.no_op_model import NoOpModelClass

    _, model = _fit(
        "digits_baseline.yaml",
        [
            "algorithms={factorize: {min_channels: 16, latent_channels: 0.25, factorize_linears: false}, "
            "weight_standardization: {}}"
        ],
    )
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert sum(isinstance(m, FactorizedConv2d) for m in model.modules()) == 2
    assert all(torch.nn.utils.parametrize.is_parametrized(m) for m in convs)  # inside the factorized ones too
    _, stand_in = _fit("digits_baseline.yaml", ["algorithms={no_op_model: {}}"])
    assert isinstance(stand_in, NoOpModelClass) and sum(p.numel() for p in stand_in.parameters()) == 1


def test_the_text_recipe_takes_factorize_on_the_mlps():
    from composer.algorithms.factorize import FactorizedLinear

    _, model = _fit(
        "gpt_baseline.yaml",
        [
            "model.gpt={n_layer: 1, n_head: 2, n_embd: 32, max_sequence_length: 32}",
            "train_dataset.python_docs.seq_len=32",
            "algorithms={factorize: {min_features: 32, latent_features: 0.25}}",
        ],
    )
    mlp = model.blocks[0].mlp
    assert isinstance(mlp[0], FactorizedLinear) and isinstance(mlp[2], FactorizedLinear)
    assert mlp[0].latent_features == 8  # a quarter of min(32, 128)
