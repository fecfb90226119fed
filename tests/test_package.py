"""Package-wide rules: cheap import, __all__ everywhere, layering between subpackages, no import cycles and no
private names imported across modules."""

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


# ---- the import graph: no cycles, no private names across modules -------------------------------------------------

MODULE_PATHS = {_module_name(path): path for path in MODULES}


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, those inside functions included; those under ``if TYPE_CHECKING:`` are
    left out (annotations only: nothing is imported when the code runs)."""
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(sub) for statement in node.body for sub in ast.walk(statement))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only
    ]


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of the module that ``from ... import`` reads, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _import_graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports when it runs (a package's imports of its own children left out)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULE_PATHS}
    for name, path in MODULE_PATHS.items():
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _source_module(node, name, path.name == "__init__.py")
                targets = [source, *(f"{source}.{alias.name}" for alias in node.names)]  # a name may be a module
            graph[name] |= {t for t in targets if t in graph and t != name and not t.startswith(name + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return groups


def test_no_import_cycles_counting_imports_inside_functions():
    cycles = _cycles(_import_graph())
    assert not cycles, (
        f"Import cycles among modules (an import inside a function counts; one under `if TYPE_CHECKING:` does "
        f"not): {cycles}. Move what the modules of a cycle share into a module that they all import, or pass the "
        f"object in instead of importing it."
    )


def test_cycle_finder_counts_imports_inside_functions():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\ndef f():\n    import y\nimport z\n"
    )
    assert sorted(alias.name for node in _runtime_imports(tree) for alias in node.names) == [
        "TYPE_CHECKING",
        "y",
        "z",
    ]


def _is_private_helper(source: str, importer: str) -> bool:
    """Whether ``source`` is a private helper module (``_name``) of the package ``importer`` belongs to."""
    package, _, leaf = source.rpartition(".")
    return leaf.startswith("_") and not leaf.startswith("__") and importer.rpartition(".")[0] == package


def _private_imports() -> list[str]:
    found = []
    for name, path in MODULE_PATHS.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _source_module(node, name, path.name == "__init__.py")
            if source.split(".")[0] != "composer" or source == name or _is_private_helper(source, name):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{source}.{alias.name}" not in MODULE_PATHS:  # a private module is no private name
                    found.append(f"{name} imports {alias.name} from {source}")
    return found


def test_no_private_names_imported_across_modules():
    found = _private_imports()
    assert not found, (
        f"Private names imported from another module: {found}. Make the name public in the module that owns it "
        f"(drop the underscore, add it to __all__), or move it into a private helper module of the importer's "
        f"package (a module whose name starts with '_'), which its siblings may import from."
    )


def test_private_helper_modules_are_those_of_the_same_package():
    assert _is_private_helper("composer.core._time", "composer.core.timer")
    assert not _is_private_helper("composer.core._time", "composer.utils.misc")
    assert not _is_private_helper("composer.core.time", "composer.core.timer")
    assert not _is_private_helper("composer.core.__init__", "composer.core.timer")
