"""The checks of a recipe's top-level values, each problem located at its recipe key.

:class:`~composer.config.TrainerHparams` runs these on the values of a recipe before it builds anything, and collects
every problem instead of stopping at the first, so that ``composer train`` lists them all in one message:

* :func:`type_problems`: each value against its field's declared type alone. The numeric fields are pydantic strict
  types, so a bool is not a number here (``train_batch_size: true`` is refused rather than read as 1);
* :func:`value_problems`: the batch sizes and the methods' composition, and the Trainer's arguments as
  :func:`composer.trainer.arguments.argument_problems` checks them (ranges, times, names, pairs that must agree).

Messages say what was received, what is expected and what to write instead; they name the recipe key, never the
Trainer's internal argument.

Example:
    >>> from composer.config import TrainerHparams
    >>> typed, problems = type_problems(TrainerHparams, {"train_batch_size": True, "seed": -1})
    >>> [str(p) for p in problems]
    ['train_batch_size: received True (bool); expected int (a bool is not a number here). Set train_batch_size: 32.']
    >>> [str(p) for p in value_problems(typed)]
    ['seed: received -1; expected an integer in [0, 4294967295] (2**32 - 1), or null for a random seed. Set seed: 0.']
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

import pydantic
import pydantic.fields

from composer.algorithms.composition import composition_problems
from composer.config.config_error import ConfigError
from composer.config.recipe_schema import type_problem
from composer.core.hparams import Hparams, recipe_annotation
from composer.trainer.arguments import argument_problems

__all__ = ["bool_number_problems", "type_problems", "value_problems"]

# An example value for each field whose default is no example (required fields, None defaults), for the fix.
_EXAMPLES: dict[str, str] = {
    "train_batch_size": "32",
    "max_duration": "10ep",
    "eval_batch_size": "64",
    "seed": "0",
    "grad_clip_norm": "1.0",
    "eval_subset_num_batches": "20",
    "train_subset_num_batches": "100",
    "eval_interval": "1ep",
    "save_interval": "1ep",
}

_NUMBERS = (int, float)


def _fields(cls: type[Hparams]) -> dict[str, pydantic.fields.FieldInfo]:
    """The fields of an :func:`~composer.core.hparams.hparams` class, as pydantic resolved them."""
    fields: dict[str, pydantic.fields.FieldInfo] = cls.__pydantic_fields__  # type: ignore[attr-defined]
    return fields


@functools.cache
def _adapter(cls: type[Hparams], name: str) -> tuple[pydantic.TypeAdapter[Any], list[str]]:
    """The validator of field ``name`` of the pydantic dataclass ``cls`` alone, and its types in words."""
    field = _fields(cls)[name]
    annotation = field.rebuild_annotation()
    strict = bool(getattr(cls, "__pydantic_config__", {}).get("strict"))  # as the class checks it
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
        annotation, config=pydantic.ConfigDict(arbitrary_types_allowed=True, strict=strict)
    )
    # In words, the types a recipe can write (a Time, a device or a callable is for Python callers).
    plain = recipe_annotation(annotation).replace("None", "null").split(" | ")
    if strict and "float" in plain and "int" not in plain:
        plain.insert(plain.index("float") + 1, "int")  # a strict float takes an int too
    return adapter, plain if plain != ["Any"] else [_type_name(member) for member in _members(annotation)]


def _members(annotation: Any) -> list[Any]:
    """The types a (possibly Annotated, possibly union) annotation admits."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [member for arg in typing.get_args(annotation) for member in _members(arg)]
    return [annotation]


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _example(cls: type[Any], name: str) -> str:
    if name in _EXAMPLES:
        return _EXAMPLES[name]
    default = _fields(cls)[name].default
    return "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default)


def type_problems(cls: type[Hparams], values: Mapping[str, Any]) -> tuple[dict[str, Any], list[ConfigError]]:
    """Validates each of ``values`` against the type of the field of ``cls`` that it sets, on its own.

    Args:
        cls: A config class (an :func:`~composer.core.hparams.hparams` dataclass).
        values: Field name -> value, as read from the recipe.

    Returns:
        The values that have their field's type (converted as the field converts them), and a problem for each
        value that does not.
    """
    typed: dict[str, Any] = {}
    problems: list[ConfigError] = []
    for name, value in values.items():
        adapter, expected = _adapter(cls, name)
        try:
            typed[name] = adapter.validate_python(value)
        except pydantic.ValidationError:
            problems.append(type_problem(name, value, expected, _example(cls, name)))
    return typed, problems


def bool_number_problems(cls: type[Hparams], values: Mapping[str, Any]) -> list[str]:
    """The values that are bools where a field of ``cls`` takes a number and no bool, one sentence each.

    pydantic reads ``True`` as 1 for an ``int`` field even in a config that is not strict; a recipe that writes
    ``max_sequence_length: true`` means something else, so every recipe entry is checked with this.

    Example:
        >>> from composer.config.models import MLPHparams
        >>> bool_number_problems(MLPHparams, {"in_features": True, "hidden": [8]})
        ["field 'in_features' received True (bool) but expects int (a bool is not a number here)"]
    """
    fields = _fields(cls)
    problems: list[str] = []
    for name, value in values.items():
        if isinstance(value, bool) and name in fields:
            members = _members(fields[name].rebuild_annotation())
            if bool not in members and any(member in _NUMBERS for member in members):
                expected = " or ".join(_type_name(member) for member in members)
                problems.append(
                    f"field {name!r} received {value!r} (bool) but expects {expected} (a bool is not a number here)"
                )
    return problems


def value_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """The problems of a recipe's typed top-level values, each at its key.

    The Trainer's arguments are checked by :func:`composer.trainer.arguments.argument_problems`, the one place that
    checks them (the Trainer calls it too); what a recipe adds (batch sizes, and the methods by name) is checked here.

    Args:
        values: Field name -> value, each of its field's type (see :func:`type_problems`); a field that is absent
            is not checked.

    Returns:
        A problem for each value out of range: the recipe's own fields first, then the Trainer's arguments.
    """
    problems = [
        *_batch_size(values, "train_batch_size", "the samples per training batch", ""),
        *_batch_size(
            values, "eval_batch_size", "the samples per evaluation batch", ", or null to use train_batch_size"
        ),
    ]
    batch_size, grad_accum = values.get("train_batch_size"), values.get("grad_accum")
    if isinstance(batch_size, int) and isinstance(grad_accum, int) and grad_accum > batch_size >= 1:
        problems.append(
            ConfigError(
                "grad_accum",
                f"received {grad_accum!r}, more microbatches than the {batch_size} samples of a batch "
                f"(train_batch_size: {batch_size}); each microbatch needs a sample. Set grad_accum to at most "
                f"{batch_size}, or raise train_batch_size.",
            )
        )
    problems += [ConfigError(p.argument, p.for_recipe()) for p in argument_problems(values)]
    algorithms = values.get("algorithms")
    if isinstance(algorithms, Mapping):
        composition = composition_problems(list(algorithms))
        if composition:
            problems.append(ConfigError("algorithms", " ".join(composition)))
    return problems


def _batch_size(values: Mapping[str, Any], name: str, what: str, null: str) -> list[ConfigError]:
    value = values.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value >= 1:
        return []
    example = _EXAMPLES[name]
    return [ConfigError(name, f"received {value!r}; expected an integer >= 1 ({what}){null}. Set {name}: {example}.")]
