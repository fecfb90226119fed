"""Modules read as source text with :mod:`ast`, without importing them (or torch).

``composer list`` and the first check of a recipe need the fields of every config class a recipe can name, but
importing those classes imports torch (seconds). :class:`SourceReader` finds a module's file without importing it and
follows ``from x import y`` and assignments to where a name is defined; :mod:`composer.config.source_fields` reads a
config class's fields from there. Every file read is recorded with its digest, so a cache of what was read can tell
when it is stale.

Example:
    >>> reader = SourceReader()
    >>> module, node = reader.resolve("composer.config", "MODELS")
    >>> module, type(node).__name__, reader.literal_names(module, "MODELS")["mlp"]
    ('composer.config.models', 'Dict', 'MLPHparams')
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from composer._docstrings import args_section

__all__ = ["ConfigSource", "FieldSource", "SourceReader", "docstring_args", "file_digest", "plain", "targets"]


@dataclass(frozen=True)
class FieldSource:
    """One field of a config class as its source writes it.

    Attributes:
        name: The field (the recipe key).
        annotation: Its type as written (``"int | None"``); empty when the source gives none.
        default: Its default as source text (``"0.1"``, ``"'fp32'"``, ``"[]"``); None when a recipe must give it.
        doc: Its line in the docstring's ``Args:``, as plain text; empty when there is none.
        recipe: The part of its type a recipe can give, as a strict config checks it (``"StrictInt | None"``), for a
            field derived from a constructor by a strict config; empty otherwise (``annotation`` says it).
    """

    name: str
    annotation: str
    default: str | None
    doc: str
    recipe: str = ""


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
    """The ``Args:`` section of a Google-style docstring (:func:`composer._docstrings.args_section`), as plain text."""
    return {name: plain(text) for name, text in args_section(doc).items()}


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
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
                return module, node
            if isinstance(node, ast.Assign | ast.AnnAssign) and name in targets(node) and node.value is not None:
                if isinstance(node.value, ast.Name):
                    return self.resolve(module, node.value.id, depth + 1)
                return module, node.value
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = _absolute(module, package, node.level, node.module)
                        return self.resolve(source, alias.name, depth + 1)
        return None

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

    def literal_strings(self, module: str, node: ast.AST | None) -> list[str]:
        """The strings of a literal tuple or list (``*NAME`` of another one in ``module`` spread in); [] if none."""
        if isinstance(node, ast.Name):
            found = self.resolve(module, node.id)
            node = found[1] if found is not None else None
        strings: list[str] = []
        for item in node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                strings.append(item.value)
            elif isinstance(item, ast.Starred):
                strings += self.literal_strings(module, item.value)
        return strings

    def runtime_names(self, module: str) -> set[str]:
        """The names ``module`` binds when it runs: those imported under ``if TYPE_CHECKING:`` left out."""
        found = self.tree(module)
        names: set[str] = set()
        for node in _statements(found[0].body if found else [], runtime=True):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                names |= set(targets(node))
        return names

    def class_doc(self, module: str, name: str) -> str:
        """The docstring of the class (or function) ``name`` as seen from ``module`` (empty when there is none)."""
        found = self.resolve(module, name)
        node = found[1] if found is not None else None
        return (ast.get_docstring(node) or "") if isinstance(node, ast.ClassDef | ast.FunctionDef) else ""


def _statements(body: list[ast.stmt], runtime: bool = False) -> list[ast.stmt]:
    """The module's statements, with those under ``if`` and ``try`` flattened in (``runtime``: not those under ``if
    TYPE_CHECKING:``, which never run)."""
    flat: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            checking = ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            flat += (_statements(node.body, runtime) if not (runtime and checking) else []) + _statements(
                node.orelse, runtime
            )
        elif isinstance(node, ast.Try):
            flat += _statements(node.body, runtime) + _statements(node.orelse, runtime)
            flat += [item for handler in node.handlers for item in _statements(handler.body, runtime)]
        else:
            flat.append(node)
    return flat


def targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [target.id for target in targets if isinstance(target, ast.Name)]


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    """The absolute module of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)
