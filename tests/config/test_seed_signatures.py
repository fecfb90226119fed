"""Every ``*Hparams`` class a seed page documents has the page's fields, in the page's order, with its defaults.

The seed pages (the API reference the library follows, in ``shared/seeds/`` next to the checkout, or ``$SEEDS_DIR``) give each
config class as a signature line, ``class composer.algorithms.mixup.MixUpHparams(alpha: float)``. This test parses
those lines itself, so it is a reference independent of how the classes are made (written out, or derived from their
constructor by :func:`~composer.core.hparams.hparams_for` with the seed's overrides). A class may add fields after the
seed's, each with a default (a later keyword: every call the seed shows still works); an abstract base that the page
lists without a signature is left out.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

SEEDS = Path(os.environ.get("SEEDS_DIR", Path(__file__).resolve().parents[3] / "shared" / "seeds"))
_LINE = re.compile(r"^class (composer\.[\w.]+)\.(\w+Hparams)(?:\((.*)\))?(?:\[source\]#?)?\s*$")
_NO_DEFAULT = object()


def _parameters(text: str) -> list[tuple[str, Any]]:
    """``(name, default)`` of each parameter of a seed signature (``_NO_DEFAULT`` for required ones)."""
    if not text.strip():
        return []
    tree = ast.parse(f"def f({text.replace('= - ', '= -')}): pass")
    arguments = tree.body[0].args  # type: ignore[attr-defined]
    names = [argument.arg for argument in arguments.args]
    defaults = [ast.literal_eval(default) for default in arguments.defaults]
    padded = [_NO_DEFAULT] * (len(names) - len(defaults)) + defaults
    return list(zip(names, padded, strict=True))


def _seed_classes() -> list[tuple[str, str, list[tuple[str, Any]]]]:
    found = []
    for page in sorted(SEEDS.glob("*.txt")) if SEEDS.is_dir() else []:
        for line in page.read_text(encoding="utf-8").splitlines():
            match = _LINE.match(line.strip())
            if match and match.group(3) is not None:
                module, name, parameters = match.groups()
                found.append((module, name, _parameters(parameters or "")))
    return found


SEED_CLASSES = _seed_classes()


def test_the_seed_pages_list_config_classes() -> None:
    if not SEEDS.is_dir():
        pytest.skip(f"no seed pages at {SEEDS}")
    assert len(SEED_CLASSES) >= 25  # 18 algorithms and 11 schedulers when this test was written
    assert {"AlibiHparams", "StochasticDepthHparams", "CosineAnnealingLRHparams"} <= {c[1] for c in SEED_CLASSES}


@pytest.mark.parametrize(("module", "name", "parameters"), SEED_CLASSES, ids=[c[1] for c in SEED_CLASSES])
def test_config_class_matches_its_seed_page(module: str, name: str, parameters: list[tuple[str, Any]]) -> None:
    config_class = getattr(importlib.import_module(module), name)
    fields = [field for field in dataclasses.fields(config_class) if field.init]
    assert [field.name for field in fields][: len(parameters)] == [parameter for parameter, _ in parameters]
    added = fields[len(parameters) :]
    assert all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING for f in added)
    fields = fields[: len(parameters)]
    for field, (parameter, default) in zip(fields, parameters, strict=True):
        if default is _NO_DEFAULT:
            assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, parameter
        else:
            has = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
            assert has == default and type(has) is type(default), (parameter, has, default)
