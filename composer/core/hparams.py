"""The typed config base that every ``*Hparams`` class in the library builds on.

A config class is a dataclass of plain values (numbers, strings, lists, nested configs) that YAML keys map to one to one,
plus :meth:`Hparams.initialize_object`, which builds the object the config describes. Decorate the class with
:func:`hparams` and subclass :class:`Hparams`:

* fields are validated when the object is built and again on every assignment (pydantic v2 dataclasses underneath);
* unknown keys are rejected, and the error lists the valid ones;
* a value of the wrong type raises a :class:`ValueError` that names the class, the field, the value received and the
  type expected;
* :meth:`Hparams.validate` is a hook for checks that span several fields or need more than a type (``lr > 0``);
* ``dataclasses.asdict`` works, so :meth:`Hparams.to_dict` and :meth:`Hparams.from_dict` round-trip.

Example:
    >>> from composer.core.hparams import Hparams, hparams
    >>> @hparams
    ... class RampHparams(Hparams):
    ...     steps: int
    ...     peak: float = 1.0
    ...
    ...     def validate(self) -> None:
    ...         if self.steps <= 0:
    ...             raise ValueError(f"steps must be positive, got {self.steps}; set steps to 1 or more.")
    ...
    ...     def initialize_object(self) -> list[float]:
    ...         return [self.peak * (i + 1) / self.steps for i in range(self.steps)]
    >>> config = RampHparams.from_dict({"steps": 4})
    >>> config
    RampHparams(steps=4, peak=1.0)
    >>> config.initialize_object()
    [0.25, 0.5, 0.75, 1.0]
    >>> config.to_dict()
    {'steps': 4, 'peak': 1.0}
    >>> RampHparams.from_dict({"steps": 4, "height": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: RampHparams got unknown key(s) ['height']; the valid keys are ['steps', 'peak']. ...
    >>> RampHparams.from_dict({"steps": "four"})
    Traceback (most recent call last):
    ...
    ValueError: Invalid RampHparams: field 'steps' received 'four' (str) but expects int ...
    >>> config.steps = 0
    Traceback (most recent call last):
    ...
    ValueError: Invalid RampHparams: steps must be positive, got 0; set steps to 1 or more.
    >>> config.steps
    4
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar, cast, dataclass_transform

import pydantic
import pydantic.dataclasses

__all__ = ["Hparams", "hparams"]

_T = TypeVar("_T")

# Extra keys are an error (a typo in a YAML file must not pass silently); assignment is validated like construction;
# fields may hold arbitrary classes (a torch dtype, a Time) that pydantic checks with isinstance.
_CONFIG = pydantic.ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)


@dataclass_transform(field_specifiers=(dataclasses.field, pydantic.Field))
def hparams(cls: type[_T]) -> type[_T]:
    """Turns a class into a validated config dataclass.

    The class becomes a pydantic v2 dataclass that forbids unknown fields, validates every assignment and accepts
    arbitrary types. Validation failures raise a plain :class:`ValueError` whose message names the class, the field,
    the value received and the type expected. Use it on every subclass of :class:`Hparams` that declares fields
    (the decorator is not inherited).

    Args:
        cls: The class to decorate; its annotated attributes become the fields.

    Returns:
        The same class, now a dataclass.

    Example:
        >>> import dataclasses
        >>> @hparams
        ... class PointHparams(Hparams):
        ...     x: float = 0.0
        ...     y: float = 0.0
        ...
        ...     def initialize_object(self) -> tuple[float, float]:
        ...         return (self.x, self.y)
        >>> PointHparams(1, 2)
        PointHparams(x=1.0, y=2.0)
        >>> dataclasses.asdict(PointHparams(y=3))
        {'x': 0.0, 'y': 3.0}
    """
    config_class = pydantic.dataclasses.dataclass(config=_CONFIG)(cls)
    pydantic_init = cast(Callable[..., None], config_class.__init__)
    pydantic_setattr = cast(Callable[[Any, str, Any], None], config_class.__setattr__)

    @functools.wraps(pydantic_init)  # keeps the fields' signature for help() and inspect.signature
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            pydantic_init(self, *args, **kwargs)
        except pydantic.ValidationError as error:
            raise ValueError(_explain(config_class, error)) from None

    def __setattr__(self: Any, name: str, value: Any) -> None:
        fields = {field.name for field in dataclasses.fields(self)}
        if name not in fields:
            raise ValueError(
                f"{type(self).__name__} has no field {name!r}; the valid fields are {sorted(fields)}. "
                "Check the spelling of the attribute."
            )
        missing = object()
        previous = self.__dict__.get(name, missing)
        try:
            pydantic_setattr(self, name, value)
        except pydantic.ValidationError as error:
            raise ValueError(_explain(config_class, error)) from None
        if isinstance(self, Hparams) and previous is not missing:
            # Cross-field checks run on assignment too; a rejected value leaves the config as it was.
            try:
                self.validate()
            except ValueError as error:
                object.__setattr__(self, name, previous)
                raise ValueError(f"Invalid {type(self).__name__}: {error}") from None

    setattr(config_class, "__init__", __init__)  # noqa: B010 (mypy rejects assigning a method directly)
    setattr(config_class, "__setattr__", __setattr__)  # noqa: B010
    return cast(type[_T], config_class)


class Hparams(abc.ABC):
    """The base class of every config class: typed fields, validation, and a factory for the object described.

    Subclasses declare their fields as annotated class attributes, are decorated with :func:`hparams`, and implement
    :meth:`initialize_object`. They may override :meth:`validate` for checks beyond the field types; it runs after
    construction and after every assignment.

    Example:
        >>> @hparams
        ... class ScaleHparams(Hparams):
        ...     factor: float
        ...
        ...     def validate(self) -> None:
        ...         if self.factor <= 0:
        ...             raise ValueError(f"factor must be positive, got {self.factor}; pass a value above 0.")
        ...
        ...     def initialize_object(self) -> Callable[[float], float]:
        ...         return lambda x: self.factor * x
        >>> ScaleHparams(factor=2.0).initialize_object()(3.0)
        6.0
        >>> ScaleHparams(factor=-1.0)
        Traceback (most recent call last):
        ...
        ValueError: Invalid ScaleHparams: factor must be positive, got -1.0; pass a value above 0.
    """

    def __post_init__(self) -> None:
        # pydantic calls this after the fields are validated, for top-level and nested configs alike.
        self.validate()

    def validate(self) -> None:  # noqa: B027 (an optional hook, not an abstract method)
        """Checks the fields beyond their types; raise :class:`ValueError` saying what to change. No-op by default."""

    @abc.abstractmethod
    def initialize_object(self, *args: Any, **kwargs: Any) -> Any:
        """Builds the object this config describes (subclasses choose their own arguments, if any)."""

    def to_dict(self) -> dict[str, Any]:
        """Returns the fields as a dict of plain values (nested configs become dicts), as ``dataclasses.asdict``."""
        if not dataclasses.is_dataclass(self):
            raise TypeError(f"{type(self).__name__} is not a config dataclass; decorate it with @hparams.")
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Builds the config from a mapping such as a parsed YAML section.

        Args:
            data: Field name -> value. Keys must be field names; missing keys take their defaults.

        Returns:
            The validated config.

        Raises:
            ValueError: If a key is not a field (the message lists the valid keys), or a value has the wrong type
                or fails :meth:`validate` (the message names the field and the value).
        """
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} is not a config dataclass; decorate it with @hparams.")
        if not isinstance(data, Mapping):
            raise ValueError(
                f"{cls.__name__}.from_dict expects a mapping of field names to values, got {type(data).__name__} "
                f"{data!r}."
            )
        valid = [field.name for field in dataclasses.fields(cls) if field.init]
        unknown = [key for key in data if key not in valid]
        if unknown:
            raise ValueError(
                f"{cls.__name__} got unknown key(s) {unknown}; the valid keys are {valid}. "
                "Remove the unknown keys or correct their spelling."
            )
        return cls(**data)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation  # the source text of the annotation (modules use `from __future__ import annotations`)
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _explain(cls: type[Any], error: pydantic.ValidationError) -> str:
    """Turns pydantic's report into one sentence per problem, naming the field, the value and what it accepts."""
    fields = {field.name: field for field in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    valid = [name for name, field in fields.items() if field.init]
    problems: list[str] = []
    for item in error.errors(include_url=False):
        kind = item["type"]
        loc = item["loc"]
        where = ".".join(str(part) for part in loc)
        value = item.get("input")
        if kind == "value_error":
            # A ValueError raised by validate(): its message already says what to do.
            cause = item.get("ctx", {}).get("error")
            message = str(cause) if cause is not None else item["msg"]
            problems.append(f"{where}: {message}" if where else message)
        elif kind in ("unexpected_keyword_argument", "no_such_attribute"):
            problems.append(f"unknown field {where!r}; the valid fields are {valid}")
        elif kind == "unexpected_positional_argument":
            problems.append(f"too many positional arguments ({value!r} is extra); the fields are {valid}")
        elif kind in ("missing", "missing_argument") and len(loc) == 1:
            problems.append(f"required field {where!r} is missing")
        elif kind == "multiple_argument_values":
            problems.append(f"field {where!r} was given both positionally and by keyword")
        else:
            top = loc[0] if loc else None
            expected = _type_name(fields[top].type) if isinstance(top, str) and top in fields else "another type"
            if kind == "missing":  # a missing item inside a field, such as the second of two betas
                problems.append(f"field {where!r} is missing; {top} expects {expected}")
            else:
                problems.append(
                    f"field {where!r} received {value!r} ({type(value).__name__}) but expects {expected} "
                    f"({item['msg']})"
                )
    return f"Invalid {cls.__name__}: " + "; ".join(problem.rstrip(".") for problem in problems) + "."
