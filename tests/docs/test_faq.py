"""Every message the FAQ quotes (its ```text blocks; ``...`` stands for the run's values) is the library's: it is what
the page's own examples print, or its fragments appear, in order, in one string of the library's source (an f-string's
or a logging call's values count as ``...``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
import sys
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "faq.md"


def _flat(text: str) -> str:
    return " ".join(text.split())


def quotes() -> list[str]:
    """The quoted messages, each on one line."""
    return [_flat(block) for block in re.findall(r"^```text\n(.*?)^```", PAGE.read_text(), re.M | re.S)]


@functools.cache
def source_strings() -> list[str]:
    """Every string of the library's source, with each formatted value (``{x}``, ``%d``) as a NUL character."""
    found = []
    for path in sorted((ROOT / "composer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                found.append("".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
    return [re.sub(r"%[-#0-9.]*[sdrgf]", "\0", _flat(text)) for text in found]


def in_order(fragments: list[str], text: str) -> bool:
    position = 0
    for fragment in fragments:
        found = text.find(fragment, position)
        if found < 0:
            return False
        position = found + len(fragment)
    return True


def printed_by_the_page(tmp_path: Path, monkeypatch) -> str:
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("guide_faq")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)):
            exec(compile(code, f"faq.md[python block {index}]", "exec"), module.__dict__)
    return _flat(output.getvalue())


def test_every_quoted_message_is_one_the_library_produces(tmp_path, monkeypatch):
    printed = printed_by_the_page(tmp_path, monkeypatch)
    assert len(quotes()) >= 8
    wrong = []
    for quote in quotes():
        fragments = [fragment.strip() for fragment in quote.split("...") if fragment.strip()]
        if not (in_order(fragments, printed) or any(in_order(fragments, text) for text in source_strings())):
            wrong.append(quote)
    assert not wrong, "quoted in faq.md, but neither printed by its examples nor in composer/:\n" + "\n".join(wrong)


def test_a_message_the_library_does_not_produce_is_caught():
    assert any(in_order(["already holds checkpoints of this run's pattern", "(newest:"], s) for s in source_strings())
    assert not any(in_order(["already holds checkpoints", "pass resume=True"], s) for s in source_strings())
