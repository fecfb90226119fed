"""Config classes: typed dataclasses of plain values that YAML keys map to one to one, and the object each builds.

Most are derived from the constructor they build, in one line, with :func:`hparams_for`: a field per argument with
its type, default and doc, :meth:`Hparams.initialize_object` calling the constructor, whose own checks are the
config's. A class that adds logic (a dataset, a model, a recipe's own keys) is written out: decorate it with
:func:`hparams` and subclass :class:`Hparams`. Either way:

* fields are validated when the config is built and again on every assignment (pydantic v2 dataclasses underneath);
* unknown keys are rejected, and the error lists the valid ones;
* a value of the wrong type raises a :class:`ValueError` that names the class, the field, the value received and the
  type expected;
* ``dataclasses.asdict`` works, so :meth:`Hparams.to_dict` and :meth:`Hparams.from_dict` round-trip.

Example:
    >>> from composer.algorithms import LabelSmoothing
    >>> LabelSmoothingHparams = hparams_for(LabelSmoothing)
    >>> config = LabelSmoothingHparams.from_dict({"alpha": 0.1})
    >>> config, config.initialize_object()
    (LabelSmoothingHparams(alpha=0.1), LabelSmoothing(alpha=0.1))
    >>> LabelSmoothingHparams.from_dict({"alpha": 0.1, "beta": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: LabelSmoothingHparams got unknown key(s) ['beta']; the valid keys are ['alpha']. ...
    >>> config.alpha = "much"
    Traceback (most recent call last):
    ...
    ValueError: Invalid LabelSmoothingHparams: field 'alpha' received 'much' (str) but expects float ...
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import enum
import functools
import inspect
import re
import sys
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, MutableMapping, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, cast, dataclass_transform

import pydantic
import pydantic.dataclasses
import typing_extensions

from composer._docstrings import args_section

__all__ = [
    "REQUIRED",
    "DerivedHparams",
    "Hparams",
    "argument_docs",
    "derive_fields",
    "field_docs",
    "hparams",
    "hparams_for",
    "recipe_annotation",
]

_T = TypeVar("_T")
_H = TypeVar("_H", bound="Hparams")
_B = typing_extensions.TypeVar("_B", bound="Hparams", default="DerivedHparams")  # hparams_for's class: with its base

# Extra keys are an error (a typo in a YAML file must not pass silently); assignment is validated like construction;
# fields may hold arbitrary classes (a torch dtype, a Time) that pydantic checks with isinstance.
_CONFIG = pydantic.ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)


@dataclass_transform(field_specifiers=(dataclasses.field, pydantic.Field))
def hparams(cls: type[_T], *, strict: bool = False) -> type[_T]:
    """Turns a class into a validated config dataclass.

    The class becomes a pydantic v2 dataclass that forbids unknown fields, validates every assignment and accepts
    arbitrary types. Validation failures raise a plain :class:`ValueError` whose message names the class, the field,
    the value received and the type expected. Use it on every subclass of :class:`Hparams` that declares fields
    (the decorator is not inherited).

    Args:
        cls: The class to decorate; its annotated attributes become the fields.
        strict: Convert nothing: a bool is not a number and ``'3'`` not an int (pydantic's strict mode; an int is
            still a float). For the keys of a recipe, where ``train_batch_size: true`` is a mistake.

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
    config = pydantic.ConfigDict(**_CONFIG, strict=True) if strict else _CONFIG
    config_class = pydantic.dataclasses.dataclass(config=config)(cls)
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


# ---- configs derived from a constructor -------------------------------------------------------------------------

REQUIRED: Any = dataclasses.MISSING
"""In :func:`hparams_for`'s ``defaults``: the field has no default (a recipe must give it)."""

_CONTAINERS = (list, tuple, set, frozenset, dict, Sequence, MutableSequence, Mapping, MutableMapping, Iterable)


class DerivedHparams(Hparams):
    """A config class that :func:`hparams_for` derived from a constructor (or a function): the fields are its arguments.

    :meth:`initialize_object` calls the constructor with the fields; :meth:`validate` builds the object once and keeps
    nothing, so that the constructor's own checks, with their messages, are the config's checks. A function's config
    (a scheduler's) returns the function with the fields bound, and is checked by its base's :meth:`validate`.
    """

    target: ClassVar[Callable[..., Any]]
    """What the config builds: a class, or a function whose keyword arguments the fields are."""

    if TYPE_CHECKING:

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def arguments(self) -> dict[str, Any]:
        """The fields as keyword arguments, copied (the object built must not share the config's lists)."""
        return {field.name: copy.deepcopy(getattr(self, field.name)) for field in dataclasses.fields(self)}  # type: ignore[arg-type]

    def validate(self) -> None:
        """Builds the object and keeps nothing: its constructor's checks. A missing optional package is left to
        :meth:`initialize_object`, which raises it; warnings are left to it too, so that they show once."""
        if not isinstance(type(self).target, type):
            super().validate()
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.initialize_object()
            except ImportError:
                return
            except TypeError as error:  # a constructor's TypeError is a wrong value here, as pydantic's are
                raise ValueError(str(error)) from None

    def initialize_object(self) -> Any:
        """Calls the constructor with the fields; a function's config returns the function with them bound."""
        target = type(self).target
        if isinstance(target, type):
            return target(**self.arguments())
        return functools.partial(target, **self.arguments())


def hparams_for(
    target: Callable[..., Any],
    *,
    name: str | None = None,
    module: str | None = None,
    base: type[_B] | None = None,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    first: Sequence[str] = (),
    summary: str | None = None,
) -> type[_B]:
    """Derives a config class from ``target``'s signature and docstring: one field per argument a recipe can give.

    Each argument becomes a field of the same name and order, with its annotation, default and ``Args:`` line
    (:func:`field_docs`), leaving out ``self``, ``*args``, ``**kwargs``, ``exclude`` and defaulted arguments no YAML
    value can fill (a stream, a callable). Where a config must differ from its constructor (a seed page's defaults or
    order), say so with ``defaults`` and ``first`` rather than writing the class out.

    Args:
        target: The class (or function) the config builds.
        name: The class name; default: ``target``'s name plus ``Hparams``.
        module: The module the class is defined in; default: the caller's (as for ``collections.namedtuple``).
        base: Another base class to inherit from besides :class:`DerivedHparams` (its ``validate`` runs for a
            function's config).
        exclude: Arguments that are not fields.
        defaults: Field -> default, over the signature's; :data:`REQUIRED` makes a field required.
        first: Fields to put first, in this order; the others follow in the signature's order.
        summary: The first line of the class docstring; default: "See :class:`target`.".

    Returns:
        The config class, a validated dataclass (:func:`hparams`) whose ``initialize_object()`` calls ``target``.

    Raises:
        TypeError: If an argument without a default cannot be read from a recipe and is not excluded.

    Example:
        >>> class Ramp:
        ...     '''A ramp of values.
        ...
        ...     Args:
        ...         steps: How many values.
        ...     '''
        ...     def __init__(self, steps: int, peak: float = 1.0) -> None:
        ...         self.steps, self.peak = steps, peak
        >>> RampHparams = hparams_for(Ramp)
        >>> RampHparams(steps=4), field_docs(RampHparams)["steps"], RampHparams(steps=4).initialize_object().peak
        (RampHparams(steps=4, peak=1.0), 'How many values.', 1.0)
    """
    class_name = name or f"{target.__name__}Hparams"
    module = module or sys._getframe(1).f_globals.get("__name__", target.__module__)
    namespace: dict[str, Any] = {"__module__": module, "__qualname__": class_name, "target": staticmethod(target)}
    bases = (DerivedHparams,) if base is None else (DerivedHparams, base)
    config_class = type(class_name, bases, namespace)
    role = "class" if isinstance(target, type) else "func"
    first_line = summary or f"See :{role}:`~{target.__module__}.{target.__qualname__}`; the fields are its arguments."
    return derive_fields(target, exclude=exclude, defaults=defaults, first=first, summary=first_line)(config_class)


@dataclass_transform(field_specifiers=(dataclasses.field, pydantic.Field))
def derive_fields(
    target: Callable[..., Any],
    *,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    first: Sequence[str] = (),
    summary: str | None = None,
    strict: bool = False,
) -> Callable[[type[_H]], type[_H]]:
    """Class decorator: :func:`hparams` on a class whose fields are its own plus ``target``'s other arguments.

    For a config that writes some fields out (what a recipe adds) and takes the rest from the constructor it builds:
    the class's own fields come first (after those ``first`` names), then ``target``'s arguments that the class does
    not declare or inherit, as :func:`hparams_for` derives them. The arguments' docs are added to the class docstring.

    Args:
        target: The class (or function) whose arguments become fields.
        exclude: Arguments that are not fields.
        defaults: Field -> default, over the signature's; :data:`REQUIRED` makes a field required.
        first: Fields to put first, in this order.
        summary: A first line for the class docstring, when it has none.
        strict: Validate without conversions (see :func:`hparams`).

    Returns:
        The decorator.
    """

    def decorate(cls: type[_H]) -> type[_H]:
        own = dict(inspect.get_annotations(cls))
        docs = argument_docs(target)
        inherited: set[str] = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        derived = _derived_fields(target, skip={*exclude, *own, *inherited}, defaults=defaults or {})
        names = [*own, *derived]
        ordered = [*[n for n in first if n in names], *[n for n in names if n not in first]]
        annotations: dict[str, Any] = {}
        for field_name in ordered:
            if field_name in derived:
                annotation, field = derived[field_name]
                annotations[field_name] = _keep_ints(annotation) if strict else annotation
                # The doc, and the type as text in a recipe's terms (an own field's type is its source text).
                recipe = recipe_annotation(annotation, strict=strict)
                field.metadata = types.MappingProxyType({"doc": docs.get(field_name, ""), "annotation": recipe})
                setattr(cls, field_name, field)
            else:
                annotations[field_name] = own[field_name]
        cls.__annotations__ = annotations
        if "target" not in cls.__dict__:
            cls.target = staticmethod(target)  # type: ignore[attr-defined]
        cls.__doc__ = _class_doc(cls.__doc__ or summary or "", {n: docs.get(n, "") for n in ordered if n in derived})
        return hparams(cls, strict=strict)

    return decorate


def field_docs(config_class: type[Hparams]) -> dict[str, str]:
    """Field -> its doc: the line of the ``Args:`` section of the constructor it was derived from, or of the class.

    Args:
        config_class: A config class (:func:`hparams`).

    Returns:
        dict[str, str]: Every field, in order ('' where nothing documents it).
    """
    own = argument_docs(config_class)
    return {
        field.name: field.metadata.get("doc") or own.get(field.name, "")
        for field in dataclasses.fields(config_class)  # type: ignore[arg-type]
    }


def argument_docs(target: Any) -> dict[str, str]:
    """Argument -> its description, from the Google-style ``Args:`` section of ``target``'s docstring.

    A class without one in its own docstring is read from its ``__init__``'s. An entry's type in parentheses is
    dropped, and its continuation lines are joined with single spaces.

    Args:
        target: A class or a function.

    Returns:
        dict[str, str]: In the docstring's order; empty when there is no ``Args:`` section.

    Example:
        >>> def f(a, b):
        ...     '''Adds.
        ...
        ...     Args:
        ...         a (int): The first
        ...             number.
        ...         b: The second.
        ...     '''
        >>> argument_docs(f)
        {'a': 'The first number.', 'b': 'The second.'}
    """
    docs = args_section(inspect.getdoc(target) or "")
    if not docs and isinstance(target, type):
        docs = args_section(inspect.getdoc(getattr(target, "__init__", None)) or "")
    return docs


def _derived_fields(
    target: Callable[..., Any], *, skip: set[str], defaults: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """Argument -> (its resolved annotation, its dataclass field), for the arguments a recipe can give."""
    function = inspect.unwrap(cast(Any, target).__init__ if isinstance(target, type) else target)
    namespace = getattr(function, "__globals__", {})
    fields: dict[str, tuple[Any, Any]] = {}
    for parameter in inspect.signature(target).parameters.values():
        if parameter.name in skip or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = defaults.get(parameter.name, parameter.default)
        required = default is REQUIRED or default is inspect.Parameter.empty
        annotation = _resolve(parameter, namespace, target, required)
        if not _recipe_type(annotation, top=True):
            if not required:
                continue  # only Python can give it: the constructor's default it is
            raise TypeError(
                f"{target.__qualname__}'s argument {parameter.name!r} has no default and its type {annotation!r} "
                "admits no value a recipe can hold; exclude it, or give it a default."
            )
        if required:
            fields[parameter.name] = (annotation, dataclasses.field())
        else:
            fields[parameter.name] = (annotation, _plain_field(default, annotation))
    return fields


def _resolve(parameter: inspect.Parameter, namespace: dict[str, Any], target: Any, required: bool) -> Any:
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return Any
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, dict(namespace))
    except NameError as error:
        if not required:
            return object  # a name imported for type checking only: an object only Python can give
        raise TypeError(
            f"{target.__qualname__}'s argument {parameter.name!r} is annotated {annotation!r}, which its module does "
            f"not define at run time ({error}); import the names it uses, or exclude the argument."
        ) from None


def _recipe_type(annotation: Any, *, top: bool) -> bool:
    """Whether a value a YAML file can hold (a number, a string, a list, a mapping, ...) can have this type."""
    if annotation in (str, int, float, bool):
        return True
    if annotation is Any:
        return not top  # a bare Any argument takes any object (a tensor): left to Python
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return True
    origin = typing.get_origin(annotation)
    arguments = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _recipe_type(arguments[0], top=top)
    if origin in (typing.Union, types.UnionType):
        return any(_recipe_type(a, top=top) for a in arguments if a is not type(None))
    if annotation in _CONTAINERS or origin in _CONTAINERS:
        return all(_recipe_type(a, top=False) for a in arguments)
    return False


def _keep_ints(annotation: Any) -> Any:
    """``float`` as ``float | int``: a strict config then keeps a recipe's ``-1`` an int (and echoes it as written)."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    if float not in (annotation, *members) or int in members:
        return annotation
    kept = list(members or (annotation,))
    kept.insert(kept.index(float) + 1, int)
    return typing.Union[tuple(kept)]  # noqa: UP007 (built from a list)


def _plain_field(default: Any, annotation: Any) -> Any:
    """The dataclass field of a default, written as a recipe writes it (enum members as values, tuples as lists
    unless the type is a tuple, which reads a list back as a tuple)."""
    if isinstance(default, enum.Enum):
        default = default.value if isinstance(default.value, str) else default.name.lower()
    if isinstance(default, tuple) and tuple not in (annotation, typing.get_origin(annotation)):
        default = list(default)
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: copy.deepcopy(value))
    return dataclasses.field(default=default)


def recipe_annotation(annotation: Any, *, strict: bool = False) -> str:
    """The part of a type a recipe can give, as source text: ``str | Time | int`` -> ``'str | int'``.

    Classes a YAML file cannot hold (a Time, a callable, a device) are left out; enums are their names' type, str.
    With ``strict``, numbers and strings are pydantic's strict types, as a strict config checks them.

    Args:
        annotation: A resolved type.
        strict: Write ``StrictInt`` for ``int`` and so on (a float also takes an int).

    Returns:
        str: ``'Any'`` when nothing of it is a recipe's.

    Example:
        >>> recipe_annotation(int | str | None, strict=True)
        'StrictInt | StrictStr | None'
        >>> recipe_annotation(Mapping[str, Any] | bool | None)
        'dict[str, Any] | bool | None'
    """
    words: list[str] = []
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    for member in members or (annotation,):
        if typing.get_origin(member) is typing.Annotated:  # pydantic's StrictInt and the like
            member = typing.get_args(member)[0]
        if member is type(None):
            word = "None"
        elif member in (str, int, float, bool) or (isinstance(member, type) and issubclass(member, enum.Enum)):
            base = "str" if isinstance(member, type) and issubclass(member, enum.Enum) else member.__name__
            word = base if not strict else {"float": "StrictFloat | StrictInt"}.get(base, f"Strict{base.title()}")
        elif _recipe_type(member, top=False) and member is not Any:
            origin = typing.get_origin(member) or member
            word = "dict[str, Any]" if origin in (dict, Mapping, MutableMapping) else "list[str]"
        else:
            continue
        if word not in words:
            words.append(word)
    return " | ".join(words) or "Any"


def _class_doc(doc: str, derived: Mapping[str, str]) -> str:
    """``doc`` with the derived fields' lines (the constructor's) appended to its ``Args:`` section, or in a new one
    (an ``Args:`` section of the class must be its last)."""
    if not derived:
        return doc
    lines = [f"    {name}: {text}".rstrip() for name, text in derived.items()]
    text = inspect.cleandoc(doc).rstrip()
    heading = "\n" if re.search(r"^Args:\s*$", text, re.M) else "\n\nArgs:\n"
    return text + heading + "\n".join(lines) + "\n"
