"""Every optimizer config builds its optimizer with the configured values and round-trips through a dict."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from composer.optim.decoupled_weight_decay import DecoupledAdamW, DecoupledSGDW
from composer.optim.optimizer_hparams import (
    OPTIMIZERS,
    AdamHparams,
    AdamWHparams,
    DecoupledAdamWHparams,
    DecoupledSGDWHparams,
    OptimizerHparams,
    RMSpropHparams,
    SGDHparams,
)

# config class -> (optimizer class, fields to set, expected defaults of the reference)
CASES: dict[type[OptimizerHparams], tuple[type[torch.optim.Optimizer], dict[str, Any], dict[str, Any]]] = {
    SGDHparams: (
        torch.optim.SGD,
        {"lr": 0.1, "momentum": 0.9, "nesterov": True},
        {"momentum": 0.0, "weight_decay": 0.0, "dampening": 0.0, "nesterov": False},
    ),
    DecoupledSGDWHparams: (
        DecoupledSGDW,
        {"lr": 0.1, "weight_decay": 5e-4, "dampening": 0.1, "momentum": 0.5},
        {"momentum": 0.0, "weight_decay": 0.0, "dampening": 0.0, "nesterov": False},
    ),
    AdamHparams: (
        torch.optim.Adam,
        {"lr": 3e-4, "betas": (0.8, 0.99)},
        {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False},
    ),
    AdamWHparams: (
        torch.optim.AdamW,
        {"amsgrad": True, "eps": 1e-6},
        {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2, "amsgrad": False},
    ),
    DecoupledAdamWHparams: (
        DecoupledAdamW,
        {"weight_decay": 1e-4},
        {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2, "amsgrad": False},
    ),
    RMSpropHparams: (
        torch.optim.RMSprop,
        {"lr": 0.01, "centered": True, "momentum": 0.5},
        {"alpha": 0.99, "eps": 1e-8, "momentum": 0.0, "weight_decay": 0.0, "centered": False},
    ),
}


def test_registry() -> None:
    assert {
        "sgd": SGDHparams,
        "adam": AdamHparams,
        "adamw": AdamWHparams,
        "decoupled_sgdw": DecoupledSGDWHparams,
        "decoupled_adamw": DecoupledAdamWHparams,
        "rmsprop": RMSpropHparams,
    } == OPTIMIZERS


@pytest.mark.parametrize("config_class", list(CASES), ids=lambda c: c.__name__)
def test_defaults_follow_the_reference(config_class: type[OptimizerHparams]) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}  # type: ignore[arg-type]
    expected = CASES[config_class][2]
    assert {name: defaults[name] for name in expected} == expected
    if "lr" not in expected:
        assert defaults["lr"] is dataclasses.MISSING  # lr is required for SGD, SGDW and RMSprop


@pytest.mark.parametrize("config_class", list(CASES), ids=lambda c: c.__name__)
def test_builds_the_optimizer_with_the_configured_values(config_class: type[OptimizerHparams]) -> None:
    optimizer_class, values, _ = CASES[config_class]
    config = config_class.from_dict(values)
    model = torch.nn.Linear(3, 2)
    optimizer = config.initialize_object(model.parameters())
    assert type(optimizer) is optimizer_class
    group = optimizer.param_groups[0]
    for name, value in config.to_dict().items():
        assert group[name] == value, name
    assert len(group["params"]) == 2

    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()


@pytest.mark.parametrize("config_class", list(CASES), ids=lambda c: c.__name__)
def test_round_trip_through_a_dict(config_class: type[OptimizerHparams]) -> None:
    config = config_class.from_dict(CASES[config_class][1])
    data = config.to_dict()
    assert config_class.from_dict(data) == config
    assert set(data) == {f.name for f in dataclasses.fields(config_class)}  # type: ignore[arg-type]


def test_yaml_style_values_are_converted() -> None:
    config = AdamHparams.from_dict({"betas": [0.5, 0.6], "lr": 1})
    assert config.betas == (0.5, 0.6)
    assert config.lr == 1.0


def test_errors_name_the_class_and_the_field() -> None:
    with pytest.raises(ValueError, match=r"SGDHparams got unknown key\(s\) \['learning_rate'\].*'lr'"):
        SGDHparams.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match=r"Invalid SGDHparams: required field 'lr' is missing"):
        SGDHparams.from_dict({})
    with pytest.raises(ValueError, match=r"Invalid AdamHparams: field 'eps' received 'tiny' \(str\) but expects float"):
        AdamHparams.from_dict({"eps": "tiny"})
    with pytest.raises(ValueError, match=r"Invalid RMSpropHparams: lr=-1.0 must be a finite number >= 0"):
        RMSpropHparams(lr=-1.0)
    with pytest.raises(ValueError, match=r"betas=\(0.9, 1.5\)"):
        DecoupledAdamWHparams(betas=(0.9, 1.5))
    with pytest.raises(ValueError, match=r"nesterov=True needs momentum > 0"):
        DecoupledSGDWHparams(lr=0.1, nesterov=True)
