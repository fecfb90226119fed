"""Every registered config class round-trips through YAML and builds its object; the registries are complete."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from omegaconf import OmegaConf

from composer.algorithms import ALGORITHMS
from composer.callbacks import CALLBACKS
from composer.config import ALGORITHM_HPARAMS, REGISTRIES
from composer.core.data_spec import DataSpec
from composer.loggers import LOGGERS
from composer.models import ComposerModel
from tests.config.examples import example_fields

ENTRIES = [(kind, name) for kind, registry in REGISTRIES.items() for name in registry]
BUILT_CLASSES = {"algorithms": ALGORITHMS, "callbacks": CALLBACKS, "loggers": LOGGERS}


def _skip_without_extras(kind: str, name: str) -> None:
    if (kind, name) == ("models", "huggingface"):
        pytest.importorskip("transformers")
    if (kind, name) == ("datasets", "image_folder"):
        pytest.importorskip("torchvision")
        pytest.importorskip("PIL")
    if (kind, name) == ("datasets", "digits"):
        pytest.importorskip("sklearn")


@pytest.mark.parametrize(("kind", "name"), ENTRIES, ids=[f"{k}-{n}" for k, n in ENTRIES])
def test_round_trips_yaml_and_builds(kind, name, tmp_path):
    _skip_without_extras(kind, name)
    config_class = REGISTRIES[kind][name]
    config = config_class.from_dict(example_fields(kind, name, tmp_path))
    text = OmegaConf.to_yaml(OmegaConf.create(config.to_dict()))
    loaded = OmegaConf.to_container(OmegaConf.create(text))
    again = config_class.from_dict(loaded)
    assert again == config and dataclasses.asdict(again) == dataclasses.asdict(config)

    if kind == "optimizers":
        built = config.initialize_object(torch.nn.Linear(2, 1).parameters())
        assert isinstance(built, torch.optim.Optimizer)
    elif kind == "datasets":
        built = config.initialize_object(batch_size=2, train=True, seed=0)
        assert isinstance(built, DataSpec) and next(iter(built.dataloader)) is not None
    else:
        built = config.initialize_object()
        if kind in BUILT_CLASSES:
            assert type(built) is BUILT_CLASSES[kind][name]
        elif kind == "models":
            assert isinstance(built, ComposerModel)
        else:  # schedulers: a function of the state
            assert callable(built)


def test_algorithm_registry_matches_the_algorithms():
    assert set(ALGORITHM_HPARAMS) == set(ALGORITHMS)
    for name, config_class in ALGORITHM_HPARAMS.items():
        assert config_class.__name__ == f"{ALGORITHMS[name].__name__}Hparams"


def test_every_registry_class_is_unique_so_names_round_trip():
    for kind, registry in REGISTRIES.items():
        assert len(set(registry.values())) == len(registry), kind


@pytest.mark.parametrize("name", list(REGISTRIES["datasets"]))
def test_every_dataset_has_a_synthetic_stand_in(name, tmp_path):
    if name == "image_folder":
        pytest.importorskip("PIL")
    config = REGISTRIES["datasets"][name].from_dict(example_fields("datasets", name, tmp_path))
    stand_in = config.synthetic(num_samples=4)
    spec = stand_in.initialize_object(batch_size=2, train=True, seed=0)
    assert next(iter(spec.dataloader)) is not None
