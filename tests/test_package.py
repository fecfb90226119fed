"""Package-wide rules: cheap import, __all__ everywhere, layering between subpackages."""

import ast
import importlib
import pathlib
import subprocess
import sys

import pytest

import composer

ROOT = pathlib.Path(composer.__file__).parent
MODULES = sorted(p for p in ROOT.rglob("*.py"))

# Which top-level subpackages each subpackage may import (STYLE.md, "Layering").
ALLOWED = {
    "core": {"core"},
    "utils": {"core", "utils"},
    "models": {"core", "utils", "models"},
    "metrics": {"core", "utils", "models", "metrics"},
    "datasets": {"core", "utils", "datasets"},
    "optim": {"core", "utils", "optim"},
    "algorithms": {"core", "utils", "models", "algorithms"},
    "functional": {"core", "utils", "models", "algorithms", "functional"},
    "callbacks": {"core", "utils", "callbacks"},
    "loggers": {"core", "utils", "loggers"},
    "distributed": {"core", "utils", "distributed"},
    "profiler": {"core", "utils", "profiler"},
    "trainer": {
        "core",
        "utils",
        "models",
        "optim",
        "algorithms",
        "callbacks",
        "loggers",
        "datasets",
        "distributed",
        "profiler",
        "trainer",
    },
}


def _module_name(path):
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_version():
    assert isinstance(composer.__version__, str) and composer.__version__.count(".") == 2


def test_import_composer_is_cheap():
    code = "import sys, composer; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_top_level_names_resolve():
    for name in composer.__all__:
        assert getattr(composer, name) is not None
    with pytest.raises(AttributeError):
        composer.NotAThing  # noqa: B018


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_defines_all(path):
    tree = ast.parse(path.read_text())
    names = {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    assert "__all__" in names, f"{path} has no __all__"
    module = importlib.import_module(_module_name(path))
    for name in module.__all__:
        assert hasattr(module, name), f"{module.__name__}.__all__ lists missing {name!r}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_layering(path):
    rel = path.relative_to(ROOT)
    if len(rel.parts) < 2:
        return
    package = rel.parts[0]
    allowed = ALLOWED.get(package)
    if allowed is None:
        return  # cli and config sit on top and may import anything
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "composer" and len(parts) > 1 and parts[1] in ALLOWED | {"cli": 0, "config": 0}:
                assert parts[1] in allowed, f"{rel} imports {name}: {package} may import only {sorted(allowed)}"
