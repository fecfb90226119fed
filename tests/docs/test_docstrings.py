"""Every public name (every ``__all__`` of every package) has a docstring the API reference can show.

A docstring passes when it opens with a sentence, documents every argument of the signature in its ``Args:`` section
(the class docstring for a class, per the house style), and has a ``Returns:`` (or ``Yields:``) section when the
function returns something other than ``None``. Two classes may point elsewhere for their arguments: an ``*Hparams``
that says "See :class:`X`" (its fields are X's arguments), and a variant that says "See :class:`X` for ... the
arguments" (GhostBatchNorm2d of GhostBatchNorm1d). A constant (a registry, ``__version__``) is documented by a string
literal right after its assignment, the attribute docstring that griffe and Sphinx read. The coverage figure is printed (``pytest -s``). The names that do not pass yet are listed in ``docstring_gaps.txt``;
the list may only shrink (a new gap fails, and so does a listed name that has been fixed), down to 100%.
"""

from __future__ import annotations

import enum
import functools
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from composer.core.hparams import Hparams

griffe = pytest.importorskip("griffe", reason="the docs extra is not installed (pip install -e '.[docs]')")

ROOT = Path(__file__).resolve().parents[2]

# Issue 18 is rewriting these modules right now; their names are checked once it lands (remove this list then).
IN_FLIGHT: tuple[str, ...] = ()


@functools.cache
def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _sections(docstring: Any) -> dict[str, Any]:
    kinds: dict[str, Any] = {}
    for section in docstring.parse("google", warnings=False):
        kinds.setdefault(section.kind.value, []).append(section)
    return kinds


def _signature_parameters(obj: Any) -> list[str]:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    skip = {"self", "cls"}
    return [
        name
        for name, parameter in signature.parameters.items()
        if name not in skip and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


def _returns_something(obj: Any) -> bool:
    if not inspect.isroutine(obj):
        return False
    annotation = inspect.signature(obj).return_annotation
    return annotation not in (inspect.Signature.empty, None, "None", "NoReturn")


def _documented(obj: Any) -> set[str]:
    sections = _sections(obj.docstring) if obj.docstring is not None else {}
    names = {p.name.lstrip("*") for s in sections.get("parameters", []) for p in s.value}
    return names | {p.name.lstrip("*") for s in sections.get("other parameters", []) for p in s.value}


_SAME_ARGUMENTS = r"See :class:`~?([\w.]+)` for [^.]*\barguments\b"


def _built_class(obj: Any, loaded: Any, pattern: str = r":(?:class|func):`~?([\w.]+)`") -> Any:
    """For an ``*Hparams`` config that says "See :class:`X`", the griffe object of ``X`` (its fields are X's args).

    With another ``pattern`` (a regex whose group is the referenced name), the object that ``pattern`` names.
    """
    match = re.search(pattern, obj.docstring.value if obj.docstring else "")
    if match is None:
        return None
    target = match.group(1)
    candidates = [target, f"{obj.module.path}.{target}"]
    for candidate in candidates:
        try:
            return loaded[candidate.removeprefix("composer.")]
        except Exception:  # not found, or an alias to a package griffe did not load (torch)
            continue
    return None


def problems(path: str, value: Any, loaded: Any) -> list[str]:
    """What the docstring of the public name ``path`` lacks (empty when it passes)."""
    source = _reference().source_path(path, value)
    obj = loaded[source.removeprefix("composer.")] if source != "composer" else loaded
    docstring = obj.docstring
    if docstring is None or not docstring.value.strip():
        return ["no docstring"]
    found = []
    first = docstring.value.strip().split("\n\n", 1)[0]
    if not first.rstrip().endswith((".", ":", "!", "?", ")")):
        found.append("the summary is not a sentence")
    sections = _sections(docstring)
    if inspect.isclass(value) and issubclass(value, enum.Enum):
        return found  # members, not arguments
    if inspect.isclass(value) or inspect.isroutine(value):
        documented = _documented(obj)
        if inspect.isclass(value) and issubclass(value, Hparams) and (built := _built_class(obj, loaded)) is not None:
            documented |= _documented(built)
        # A variant of a class that says "See :class:`X` for ... the arguments" shares X's (GhostBatchNorm2d of 1d).
        if inspect.isclass(value) and (same := _built_class(obj, loaded, _SAME_ARGUMENTS)) is not None:
            documented |= _documented(same)
        missing = [name for name in _signature_parameters(value) if name not in documented]
        if missing:
            found.append(f"arguments not documented: {missing}")
        if _returns_something(value) and not (sections.get("returns") or sections.get("yields")):
            found.append("no Returns: section")
    return found


def _report():
    reference = _reference()
    names = reference.public_names()
    loaded = griffe.load("composer", search_paths=[str(ROOT)], docstring_parser=None)
    report = {}
    for path, value in names.items():
        try:
            report[path] = problems(path, value, loaded)
        except Exception as error:  # a name griffe cannot see statically is a problem too
            report[path] = [f"griffe cannot load it: {error!r}"]
    return report


def _in_flight(path: str) -> bool:
    module, _, name = path.rpartition(".")
    defined_in = getattr(getattr(importlib.import_module(module), name), "__module__", "") or ""
    return path.startswith(IN_FLIGHT) or defined_in.startswith(IN_FLIGHT)


def test_every_public_name_has_a_complete_docstring():
    report = _report()
    checked = {path: found for path, found in report.items() if not _in_flight(path)}
    failing = {path: found for path, found in checked.items() if found}
    passed = len(checked) - len(failing)
    print(f"\ndocstring coverage: {passed}/{len(checked)} public names ({100 * passed / len(checked):.1f}%)")
    lines = (Path(__file__).parent / "docstring_gaps.txt").read_text().splitlines()
    known = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    new = {path: found for path, found in failing.items() if path not in known}
    assert not new, "\n".join(f"{path}: {'; '.join(found)}" for path, found in sorted(new.items()))
    fixed = sorted(path for path in known if path in checked and not checked[path])
    assert not fixed, f"these names pass now: remove them from tests/docs/docstring_gaps.txt: {fixed}"
