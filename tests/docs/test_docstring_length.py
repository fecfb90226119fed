"""No docstring in the library runs past 40 lines: it says what the thing is and how to use it; procedures live in the
guides (docs/guides/), whose code runs in the suite.

A docstring may be longer only where its ``Args:`` section alone needs the room, and then it is listed below with
the reason; everything else in it stays a short summary and one example.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 40

# (module path, qualified name) -> why it may be longer.
LONGER: dict[tuple[str, str], str] = {
    (
        "composer/trainer/trainer.py",
        "Trainer",
    ): "its Args: documents 43 keyword arguments, the source of `composer list trainer` and of the recipe keys",
}


def _docstring_lengths(path: Path) -> dict[str, int]:
    """Qualified name (``'<module>'`` for the module) -> lines of its docstring, as written (not dedented)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                docstring = ast.get_docstring(child, clean=False)
                if docstring is not None:
                    lengths[name] = max(lengths.get(name, 0), len(docstring.splitlines()))
                visit(child, f"{name}.")

    module_docstring = ast.get_docstring(tree, clean=False)
    if module_docstring is not None:
        lengths["<module>"] = len(module_docstring.splitlines())
    visit(tree, "")
    return lengths


def _long_docstrings() -> dict[tuple[str, str], int]:
    found = {}
    for path in sorted((ROOT / "composer").rglob("*.py")):
        for name, lines in _docstring_lengths(path).items():
            if lines > LIMIT:
                found[(path.relative_to(ROOT).as_posix(), name)] = lines
    return found


def test_no_docstring_runs_past_40_lines_except_those_whose_arguments_need_it():
    long = _long_docstrings()
    unlisted = {key: lines for key, lines in long.items() if key not in LONGER}
    assert not unlisted, (
        f"docstrings over {LIMIT} lines: {unlisted}. Keep what the thing is and how to use it; move procedures to the "
        "guides (docs/guides/), or list it in LONGER with the reason if its Args: section alone needs the room."
    )
    fixed = sorted(set(LONGER) - set(long))
    assert not fixed, f"{fixed} are {LIMIT} lines or fewer now: remove them from LONGER"


def test_the_exceptions_are_longer_only_by_their_arguments():
    # Without its Args: section, an exception fits the limit like any other docstring.
    for (module, name), reason in LONGER.items():
        node = ast.parse((ROOT / module).read_text())
        for part in name.split("."):
            node = next(n for n in ast.iter_child_nodes(node) if getattr(n, "name", None) == part)
        docstring = ast.get_docstring(node, clean=False)
        assert docstring is not None and reason
        lines = docstring.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
        end = next(
            (
                i
                for i in range(start + 1, len(lines))
                if lines[i].strip() and _indent(lines[i]) <= _indent(lines[start])
            ),
            len(lines),
        )
        assert len(lines) - (end - start) <= LIMIT, f"{module} {name}: {len(lines) - (end - start)} lines besides Args:"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def test_the_counter_finds_a_long_docstring_in_a_nested_class(tmp_path):
    body = "\n".join(f"    line {i}" for i in range(LIMIT + 1))
    source = f'class Outer:\n    class Inner:\n        """Summary.\n{body}\n        """\n'
    path = tmp_path / "module.py"
    path.write_text(source)
    assert _docstring_lengths(path) == {"Outer.Inner": LIMIT + 3}
