"""Config classes read from their source text with :mod:`ast`, without importing them (or torch).

``composer list`` and the first check of a recipe need the fields of every config class a recipe can name, but
importing those classes imports torch (seconds). :class:`SourceReader` finds a module's file without importing it,
follows ``from x import y`` and assignments to where a name is defined, and reads a config class's fields from its
source: the annotated attributes of a written-out class (with those of its bases), or the ``__init__`` parameters of
the class a derived config (``hparams_for(Cls)``) builds. Each field's doc comes from the ``Args:`` of the config's
docstring, else of the built class's. Every file read is recorded with its digest, so a cache of what was read can
tell when it is stale.

Example:
    >>> reader = SourceReader()
    >>> config = reader.config("composer.config.models", "MLPHparams")
    >>> [(field.name, field.annotation, field.default) for field in config.fields][:2]
    [('in_features', 'int', None), ('hidden', 'list[int]', '[512, 512]')]
    >>> config.fields[0].doc
    'Features per sample after flattening (64 for 8x8 digits).'
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ConfigSource", "FieldSource", "SourceReader", "docstring_args", "file_digest", "plain"]

_DERIVE = "hparams_for"  # the helper of composer.core.hparams that derives a config class from a constructor
_ROOT = ("composer.core.hparams", "Hparams")  # the base of every config: its fields and from_dict are nobody's own
_FACTORIES = {"list": "[]", "dict": "{}", "tuple": "()", "set": "set()"}


@dataclass(frozen=True)
class FieldSource:
    """One field of a config class as its source writes it.

    Attributes:
        name: The field (the recipe key).
        annotation: Its type as written (``"int | None"``); empty when the source gives none.
        default: Its default as source text (``"0.1"``, ``"'fp32'"``, ``"[]"``); None when a recipe must give it.
        doc: Its line in the docstring's ``Args:``, as plain text; empty when there is none.
    """

    name: str
    annotation: str
    default: str | None
    doc: str


@dataclass
class ConfigSource:
    """A config class read from source: where it is, its fields, and what it builds.

    Attributes:
        name: The config class's name.
        module: The module that defines it.
        fields: Its fields in dataclass order (a redefined field keeps its first place).
        doc: Its docstring (the built class's when it has none of its own).
        built: ``(module, name)`` of the class it builds when known (a derived config's constructor).
        plain_from_dict: False when it or one of its bases defines its own ``from_dict``.
    """

    name: str
    module: str
    fields: list[FieldSource] = field(default_factory=list)
    doc: str = ""
    built: tuple[str, str] | None = None
    plain_from_dict: bool = True


def plain(line: str) -> str:
    """A docstring line as plain text for a terminal: ``:func:`~a.b.c``` -> ``c``, ````x```` -> ``x``.

    Example:
        >>> plain("Builds :class:`~composer.algorithms.MixUp` with ``alpha``.")
        'Builds MixUp with alpha.'
    """
    return re.sub(r":\w+:`~?([\w.]*?)([\w]+)`", r"\2", line).replace("``", "")


def docstring_args(doc: str) -> dict[str, str]:
    """The ``Args:`` section of a Google-style docstring: each argument's description, joined onto one line.

    Example:
        >>> docstring_args('''Scales.
        ...
        ... Args:
        ...     factor (float): How much;
        ...         at least 0.
        ...     name: Its name.
        ...
        ... Returns:
        ...     Nothing.''')
        {'factor': 'How much; at least 0.', 'name': 'Its name.'}
    """
    args: dict[str, str] = {}
    lines = doc.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in ("Args:", "Arguments:", "Attributes:")]
    if not starts:
        return args
    indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    current = ""
    for line in lines[starts[0] + 1 :]:
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= indent:
            break
        entry = re.match(r"\s*\*{0,2}(\w+)(?: \(.*?\))?: ?(.*)$", line)
        if entry and (not current or depth <= indent + 4):
            current = entry.group(1)
            args[current] = entry.group(2).strip()
        elif current and line.strip():
            args[current] = f"{args[current]} {line.strip()}".strip()
    return {name: plain(text) for name, text in args.items()}


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class SourceReader:
    """Reads modules' source with :mod:`ast` and finds where names are defined, recording each file it reads.

    Attributes:
        files: Each file read, mapped to its :func:`file_digest`.
    """

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self._trees: dict[str, tuple[ast.Module, bool] | None] = {}

    def locate(self, module: str) -> tuple[Path, bool] | None:
        """The source file of ``module`` and whether it is a package, found without importing anything.

        Only the top-level package is looked up on ``sys.path``; the rest of the dotted path is followed in its
        folders, so that no package's ``__init__`` runs.
        """
        top, *rest = module.split(".")
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if spec is None or (spec.origin is None and not spec.submodule_search_locations):
            return None
        folders = [Path(folder) for folder in spec.submodule_search_locations or []]
        if not rest:
            return (Path(spec.origin), bool(folders)) if spec.origin and spec.origin.endswith(".py") else None
        for index, part in enumerate(rest):
            last = index == len(rest) - 1
            for folder in folders:
                if (folder / part / "__init__.py").is_file():
                    if last:
                        return folder / part / "__init__.py", True
                    folders = [folder / part]
                    break
                if last and (folder / f"{part}.py").is_file():
                    return folder / f"{part}.py", False
            else:
                return None
        return None

    def tree(self, module: str) -> tuple[ast.Module, bool] | None:
        """The parsed source of ``module`` and whether it is a package (None when it cannot be found or parsed)."""
        if module not in self._trees:
            found = self.locate(module)
            parsed = None
            if found is not None:
                path, package = found
                try:
                    parsed = ast.parse(path.read_bytes(), filename=str(path)), package
                except (OSError, SyntaxError, ValueError):
                    parsed = None
                else:
                    self.files[str(path)] = file_digest(path)
            self._trees[module] = parsed
        return self._trees[module]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """Where ``name`` is defined as seen from ``module``: the defining module and the class or value node.

        Follows ``from x import name`` (also under ``if TYPE_CHECKING:``) and ``name = other_name``.
        """
        found = self.tree(module)
        if found is None or depth > 20:
            return None
        tree, package = found
        for node in _statements(tree.body):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
            if isinstance(node, ast.Assign | ast.AnnAssign) and name in _targets(node) and node.value is not None:
                if isinstance(node.value, ast.Name):
                    return self.resolve(module, node.value.id, depth + 1)
                return module, node.value
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = _absolute(module, package, node.level, node.module)
                        return self.resolve(source, alias.name, depth + 1)
        return None

    def config(self, module: str, name: str, built: tuple[str, str] | None = None) -> ConfigSource | None:
        """The config class ``name`` as seen from ``module`` (None when it cannot be read from source).

        ``built`` (module, name) is the class it builds, when a registry says so; a derived config knows its own.
        """
        found = self.resolve(module, name)
        if found is None:
            return None
        where, node = found
        config = ConfigSource(name=name, module=where, built=built)
        if not self._read_into(config, where, node, depth=0):
            return None
        own = ast.get_docstring(node) if isinstance(node, ast.ClassDef) else None
        built_doc = self.class_doc(*config.built) if config.built else ""
        config.doc = own or built_doc
        docs = {**docstring_args(built_doc), **docstring_args(own or "")}
        config.fields = [FieldSource(f.name, f.annotation, f.default, docs.get(f.name, f.doc)) for f in config.fields]
        return config

    def derived(self, module: str, name: str) -> ConfigSource | None:
        """The config that ``hparams_for`` derives from the plain class ``name`` (its constructor's parameters)."""
        found = self.resolve(module, name)
        if found is None or not isinstance(found[1], ast.ClassDef):
            return None
        config = ConfigSource(name=f"{name}Hparams", module=found[0], built=(found[0], name))
        init = self._init(found[0], found[1], depth=0)
        doc = ast.get_docstring(found[1]) or ""
        args = docstring_args(doc)
        fields = _parameters(init) if init is not None else []
        config.fields = [FieldSource(f.name, f.annotation, f.default, args.get(f.name, "")) for f in fields]
        config.doc = doc
        return config

    def is_config(self, module: str, name: str, depth: int = 0) -> bool:
        """Whether class ``name`` is a config class: it subclasses ``Hparams`` or a ``hparams_for(...)`` class."""
        found = self.resolve(module, name)
        if found is None or not isinstance(found[1], ast.ClassDef) or depth > 20:
            return isinstance(found[1], ast.Call) if found else False
        if (found[0], found[1].name) == _ROOT:
            return True
        for base in found[1].bases:
            if isinstance(base, ast.Call) or (
                isinstance(base, ast.Name) and self.is_config(found[0], base.id, depth + 1)
            ):
                return True
        return False

    def literal_names(self, module: str, name: str) -> dict[str, str]:
        """A literal dict of ``module`` from strings to names or strings, as ``{key: name}`` (empty if none)."""
        found = self.resolve(module, name)
        if found is None or not isinstance(found[1], ast.Dict):
            return {}
        names: dict[str, str] = {}
        for key, value in zip(found[1].keys, found[1].values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if isinstance(value, ast.Name):
                    names[key.value] = value.id
                elif isinstance(value, ast.Constant) and isinstance(value.value, str):
                    names[key.value] = value.value
        return names

    def class_doc(self, module: str, name: str) -> str:
        """The docstring of class ``name`` as seen from ``module`` (empty when it has none or cannot be read)."""
        found = self.resolve(module, name)
        return (ast.get_docstring(found[1]) or "") if found and isinstance(found[1], ast.ClassDef) else ""

    def _read_into(self, config: ConfigSource, module: str, node: ast.AST, depth: int) -> bool:
        """Adds the fields that ``node`` (a class, or a ``hparams_for(...)`` call) defines to ``config``."""
        if depth > 20:
            return False
        if isinstance(node, ast.Call):
            return self._derived_into(config, module, node)
        if not isinstance(node, ast.ClassDef):
            return False
        if (module, node.name) == _ROOT:
            return True
        for base in node.bases:
            if isinstance(base, ast.Call):
                self._read_into(config, module, base, depth + 1)
            elif isinstance(base, ast.Name) and (found := self.resolve(module, base.id)) is not None:
                self._read_into(config, *found, depth + 1)
        if any(isinstance(item, ast.FunctionDef) and item.name == "from_dict" for item in node.body):
            config.plain_from_dict = False
        _merge(config.fields, _class_fields(node))
        return True

    def _derived_into(self, config: ConfigSource, module: str, call: ast.Call) -> bool:
        """The fields of ``hparams_for(Cls, ...)``: the parameters of ``Cls.__init__`` (or of a base's)."""
        func = call.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if called != _DERIVE or not call.args or not isinstance(call.args[0], ast.Name):
            return False
        found = self.resolve(module, call.args[0].id)
        if found is None or not isinstance(found[1], ast.ClassDef):
            return False
        config.built = (found[0], found[1].name)
        init = self._init(found[0], found[1], depth=0)
        if init is not None:
            _merge(config.fields, _parameters(init))
        return True

    def _init(self, module: str, node: ast.ClassDef, depth: int) -> ast.FunctionDef | None:
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                return item
        for base in node.bases:
            if isinstance(base, ast.Name) and depth < 20:
                found = self.resolve(module, base.id)
                if found is not None and isinstance(found[1], ast.ClassDef):
                    init = self._init(found[0], found[1], depth + 1)
                    if init is not None:
                        return init
        return None


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's statements, with those under ``if`` and ``try`` (``if TYPE_CHECKING:``) flattened in."""
    flat: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If | ast.Try):
            flat += _statements(node.body) + _statements(node.orelse)
        else:
            flat.append(node)
    return flat


def _targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [target.id for target in targets if isinstance(target, ast.Name)]


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    """The absolute module of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)


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
    """A field's default as source text; ``field(default_factory=list)`` -> ``'list()'``."""
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


def _parameters(init: ast.FunctionDef) -> list[FieldSource]:
    """The named parameters of a constructor, ``self`` and ``*args``/``**kwargs`` left out."""
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args][1:]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults]
    pairs = [*zip(positional, defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]
    return [
        FieldSource(arg.arg, ast.unparse(arg.annotation) if arg.annotation else "", _default(value), "")
        for arg, value in pairs
    ]
