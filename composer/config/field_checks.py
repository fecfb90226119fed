"""The checks of a recipe's top-level values, each problem located at its recipe key.

:class:`~composer.config.TrainerHparams` runs these on the values of a recipe before it builds anything, and collects
every problem instead of stopping at the first, so that ``composer train`` lists them all in one message:

* :func:`type_problems`: each value against its field's declared type alone. The numeric fields are pydantic strict
  types, so a bool is not a number here (``train_batch_size: true`` is refused rather than read as 1);
* :func:`value_problems`: ranges (``seed`` in [0, 2**32 - 1], a finite positive ``grad_clip_norm``), times, the
  precision and distributed-strategy names, the methods' composition, and pairs of fields that must agree.

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
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

import pydantic
import pydantic.fields

from composer.algorithms.composition import composition_problems
from composer.config.config_error import ConfigError
from composer.core.hparams import Hparams, recipe_annotation
from composer.core.precision import Precision
from composer.core.time import Time, TimeUnit

__all__ = ["SEED_LIMIT", "bool_number_problems", "type_problems", "value_problems"]

SEED_LIMIT = 2**32
"""Seeds lie in [0, SEED_LIMIT): NumPy's global generator, which every run seeds, takes no others."""

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
def _adapter(cls: type[Hparams], name: str) -> tuple[pydantic.TypeAdapter[Any], str, bool]:
    """The validator of field ``name`` of the pydantic dataclass ``cls`` alone, its type in words, and whether the
    type is numeric."""
    field = _fields(cls)[name]
    annotation = field.rebuild_annotation()
    strict = bool(getattr(cls, "__pydantic_config__", {}).get("strict"))  # as the class checks it
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
        annotation, config=pydantic.ConfigDict(arbitrary_types_allowed=True, strict=strict)
    )
    members = _members(annotation)
    # In words, the types a recipe can write (a Time, a device or a callable is for Python callers).
    plain = recipe_annotation(annotation).replace("None", "null").split(" | ")
    if strict and "float" in plain and "int" not in plain:
        plain.insert(plain.index("float") + 1, "int")  # a strict float takes an int too
    words = " or ".join(plain) if plain != ["Any"] else " or ".join(_type_name(member) for member in members)
    return adapter, words, any(m in _NUMBERS for m in members)


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
        adapter, expected, numeric = _adapter(cls, name)
        try:
            typed[name] = adapter.validate_python(value)
        except pydantic.ValidationError:
            note = " (a bool is not a number here)" if numeric and isinstance(value, bool) else ""
            problems.append(
                ConfigError(
                    name,
                    f"received {value!r} ({type(value).__name__}); expected {expected}{note}. "
                    f"Set {name}: {_example(cls, name)}.",
                )
            )
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


def _positive_int(values: Mapping[str, Any], name: str, what: str, nullable: str = "") -> list[ConfigError]:
    value = values.get(name)
    if not isinstance(value, int) or value >= 1:
        return []
    null = f", or null {nullable}" if nullable else ""
    example = _EXAMPLES.get(name, "1")
    return [ConfigError(name, f"received {value!r}; expected an integer >= 1 ({what}){null}. Set {name}: {example}.")]


def _grad_accum_word(values: Mapping[str, Any]) -> list[ConfigError]:
    value = values.get("grad_accum")
    if not isinstance(value, str) or value.strip().lower() == "auto":
        return []
    return [
        ConfigError(
            "grad_accum",
            f"received {value!r}; expected an integer >= 1 (the microbatches per batch) or auto (find the largest "
            "microbatch that fits in GPU memory). Set grad_accum: auto, or grad_accum: 2.",
        )
    ]


def _positive_number(values: Mapping[str, Any], name: str, what: str, example: str) -> list[ConfigError]:
    value = values.get(name)
    if not isinstance(value, _NUMBERS) or (math.isfinite(value) and value > 0):
        return []
    return [ConfigError(name, f"received {value!r}; expected a finite number > 0 ({what}). Set {name}: {example}.")]


def _time_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    problems: list[ConfigError] = []
    for name in ("max_duration", "eval_interval", "save_interval"):
        value = values.get(name)
        if value is None:
            continue
        example = _EXAMPLES[name]
        try:
            time = Time.from_input(value, default_unit=TimeUnit.EPOCH)
        except (ValueError, TypeError, OverflowError) as error:
            problems.append(
                ConfigError(
                    name,
                    f"received {value!r}, which is not a time: {str(error).rstrip('.')}. Use a number with a unit "
                    f"such as '10ep', '500ba', '20000sp', '1e6tok' or '0.5dur' (a plain integer means epochs). "
                    f"Set {name}: {example}.",
                )
            )
            continue
        if time.value <= 0:
            problems.append(ConfigError(name, f"received {value!r}; expected a positive time. Set {name}: {example}."))
        elif name == "max_duration" and time.unit == TimeUnit.DURATION:
            problems.append(
                ConfigError(
                    name,
                    f"received {value!r}, a fraction of the run, which needs a run length to refer to; expected "
                    f"epochs, batches, samples or tokens. Set max_duration: {example}.",
                )
            )
    return problems


def _scaled_duration_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """``max_duration`` times ``scale_schedule_ratio`` must not round down to nothing (as the State computes it)."""
    duration, ratio = values.get("max_duration"), values.get("scale_schedule_ratio", 1.0)
    if duration is None or not isinstance(ratio, _NUMBERS) or not (math.isfinite(ratio) and ratio > 0) or ratio == 1:
        return []
    try:
        time = Time.from_input(duration, default_unit=TimeUnit.EPOCH)
        scaled = time * ratio
    except (ValueError, TypeError, OverflowError):
        return []  # reported by the time checks
    if time.value <= 0 or scaled.value != 0:
        return []
    return [
        ConfigError(
            "max_duration and scale_schedule_ratio",
            f"max_duration {duration!r} times scale_schedule_ratio {ratio!r} rounds down to zero, so nothing would "
            "train. Raise scale_schedule_ratio, or give max_duration in a finer unit (batches or samples).",
        )
    ]


def _device_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    from composer.utils.devices import resolve_device

    device = values.get("device")
    if not isinstance(device, str):
        return []
    try:
        resolve_device(device)
    except ValueError as error:
        message = str(error).removeprefix(f"device={device!r} but ")
        return [ConfigError("device", f"received {device!r}: {message}")]
    return []


def _fsdp_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """``fsdp_config``'s keys and values (whether the run is launched is the Trainer's to check)."""
    from composer.distributed.fsdp import FSDPConfig

    config = values.get("fsdp_config")
    if not isinstance(config, Mapping):
        return []
    try:
        FSDPConfig.from_dict(config)
    except (ValueError, TypeError) as error:
        return [ConfigError("fsdp_config", f"received {dict(config)!r}: {error}")]
    return []


def _profiler_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """``profiler``'s keys and values."""
    from composer.profiler.profiler import Profiler

    config = values.get("profiler")
    if not isinstance(config, Mapping):
        return []
    try:
        Profiler.from_dict(config)
    except (ValueError, TypeError) as error:
        return [ConfigError("profiler", f"received {dict(config)!r}: {error}")]
    return []


def _named_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """The precision and the distributed strategy: names from a fixed set."""
    from composer.distributed.ddp import DDPSyncStrategy

    problems: list[ConfigError] = []
    for name, choices in (
        ("precision", [p.value for p in Precision]),
        ("ddp_sync_strategy", [s.value for s in DDPSyncStrategy]),
    ):
        value = values.get(name)
        if isinstance(value, str) and value not in choices:
            problems.append(
                ConfigError(name, f"received {value!r}; expected one of {choices}. Set {name}: {choices[0]}.")
            )
    return problems


def value_problems(values: Mapping[str, Any]) -> list[ConfigError]:
    """Checks the ranges, times and names of a recipe's typed top-level values, and the fields that must agree.

    Args:
        values: Field name -> value, each of its field's type (see :func:`type_problems`); a field that is absent
            is not checked.

    Returns:
        A problem for each value out of range, in the order of the fields.
    """
    problems = [
        *_positive_int(values, "train_batch_size", "the samples per training batch"),
        *_positive_int(values, "eval_batch_size", "the samples per evaluation batch", "to use train_batch_size"),
        *_positive_int(values, "grad_accum", "the microbatches per batch, or auto"),
        *_grad_accum_word(values),
        *_time_problems(values),
        *_positive_number(values, "scale_schedule_ratio", "the factor on the run's times (1.0: as given)", "1.0"),
        *_scaled_duration_problems(values),
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
    seed = values.get("seed")
    if isinstance(seed, int) and not 0 <= seed < SEED_LIMIT:
        problems.append(
            ConfigError(
                "seed",
                f"received {seed!r}; expected an integer in [0, {SEED_LIMIT - 1}] (2**32 - 1), or null for a random "
                "seed. Set seed: 0.",
            )
        )
    if values.get("grad_clip_norm") is not None:
        problems += _positive_number(values, "grad_clip_norm", "the largest gradient norm; null clips nothing", "1.0")
    problems += _positive_int(values, "eval_subset_num_batches", "the batches per evaluation", "for all of them")
    problems += _positive_int(values, "train_subset_num_batches", "the batches per epoch", "for all of them")
    keep = values.get("save_num_checkpoints_to_keep")
    if isinstance(keep, int) and keep != -1 and keep < 1:
        problems.append(
            ConfigError(
                "save_num_checkpoints_to_keep",
                f"received {keep!r}; expected the number of newest checkpoints to keep (an integer >= 1), or -1 to "
                "keep them all. Set save_num_checkpoints_to_keep: -1, or 3 for example.",
            )
        )
    problems += _positive_number(values, "dist_timeout", "seconds to wait for the other processes", "300.0")
    problems += _positive_number(
        values, "preemption_grace_period", "seconds to save a checkpoint after a SIGTERM (under 30)", "20.0"
    )
    problems += _device_problems(values)
    problems += _fsdp_problems(values)
    problems += _profiler_problems(values)
    problems += _named_problems(values)
    algorithms = values.get("algorithms")
    if isinstance(algorithms, Mapping):
        composition = composition_problems(list(algorithms))
        if composition:
            problems.append(ConfigError("algorithms", " ".join(composition)))
    return problems
