"""The first check of a recipe, made without torch: its keys, names and top-level types, against the registry view.

Building :class:`~composer.config.TrainerHparams` imports the registries and with them torch (seconds), so a recipe
is checked in two steps. :func:`schema_problems` reads only the view of the registries generated from their sources
(:mod:`composer.config.manifest`) and finds, within a fraction of a second:

* unknown top-level keys and missing required ones;
* a ``model``, dataset, optimizer, algorithm, scheduler, callback or logger that no registry holds, and malformed
  entries (two models, a list item that is not a name);
* unknown keys in an entry's fields;
* a top-level value of the wrong type (``train_batch_size: many``), checked by the field's own pydantic type.

Each problem is worded exactly as ``TrainerHparams.from_dict`` words it (a test checks that they agree), and when
there is any, :func:`~composer.config.load_recipe` reports them all without importing torch. The rest (values inside
an entry, ranges, times, composition, the model against its data) is checked once these are fixed.

Example:
    >>> for problem in schema_problems({"model": "mlpp", "train_batch_size": "many", "max_duraton": "1ep"}):
    ...     print(problem)
    model.mlpp: unknown model 'mlpp'. Did you mean 'mlp'? The valid names are ... (run `composer list` for a line on each).
    train_batch_size: received 'many' (str); expected int. Set train_batch_size: 32.
    max_duraton: unknown key. Did you mean 'max_duration'? The valid top-level keys are [...].
    train_dataset: required field is missing. Choose one of [...].
    max_duration: required field is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from composer.config.config_error import ConfigError, suggest
from composer.config.manifest import load_manifest, load_trainer_schema

__all__ = ["in_recipe_order", "key_problems", "schema_problems", "type_problem"]


class _Undecided(Exception):
    """A problem whose wording only the full check knows: the first check leaves the whole recipe to it."""


def schema_problems(config: Any) -> list[ConfigError]:
    """The problems of a recipe's keys, registry names and top-level types, found without importing torch.

    Args:
        config: The recipe as plain values (what :func:`~composer.config.load_config` returns).

    Returns:
        list[ConfigError]: In the order ``TrainerHparams.from_dict`` lists them; empty when it finds none, or when
        the recipe holds something only the full check can word (then that check reports everything).
    """
    if not isinstance(config, Mapping):
        return []
    try:
        return _problems(config)
    except (_Undecided, TypeError):  # TypeError: keys that do not sort, which the full check reports its own way
        return []


def _problems(config: Mapping[str, Any]) -> list[ConfigError]:
    schema, kinds = load_trainer_schema(), load_manifest()
    fields: dict[str, dict[str, Any]] = schema["fields"]
    one_of: dict[str, list[str]] = schema["one_of"]
    sets: dict[str, list[str]] = schema["sets"]
    required = {name: field["required"] for name, field in fields.items()}
    values, problems = key_problems(config, required, {name: list(kinds[kind]) for name, (kind, _) in one_of.items()})
    for name, (kind, noun) in one_of.items():
        if name in values:
            _check_one(name, values[name], kinds[kind], noun, problems)
    for name, (kind, noun) in sets.items():
        if name in values:
            _check_set(name, values[name], kinds[kind], noun, problems)
    for name, value in values.items():
        annotation = fields[name]["annotation"]
        if annotation is not None and not _has_type(annotation, value):
            words = [_WORDS.get(member.strip(), member.strip()) for member in annotation.split("|")]
            problems.append(type_problem(name, value, words, fields[name]["example"]))
    return in_recipe_order(problems, [*config, *fields])


def key_problems(
    recipe: Mapping[str, Any], required: Mapping[str, bool], choices: Mapping[str, list[str]]
) -> tuple[dict[str, Any], list[ConfigError]]:
    """The values of a recipe's known top-level keys, and a problem for each unknown key and missing required field.

    Shared by this schema check and :meth:`composer.config.TrainerHparams.from_dict`, which word them alike.

    Args:
        recipe: The recipe as plain values.
        required: Each top-level field, in order, mapped to whether a recipe must give it.
        choices: The registry names of each field that picks one entry (the fix a missing one suggests).
    """
    problems = [
        ConfigError(
            str(key), f"unknown key.{suggest(str(key), required)} The valid top-level keys are {list(required)}."
        )
        for key in recipe
        if key not in required
    ]
    values = {key: value for key, value in recipe.items() if key in required}
    for name, needed in required.items():
        if needed and values.get(name) is None:
            choice = f" Choose one of {sorted(choices[name])}." if name in choices else ""
            problems.append(ConfigError(name, f"required field is missing.{choice}"))
            values.pop(name, None)
    return values, problems


def type_problem(name: str, value: Any, expected: list[str], example: str) -> ConfigError:
    """A top-level value of the wrong type: received, ``expected`` (the types' words) and the value to write instead.

    Shared by this schema check and :func:`composer.config.field_checks.type_problems`, which word it alike.
    """
    numeric = isinstance(value, bool) and any(word in ("int", "float") for word in expected)
    note = " (a bool is not a number here)" if numeric else ""
    return ConfigError(
        name,
        f"received {value!r} ({type(value).__name__}); expected {' or '.join(expected)}{note}. Set {name}: {example}.",
    )


def in_recipe_order(problems: list[ConfigError], order: list[Any]) -> list[ConfigError]:
    """``problems`` sorted by the top-level key each is at, in ``order`` (the recipe's keys, then missing fields)."""

    def top(problem: ConfigError) -> int:
        key = problem.where.split(".", 1)[0].split(" ", 1)[0]
        return order.index(key) if key in order else 0

    return sorted(problems, key=top)


# A type as written in the class -> the word a type error uses for it (others are written as they are).
_WORDS = {"StrictInt": "int", "StrictStr": "str", "StrictFloat": "float", "StrictBool": "bool", "None": "null"}


def check_registered(path: str, name: Any, registry: Mapping[str, Any], noun: str) -> None:
    """Raises a ConfigError located at ``path`` when ``name`` is not a name of ``registry`` (with a suggestion).

    Shared by this schema check and the builder of :mod:`composer.config.trainer_hparams`.
    """
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(
            path,
            f"unknown {noun} {name!r}.{suggest(str(name), registry)} The valid names are {sorted(registry)} "
            "(run `composer list` for a line on each).",
        )


def _check_entry(path: str, name: Any, fields: Any, registry: Mapping[str, Any], noun: str) -> None:
    """Raises the ConfigError that building ``registry[name]`` from ``fields`` would, if it is about names or keys."""
    check_registered(path, name, registry, noun)
    entry = registry[name]
    if fields is None or entry["fields"] is None:  # None: its source could not be read; the full check knows
        return
    valid = list(entry["fields"])
    if not isinstance(fields, Mapping):
        raise ConfigError(
            path,
            f"expected a mapping of {entry['config']} fields {valid} (or nothing, for the defaults), got "
            f"{fields!r} ({type(fields).__name__}).",
        )
    unknown = [key for key in fields if key not in valid]
    if not unknown:
        return
    if not entry["plain_from_dict"] or any(isinstance(value, bool) for value in fields.values()):
        raise _Undecided  # a bool may be refused as a number first, in words that need the field types
    raise ConfigError(
        path,
        f"{entry['config']} got unknown key(s) {unknown}; the valid keys are {valid}. "
        "Remove the unknown keys or correct their spelling.",
    )


def one_entry(field: str, value: Any, registry: Mapping[str, Any], noun: str) -> tuple[Any, Any]:
    """``(name, fields)`` of a one-of field given as ``name`` or ``{name: fields}`` (not None).

    Entries switched off (``name: false``) are left out first. Raises a ConfigError when not exactly one is left.
    Shared by this schema check and the builder of :mod:`composer.config.trainer_hparams`.
    """
    if isinstance(value, str):
        return value, None
    entries = {k: v for k, v in value.items() if v is not False} if isinstance(value, Mapping) else None
    if entries is None or len(entries) != 1:
        got = sorted(entries) if entries is not None else repr(value)
        raise ConfigError(
            field,
            f"expected one {noun} as a one-key mapping {{name: {{fields}}}} or a name, got {got}. The valid names "
            f"are {sorted(registry)}. To switch on the command line, remove the old one too: {field}.OLD=false.",
        )
    ((name, fields),) = entries.items()
    return name, fields


def set_entries(field: str, value: Any, noun: str, problems: list[ConfigError]) -> list[tuple[Any, Any]]:
    """``(name, fields)`` pairs, in order, of a set field: a mapping ``{name: fields}`` or a list of names and one-key
    mappings (None: none).

    Entries switched off (``fields`` False, e.g. by an override ``algorithms.mixup=false``) are left out; a malformed
    item or a repeated name is left out and its problem appended to ``problems``, so that every entry is checked.
    Shared by this schema check and the builder of :mod:`composer.config.trainer_hparams`.
    """
    if value is None:
        return []
    items: list[tuple[Any, Any]] = []
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                items.append((item, None))
            elif isinstance(item, Mapping) and len(item) == 1:
                items.extend(item.items())
            else:
                problems.append(
                    ConfigError(
                        f"{field}.{index}",
                        f"expected a {noun} name or a one-key mapping {{name: {{fields}}}}, got {item!r}.",
                    )
                )
    else:
        problems.append(ConfigError(field, f"expected a mapping {{name: {{fields}}}} of {noun}s, got {value!r}."))
    entries: list[tuple[Any, Any]] = []
    seen: set[Any] = set()
    for name, fields in items:
        if fields is False:
            continue
        if name in seen:
            problems.append(
                ConfigError(f"{field}.{name}", f"the {noun} {name!r} is given twice; give each {noun} once.")
            )
            continue
        seen.add(name)
        entries.append((name, fields))
    return entries


def _check_one(field: str, value: Any, registry: Mapping[str, Any], noun: str, problems: list[ConfigError]) -> None:
    if value is None:
        return
    try:
        name, fields = one_entry(field, value, registry, noun)
        _check_entry(f"{field}.{name}", name, fields, registry, noun)
    except ConfigError as error:
        problems.append(error)


def _check_set(field: str, value: Any, registry: Mapping[str, Any], noun: str, problems: list[ConfigError]) -> None:
    for name, fields in set_entries(field, value, noun, problems):
        try:
            _check_entry(f"{field}.{name}", name, fields, registry, noun)
        except ConfigError as error:
            problems.append(error)


def _has_type(annotation: str, value: Any) -> bool:
    """Whether ``value`` passes the pydantic type written ``annotation`` (as the field's own validator would)."""
    import pydantic

    try:
        _adapter(annotation).validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


@functools.cache
def _adapter(annotation: str) -> Any:
    """The pydantic validator of a union of plain types written as in the class (``StrictInt | None``)."""
    import typing

    import pydantic

    known: dict[str, Any] = {
        "StrictInt": pydantic.StrictInt,
        "StrictStr": pydantic.StrictStr,
        "StrictFloat": pydantic.StrictFloat,
        "StrictBool": pydantic.StrictBool,
        "int": int,
        "float": float,
        "str": str,
        "bool": bool,
        "None": None,
        "list[str]": list[str],
        "dict[str, Any]": dict[str, Any],
    }
    members = [member.strip() for member in annotation.split("|")]
    if any(member not in known for member in members):
        raise _Undecided  # a type this check cannot rebuild without torch: the full check decides
    resolved: Any = typing.Union[tuple(known[member] for member in members)]  # noqa: UP007 (built from a list)
    return pydantic.TypeAdapter(resolved, config=pydantic.ConfigDict(arbitrary_types_allowed=True))
