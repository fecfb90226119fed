"""The typed config base: validation, clear errors, dict round trips."""

from __future__ import annotations

import dataclasses
import enum
import io
from typing import Any

import pytest

from composer.callbacks import ExportForInference
from composer.core.hparams import REQUIRED, Hparams, argument_docs, derive_fields, field_docs, hparams, hparams_for


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


# ---- configs derived from a constructor ------------------------------------------------------------------------


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Widget:
    """A thing to build from a config.

    Args:
        size (int): How big,
            in units.
        label: Its name.
        level: How loud.
        shape: Its outline.
        stream: Where it writes (Python only).
    """

    def __init__(
        self,
        size: int,
        label: str = "w",
        level: Level | str = Level.LOW,
        shape: tuple[int, ...] = (1, 2),
        stream: io.StringIO | None = None,
    ) -> None:
        if size <= 0:
            raise ValueError(f"size={size} must be positive; use 1 or more.")
        if label == "bad":
            raise TypeError("label='bad' is not a label.")
        self.size, self.label, self.level, self.shape, self.stream = size, label, level, shape, stream


WidgetHparams = hparams_for(Widget)


def test_derived_fields_follow_the_signature() -> None:
    assert WidgetHparams.__name__ == "WidgetHparams" and WidgetHparams.__module__ == __name__
    fields = dataclasses.fields(WidgetHparams)
    # stream admits no recipe value (a stream) and has a default: left to Python.
    assert [f.name for f in fields] == ["size", "label", "level", "shape"]
    config = WidgetHparams(size=3)
    # Written as a recipe writes them: the enum member by its name (a tuple stays one: its type reads a list back).
    assert config.to_dict() == {"size": 3, "label": "w", "level": "low", "shape": (1, 2)}
    assert dataclasses.fields(hparams_for(ExportForInference))[1].default_factory() == ["torchscript", "onnx"]
    assert field_docs(WidgetHparams) == {
        "size": "How big, in units.",
        "label": "Its name.",
        "level": "How loud.",
        "shape": "Its outline.",
    }
    assert "See :class:" in (WidgetHparams.__doc__ or "") and "size: How big, in units." in (
        WidgetHparams.__doc__ or ""
    )


def test_derived_config_builds_and_checks_with_the_constructor() -> None:
    widget = WidgetHparams.from_dict({"size": 2, "level": "high", "shape": [3]}).initialize_object()
    assert isinstance(widget, Widget) and (widget.size, widget.level, widget.shape) == (2, "high", (3,))
    with pytest.raises(ValueError, match=r"Invalid WidgetHparams: size=0 must be positive; use 1 or more"):
        WidgetHparams(size=0)
    with pytest.raises(ValueError, match=r"Invalid WidgetHparams: label='bad' is not a label"):
        WidgetHparams(size=1, label="bad")  # the constructor's TypeError, reported like a wrong value
    with pytest.raises(ValueError, match=r"field 'size' received 'big'"):
        WidgetHparams(size="big")
    with pytest.raises(ValueError, match=r"required field 'size' is missing"):
        WidgetHparams.from_dict({})
    config = WidgetHparams(size=1)
    with pytest.raises(ValueError, match="size=-1 must be positive"):
        config.size = -1
    assert config.size == 1


def test_overrides_give_the_seed_defaults_and_order() -> None:
    config_class = hparams_for(
        Widget, name="SeedWidgetHparams", defaults={"size": 5, "label": REQUIRED}, first=["label"]
    )
    assert [f.name for f in dataclasses.fields(config_class)] == ["label", "size", "level", "shape"]
    assert config_class(label="x").initialize_object().size == 5
    with pytest.raises(ValueError, match="required field 'label' is missing"):
        config_class()
    assert [f.name for f in dataclasses.fields(hparams_for(Widget, exclude=["shape"]))] == ["size", "label", "level"]


def test_a_missing_optional_package_is_left_to_the_build() -> None:
    class NeedsPackage:
        def __init__(self, x: int = 1) -> None:
            raise ImportError("pip install 'opencomposer[thing]'")

    config = hparams_for(NeedsPackage)(x=2)  # validation cannot build it: the build reports it
    with pytest.raises(ImportError, match="opencomposer"):
        config.initialize_object()


def test_required_argument_a_recipe_cannot_give_is_refused() -> None:
    class TakesStream:
        def __init__(self, stream: io.StringIO) -> None:
            self.stream = stream

    with pytest.raises(TypeError, match="'stream' has no default"):
        hparams_for(TakesStream)
    assert [f.name for f in dataclasses.fields(hparams_for(TakesStream, exclude=["stream"]))] == []


def test_function_config_binds_the_arguments() -> None:
    def ramp(state: object, *, steps: int, peak: float = 1.0) -> float:
        """A ramp.

        Args:
            state: The state.
            steps: Steps.
            peak: The top.
        """
        return peak / steps

    config_class = hparams_for(ramp, name="RampFnHparams", exclude=["state"])
    bound = config_class(steps=4).initialize_object()
    assert bound(None) == 0.25 and bound.keywords == {"steps": 4, "peak": 1.0}


def test_derive_fields_adds_the_constructor_fields_after_the_written_ones() -> None:
    @derive_fields(Widget, exclude=["label"], first=["size"])
    class PartHparams(Hparams):
        """Writes out what it adds.

        Args:
            extra: Its own field.
        """

        extra: str = "e"

        def validate(self) -> None:
            if self.extra == "":
                raise ValueError("extra must not be empty.")

        def initialize_object(self) -> Widget:
            return Widget(size=self.size, level=self.level)  # type: ignore[attr-defined]

    assert [f.name for f in dataclasses.fields(PartHparams)] == ["size", "extra", "level", "shape"]
    assert field_docs(PartHparams)["extra"] == "Its own field." and field_docs(PartHparams)["level"] == "How loud."
    assert PartHparams(size=2).initialize_object().size == 2
    with pytest.raises(ValueError, match="extra must not be empty"):
        PartHparams(size=2, extra="")


def test_argument_docs_reads_google_style_sections() -> None:
    def f(a: int, b: int) -> None:
        """Does.

        Args:
            a (int): First line
                second line.
            b: Bee.

        Returns:
            Nothing: ignored.
        """

    assert argument_docs(f) == {"a": "First line second line.", "b": "Bee."}
    assert argument_docs(lambda: None) == {}
