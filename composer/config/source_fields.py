"""Config classes read from their source: the fields a class writes out, and those it derives from a constructor.

:func:`read_config` reads a config class as :mod:`composer.core.hparams` would build it, from the source text alone
(:class:`~composer.config.sources.SourceReader`): the annotated attributes of a written-out class, with those of its
bases; the arguments of the constructor (or function) that ``X = hparams_for(Target, ...)`` or
``@derive_fields(Target, ...)`` derives fields from, with the same rules (``exclude``, ``defaults`` with ``REQUIRED``,
``first``, ``base``; arguments with a default whose type a YAML file cannot hold left out); and each field's doc from
the ``Args:`` of the target's docstring, else the class's.

Example:
    >>> from composer.config.sources import SourceReader
    >>> config = read_config(SourceReader(), "composer.config.models", "MLPHparams")
    >>> [(field.name, field.annotation, field.default) for field in config.fields][:2]
    [('in_features', 'int', None), ('hidden', 'list[int]', '[512, 512]')]
    >>> config.fields[0].doc
    'Features per sample after flattening (64 for 8x8 digits).'
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from composer.config.sources import ConfigSource, FieldSource, SourceReader, docstring_args

__all__ = ["is_config", "read_config", "read_constructor", "recipe_words"]

_ROOT = ("composer.core.hparams", "Hparams")  # the base of every config: its fields and from_dict are nobody's own
_DERIVERS = ("hparams_for", "derive_fields")
_FACTORIES = {"list": "[]", "dict": "{}", "tuple": "()", "set": "set()"}
_PLAIN = ("str", "int", "float", "bool")
_STRICT = {"StrictInt": "int", "StrictStr": "str", "StrictFloat": "float", "StrictBool": "bool"}
_MAPPINGS = ("dict", "Dict", "Mapping", "MutableMapping")
_SEQUENCES = ("list", "List", "tuple", "Tuple", "set", "Set", "frozenset", "FrozenSet", "Sequence", "MutableSequence")
_CONTAINERS = (*_MAPPINGS, *_SEQUENCES, "Iterable")
_ENUMS = ("Enum", "StrEnum", "IntEnum", "Flag", "IntFlag")
_BUILTINS = frozenset({*_PLAIN, "list", "dict", "tuple", "set", "frozenset", "object", "type", "None"})


@dataclass(frozen=True)
class _Argument:
    name: str
    annotation: ast.expr | None
    default: ast.expr | None


def read_config(
    reader: SourceReader, module: str, name: str, built: tuple[str, str] | None = None
) -> ConfigSource | None:
    """The config class ``name`` as seen from ``module``; None when it cannot be read from source.

    Args:
        reader: Reads and remembers the sources.
        module: Where the name is looked up.
        name: The config class's name there.
        built: ``(module, name)`` of the class it builds, when a registry says so (a derived config knows its own);
            its docstring documents the fields the config's does not.
    """
    found = reader.resolve(module, name)
    if found is None:
        return None
    config = ConfigSource(name=name, module=found[0], built=built)
    if not _read_into(reader, config, *found, depth=0):
        return None
    own = ast.get_docstring(found[1]) if isinstance(found[1], ast.ClassDef) else None
    config.doc = own or (reader.class_doc(*config.built) if config.built else "")
    # A derived field's doc is its target's; any other field's is the class's own (also for a field of a base).
    docs = {**docstring_args(_target_doc(reader, *config.built) if config.built else ""), **docstring_args(own or "")}
    config.fields = [replace(field, doc=field.doc or docs.get(field.name, "")) for field in config.fields]
    return config


def read_constructor(reader: SourceReader, module: str, name: str) -> ConfigSource | None:
    """The config that :func:`composer.config.register` derives from the plain class ``name`` (not a config)."""
    found = reader.resolve(module, name)
    if found is None or not isinstance(found[1], ast.ClassDef):
        return None
    call = ast.Call(func=ast.Name("hparams_for"), args=[ast.Name(name)], keywords=[])
    config = ConfigSource(name=f"{name}Hparams", module=found[0])
    _derive(reader, config, found[0], call, [])
    config.doc = ast.get_docstring(found[1]) or ""
    return config


def is_config(reader: SourceReader, module: str, name: str, depth: int = 0) -> bool:
    """Whether ``name`` is a config class: it subclasses ``Hparams``, or ``hparams_for`` made it."""
    found = reader.resolve(module, name)
    if found is None or depth > 20:
        return False
    where, node = found
    if isinstance(node, ast.Call):
        return _called(node) == "hparams_for"
    if not isinstance(node, ast.ClassDef):
        return False
    if (where, node.name) == _ROOT:
        return True
    return any(isinstance(base, ast.Name) and is_config(reader, where, base.id, depth + 1) for base in node.bases)


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _read_into(reader: SourceReader, config: ConfigSource, module: str, node: ast.AST, depth: int) -> bool:
    """Adds the fields that ``node`` (a class, or a ``hparams_for(...)`` call) defines to ``config``."""
    if depth > 20:
        return False
    if isinstance(node, ast.Call):
        return _called(node) == "hparams_for" and _derive(reader, config, module, node, [])
    if not isinstance(node, ast.ClassDef):
        return False
    if (module, node.name) == _ROOT:
        return True
    for base in node.bases:
        if isinstance(base, ast.Call):
            _read_into(reader, config, module, base, depth + 1)
        elif isinstance(base, ast.Name) and (found := reader.resolve(module, base.id)) is not None:
            _read_into(reader, config, *found, depth + 1)
    if any(isinstance(item, ast.FunctionDef) and item.name == "from_dict" for item in node.body):
        config.plain_from_dict = False
    own = _class_fields(node)
    deriving = [item for item in node.decorator_list if isinstance(item, ast.Call) and _called(item) == "derive_fields"]
    if deriving:
        return _derive(reader, config, module, deriving[0], own)
    _merge(config.fields, own)
    return True


def _derive(reader: SourceReader, config: ConfigSource, module: str, call: ast.Call, own: list[FieldSource]) -> bool:
    """The fields ``hparams_for(Target, ...)`` or ``@derive_fields(Target, ...)`` gives a class declaring ``own``."""
    if not call.args or not isinstance(call.args[0], ast.Name):
        return False
    found = reader.resolve(module, call.args[0].id)
    if found is None:
        return False
    target_module, target = found
    if not isinstance(target, ast.ClassDef | ast.FunctionDef):
        return False
    options = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    base = options.get("base")
    if isinstance(base, ast.Name) and (base_found := reader.resolve(module, base.id)) is not None:
        _read_into(reader, config, *base_found, depth=1)
    config.built = (target_module, target.name)
    arguments = _arguments(reader, target_module, target)
    docs = docstring_args(_target_doc(reader, target_module, target.name))
    skip = {*reader.literal_strings(module, options.get("exclude")), *(f.name for f in (*own, *config.fields))}
    overrides = options.get("defaults")
    defaults = (
        {
            key.value: value
            for key, value in zip(overrides.keys, overrides.values)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        }
        if isinstance(overrides, ast.Dict)
        else {}
    )
    strict = isinstance(options.get("strict"), ast.Constant) and options["strict"].value is True  # type: ignore[attr-defined]
    derived: list[FieldSource] = []
    for argument in arguments:
        if argument.name in skip:
            continue
        default = defaults.get(argument.name, argument.default)
        required = default is None or (isinstance(default, ast.Name) and default.id == "REQUIRED")
        if not _recipe_type(reader, target_module, argument.annotation, top=True):
            continue  # only Python can give it (or, without a default, the config cannot be built: not one)
        annotation = ast.unparse(argument.annotation) if argument.annotation is not None else ""
        where = module if argument.name in defaults else target_module
        text = None if required else _default_text(reader, where, default, annotation)
        recipe = recipe_words(reader, target_module, argument.annotation, strict) if strict else ""
        derived.append(FieldSource(argument.name, annotation, text, docs.get(argument.name, ""), recipe))
    names = [*own, *derived]
    order = reader.literal_strings(module, options.get("first"))
    first = [field for name in order for field in names if field.name == name]
    _merge(config.fields, [*first, *(field for field in names if field.name not in order)])
    return True


def _arguments(reader: SourceReader, module: str, target: ast.ClassDef | ast.FunctionDef) -> list[_Argument]:
    """The named arguments of a function, or of a class's ``__init__`` (its own or a base's), ``self`` left out."""
    function = target if isinstance(target, ast.FunctionDef) else _init(reader, module, target, 0)
    if function is None:
        return []
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults]
    pairs = [*zip(positional, defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]
    found = [_Argument(arg.arg, arg.annotation, value) for arg, value in pairs]
    return found[1:] if isinstance(target, ast.ClassDef) else found


def _init(reader: SourceReader, module: str, node: ast.ClassDef, depth: int) -> ast.FunctionDef | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            return item
    for base in node.bases:
        if isinstance(base, ast.Name) and depth < 20:
            found = reader.resolve(module, base.id)
            if found is not None and isinstance(found[1], ast.ClassDef):
                init = _init(reader, found[0], found[1], depth + 1)
                if init is not None:
                    return init
    return None


def _target_doc(reader: SourceReader, module: str, name: str) -> str:
    """A target's docstring with an ``Args:`` section: the class's, else its ``__init__``'s (or the function's)."""
    found = reader.resolve(module, name)
    if found is None or not isinstance(found[1], ast.ClassDef | ast.FunctionDef):
        return ""
    doc = ast.get_docstring(found[1]) or ""
    if isinstance(found[1], ast.ClassDef) and not docstring_args(doc):
        init = _init(reader, found[0], found[1], 0)
        doc = (ast.get_docstring(init) or doc) if init is not None else doc
    return doc


def _merge(fields: list[FieldSource], new: list[FieldSource]) -> None:
    """Adds ``new`` to ``fields`` as a dataclass does: a redefined field keeps its place and takes the new value."""
    places = {f.name: i for i, f in enumerate(fields)}
    for item in new:
        if item.name in places:
            fields[places[item.name]] = item
        else:
            places[item.name] = len(fields)
            fields.append(item)


def _class_fields(node: ast.ClassDef) -> list[FieldSource]:
    """The dataclass fields a class body declares: annotated names that are not ``ClassVar``."""
    fields: list[FieldSource] = []
    for item in node.body:
        if not isinstance(item, ast.AnnAssign) or not isinstance(item.target, ast.Name):
            continue
        annotation = ast.unparse(item.annotation)
        if annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        fields.append(FieldSource(item.target.id, annotation, _default(item.value), ""))
    return fields


def _default(value: ast.expr | None) -> str | None:
    """A field's default as source text; ``field(default_factory=list)`` -> ``'[]'``."""
    if value is None:
        return None
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("field", "Field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                return ast.unparse(keyword.value)
            if keyword.arg == "default_factory":
                factory = keyword.value
                if isinstance(factory, ast.Lambda):
                    return ast.unparse(factory.body)
                return _FACTORIES.get(ast.unparse(factory), f"{ast.unparse(factory)}()")
        return None
    return ast.unparse(value)


def _default_text(reader: SourceReader, module: str, value: ast.expr | None, annotation: str) -> str | None:
    """A derived field's default as a recipe writes it: an enum member as its value, a tuple as a list (unless the
    type is a tuple)."""
    if isinstance(value, ast.Tuple) and not annotation.startswith(("tuple", "Tuple", "typing.Tuple")):
        return ast.unparse(ast.List(elts=value.elts))
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        found = reader.resolve(module, value.value.id)
        if found is not None and isinstance(found[1], ast.ClassDef) and _is_enum(reader, found[0], found[1], 0):
            for item in found[1].body:
                if isinstance(item, ast.Assign) and value.attr in [getattr(t, "id", "") for t in item.targets]:
                    member = item.value
                    if isinstance(member, ast.Constant) and isinstance(member.value, str):
                        return repr(member.value)
                    return repr(value.attr.lower())
    return _default(value)


def _is_enum(reader: SourceReader, module: str, node: ast.ClassDef, depth: int) -> bool:
    for base in node.bases:
        word = ast.unparse(base).split(".")[-1]
        if word in _ENUMS:
            return True
        found = reader.resolve(module, word) if isinstance(base, ast.Name) and depth < 20 else None
        if found is not None and isinstance(found[1], ast.ClassDef) and _is_enum(reader, found[0], found[1], depth + 1):
            return True
    return False


def _members(annotation: ast.expr) -> list[ast.expr]:
    """The members of a union (``a | b``, ``Union[a, b]``, ``Optional[a]``), else the annotation itself."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return [*_members(annotation.left), *_members(annotation.right)]
    if isinstance(annotation, ast.Subscript):
        origin = ast.unparse(annotation.value).split(".")[-1]
        inner = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if origin == "Union":
            return [member for item in inner for member in _members(item)]
        if origin == "Optional":
            return [*_members(inner[0]), ast.Constant(None)]
    return [annotation]


def _recipe_type(reader: SourceReader, module: str, annotation: ast.expr | None, top: bool) -> bool:
    """Whether a value a YAML file can hold can have this type (:func:`composer.core.hparams.hparams_for`'s rule)."""
    if annotation is None:
        return not top  # no annotation is Any: any object, left to Python at the top
    members = _members(annotation)
    if len(members) > 1:
        return any(_recipe_type(reader, module, member, top) for member in members if not _is_none(member))
    (member,) = members
    if isinstance(member, ast.Subscript):
        origin = ast.unparse(member.value).split(".")[-1]
        inner = member.slice.elts if isinstance(member.slice, ast.Tuple) else [member.slice]
        inner = [item for item in inner if not (isinstance(item, ast.Constant) and item.value is Ellipsis)]
        if origin == "Literal":
            return True
        if origin == "Annotated":
            return _recipe_type(reader, module, inner[0], top)
        return origin in _CONTAINERS and all(_recipe_type(reader, module, item, False) for item in inner)
    if not isinstance(member, ast.Name | ast.Attribute):
        return False
    word, head = ast.unparse(member).split(".")[-1], ast.unparse(member).split(".")[0]
    if head not in _BUILTINS and head not in reader.runtime_names(module):
        return False  # imported for type checking only: at run time an object only Python can give
    if word in _PLAIN or word in _STRICT or word in _CONTAINERS:
        return True
    if word == "Any":
        return not top
    found = reader.resolve(module, word) if isinstance(member, ast.Name) else None
    if found is not None and isinstance(found[1], ast.BinOp | ast.Subscript):  # a type alias
        return _recipe_type(reader, found[0], found[1], top)
    return found is not None and isinstance(found[1], ast.ClassDef) and _is_enum(reader, found[0], found[1], 0)


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or ast.unparse(node) in ("None", "type(None)")


def _aliased_members(
    reader: SourceReader, module: str, annotation: ast.expr | None, depth: int
) -> list[tuple[str, ast.expr]]:
    """The members of a union, type aliases (``SaveInterval = str | Time``) expanded where they are defined."""
    members: list[tuple[str, ast.expr]] = []
    for member in _members(annotation) if annotation is not None else []:
        found = reader.resolve(module, member.id) if isinstance(member, ast.Name) and depth < 10 else None
        if found is not None and isinstance(found[1], ast.BinOp | ast.Subscript):
            members += _aliased_members(reader, found[0], found[1], depth + 1)
        else:
            members.append((module, member))
    return members


def recipe_words(reader: SourceReader, module: str, annotation: ast.expr | None, strict: bool) -> str:
    """The part of a type a recipe can give, as :func:`composer.core.hparams.recipe_annotation` writes it."""
    words: list[str] = []
    for where, member in _aliased_members(reader, module, annotation, 0):
        if isinstance(member, ast.Subscript) and ast.unparse(member.value).split(".")[-1] == "Annotated":
            member = member.slice.elts[0] if isinstance(member.slice, ast.Tuple) else member.slice
        text = ast.unparse(member).split(".")[-1]
        base = _STRICT.get(text, text)
        found = reader.resolve(where, text) if isinstance(member, ast.Name) and base not in _PLAIN else None
        enum = found is not None and isinstance(found[1], ast.ClassDef) and _is_enum(reader, found[0], found[1], 0)
        if _is_none(member):
            word = "None"
        elif base in _PLAIN or enum:
            base = base if base in _PLAIN else "str"
            word = base if not strict else {"float": "StrictFloat | StrictInt"}.get(base, f"Strict{base.title()}")
        elif text != "Any" and _recipe_type(reader, where, member, top=False):
            origin = ast.unparse(member.value if isinstance(member, ast.Subscript) else member).split(".")[-1]
            word = "dict[str, Any]" if origin in _MAPPINGS else "list[str]"
        else:
            continue
        if word not in words:
            words.append(word)
    return " | ".join(words) or "Any"
