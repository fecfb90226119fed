"""The typed config base: validation, clear errors, dict round trips."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from composer.core.hparams import Hparams, hparams


@hparams
class InnerHparams(Hparams):
    width: int = 4

    def validate(self) -> None:
        if self.width <= 0:
            raise ValueError(f"width={self.width} must be positive; pick 1 or more.")

    def initialize_object(self) -> list[int]:
        return [0] * self.width


@hparams
class OuterHparams(Hparams):
    name: str
    rate: float = 0.5
    tags: list[str] = dataclasses.field(default_factory=list)
    inner: InnerHparams = dataclasses.field(default_factory=InnerHparams)
    pair: tuple[float, float] = (0.1, 0.2)

    def validate(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"rate={self.rate} must lie in [0, 1].")

    def initialize_object(self) -> dict[str, Any]:
        return {"name": self.name, "inner": self.inner.initialize_object()}


def test_is_a_dataclass_with_defaults() -> None:
    config = OuterHparams("run")
    assert dataclasses.is_dataclass(config)
    assert [f.name for f in dataclasses.fields(config)] == ["name", "rate", "tags", "inner", "pair"]
    assert dataclasses.asdict(config) == {
        "name": "run",
        "rate": 0.5,
        "tags": [],
        "inner": {"width": 4},
        "pair": (0.1, 0.2),
    }
    assert config.initialize_object() == {"name": "run", "inner": [0, 0, 0, 0]}


def test_dict_round_trip_with_nested_config() -> None:
    config = OuterHparams.from_dict({"name": "run", "rate": 1, "inner": {"width": 2}, "tags": ["a"]})
    assert config.inner == InnerHparams(width=2)
    assert config.rate == 1.0
    assert config.to_dict() == dataclasses.asdict(config)
    assert OuterHparams.from_dict(config.to_dict()) == config


def test_unknown_key_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        OuterHparams.from_dict({"name": "run", "rte": 0.1})
    message = str(info.value)
    assert "OuterHparams" in message and "['rte']" in message
    assert "['name', 'rate', 'tags', 'inner', 'pair']" in message


def test_unknown_keyword_in_constructor() -> None:
    with pytest.raises(ValueError, match=r"Invalid OuterHparams: unknown field 'colour'.*'name', 'rate'"):
        OuterHparams(name="run", colour="red")  # type: ignore[call-arg]


def test_wrong_type_names_class_field_value_and_expected_type() -> None:
    with pytest.raises(ValueError) as info:
        OuterHparams.from_dict({"name": "run", "rate": "fast"})
    message = str(info.value)
    assert "OuterHparams" in message
    assert "'rate'" in message
    assert "'fast'" in message
    assert "float" in message
    assert not isinstance(info.value, TypeError)


def test_nested_wrong_type_and_nested_validation() -> None:
    with pytest.raises(ValueError, match=r"field 'inner.width' received 'wide' \(str\)"):
        OuterHparams.from_dict({"name": "run", "inner": {"width": "wide"}})
    with pytest.raises(ValueError, match=r"width=0 must be positive"):
        OuterHparams.from_dict({"name": "run", "inner": {"width": 0}})


def test_missing_required_field() -> None:
    with pytest.raises(ValueError, match=r"Invalid OuterHparams: required field 'name' is missing"):
        OuterHparams.from_dict({})


def test_validate_hook_runs_at_construction() -> None:
    with pytest.raises(ValueError, match=r"Invalid OuterHparams: rate=2.0 must lie in \[0, 1\]"):
        OuterHparams(name="run", rate=2.0)


def test_assignment_is_validated_and_a_rejected_value_is_not_kept() -> None:
    config = OuterHparams(name="run")
    config.rate = 1  # converted like at construction
    assert config.rate == 1.0
    with pytest.raises(ValueError, match=r"field 'rate' received 'x'"):
        config.rate = "x"  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"rate=3.0 must lie in \[0, 1\]"):
        config.rate = 3.0
    assert config.rate == 1.0
    with pytest.raises(ValueError, match=r"OuterHparams has no field 'rte'"):
        config.rte = 0.1  # type: ignore[attr-defined]


def test_from_dict_needs_a_mapping() -> None:
    with pytest.raises(ValueError, match=r"expects a mapping.*list"):
        OuterHparams.from_dict(["name", "run"])  # type: ignore[arg-type]


def test_abstract_and_undecorated_classes() -> None:
    @hparams
    class NoFactory(Hparams):
        x: int = 1

    with pytest.raises(TypeError):
        NoFactory()  # type: ignore[abstract]

    class Undecorated(Hparams):
        def initialize_object(self) -> None:
            return None

    with pytest.raises(TypeError, match="decorate it with @hparams"):
        Undecorated.from_dict({})
    with pytest.raises(TypeError, match="decorate it with @hparams"):
        Undecorated().to_dict()


def test_subclass_inherits_fields() -> None:
    @hparams
    class WiderHparams(InnerHparams):
        height: int = 2

    config = WiderHparams.from_dict({"width": 3, "height": 5})
    assert config.to_dict() == {"width": 3, "height": 5}
    with pytest.raises(ValueError, match="width=-1 must be positive"):
        WiderHparams(width=-1)
