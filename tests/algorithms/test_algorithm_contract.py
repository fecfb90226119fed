"""The contract every registered algorithm keeps: it trains, trains again, checkpoints, and has a working Hparams."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import math
import pkgutil
import sys
from typing import Any

import pytest
import torch

import composer.algorithms
from composer.algorithms import ALGORITHMS
from composer.core.algorithm import Algorithm
from composer.core.hparams import Hparams
from composer.trainer import Trainer
from tests.algorithms.algorithm_settings import SETTINGS

NAMES = sorted(ALGORITHMS)


def _settings(name: str) -> tuple[Any, Any, Any]:
    if name not in SETTINGS:
        pytest.skip(
            f"{name!r} has no entry in tests/algorithms/algorithm_settings.py (see test_every_algorithm_has_settings)"
        )
    return SETTINGS[name]()


def _algorithm_classes_defined_in_package() -> set[type[Algorithm]]:
    """Every concrete Algorithm subclass defined in a module under composer.algorithms."""
    found: set[type[Algorithm]] = set()
    package = composer.algorithms
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Algorithm) and obj.__module__ == module.__name__ and not inspect.isabstract(obj):
                found.add(obj)
    return found


def _assert_same(actual: Any, expected: Any, path: str = "state_dict") -> None:
    """Recursive equality for state dicts: tensors by value (and dtype), containers item by item."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual).__name__}"
        assert actual.dtype == expected.dtype and torch.equal(actual, expected), f"{path}: tensors differ"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), f"{path}: keys differ"
        for key in expected:
            _assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f"{path}: lengths differ"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert isinstance(actual, float) and math.isnan(actual), f"{path}: {actual!r} != nan"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def test_every_algorithm_has_settings():
    missing = [name for name in NAMES if name not in SETTINGS]
    assert not missing, f"add an entry to tests/algorithms/algorithm_settings.py for: {missing}"
    unknown = sorted(set(SETTINGS) - set(ALGORITHMS))
    assert not unknown, f"algorithm_settings.py has entries for names not in ALGORITHMS: {unknown}"


def test_every_algorithm_class_is_registered():
    registered = set(ALGORITHMS.values())
    unregistered = sorted(cls.__qualname__ for cls in _algorithm_classes_defined_in_package() - registered)
    assert not unregistered, f"Algorithm subclasses missing from composer.algorithms.ALGORITHMS: {unregistered}"


def test_registry_names_are_snake_case_and_exported():
    for name, cls in ALGORITHMS.items():
        assert name == name.lower() and " " not in name, name
        assert getattr(composer.algorithms, cls.__name__) is cls, f"composer.algorithms does not export {cls.__name__}"


@pytest.mark.parametrize("name", NAMES)
def test_trains_refits_and_checkpoints(name: str):
    algorithm, model, dataloader = _settings(name)
    trainer = Trainer(
        model=model,
        train_dataloader=dataloader,
        max_duration="2ba",
        algorithms=[algorithm],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2
    assert torch.isfinite(torch.as_tensor(trainer.state.loss)).all()

    trainer.fit(duration="1ba")  # a second fit on the same trainer: FIT_START fires again
    assert int(trainer.state.timer.batch) == 3
    assert torch.isfinite(torch.as_tensor(trainer.state.loss)).all()
    trainer.close()

    # The algorithm's state survives a weights-only checkpoint and loads into a freshly built one.
    saved = algorithm.state_dict()
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = _settings(name)[0]
    fresh.load_state_dict(loaded)
    _assert_same(fresh.state_dict(), saved)


@pytest.mark.parametrize("name", NAMES)
def test_hparams_build_an_equivalent_algorithm(name: str):
    algorithm = _settings(name)[0]
    cls = type(algorithm)
    module = sys.modules[cls.__module__]
    hparams_cls = getattr(module, f"{cls.__name__}Hparams", None)
    assert hparams_cls is not None, f"{cls.__module__} defines no {cls.__name__}Hparams next to {cls.__name__}"
    assert issubclass(hparams_cls, Hparams) and dataclasses.is_dataclass(hparams_cls)

    fields = [f.name for f in dataclasses.fields(hparams_cls)]
    missing = [f for f in fields if not hasattr(algorithm, f)]
    assert not missing, f"{cls.__name__} should keep its arguments as attributes of the same name; missing {missing}"
    config = hparams_cls(**{f: getattr(algorithm, f) for f in fields})
    built = config.initialize_object()
    assert type(built) is cls
    assert repr(built) == repr(algorithm)
    assert hparams_cls.from_dict(config.to_dict()) == config
