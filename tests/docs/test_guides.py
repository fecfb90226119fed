"""Every ```python block of every guide (and of the home page) runs, in order, one namespace per page, in a fresh working directory.

A block that cannot run here (several processes, an object store, the whole main job) is preceded by a line
``<!-- not-run: the reason, and the test that covers it -->``; the reason is required.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [DOCS / "index.md", *sorted((DOCS / "guides").glob("*.md"))]
_BLOCK = re.compile(r"(?:<!-- not-run: (?P<reason>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks(page: Path) -> list[tuple[str, str]]:
    """The page's python blocks: (code, reason not run or '')."""
    return [(m.group("code"), (m.group("reason") or "").strip()) for m in _BLOCK.finditer(page.read_text())]


def test_not_run_markers_give_a_reason():
    for page in PAGES:
        for marker in re.findall(r"<!-- not-run:(.*?)-->", page.read_text()):
            assert marker.strip(), f"{page.name}: a not-run block needs its reason"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.stem)
def test_guide_code_runs(page, tmp_path, monkeypatch, registries_restored):
    monkeypatch.chdir(tmp_path)  # what an example writes lands here
    # The page runs as a module of its own, as a script would, so that dataclasses and pickling can find it.
    module = types.ModuleType(f"guide_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for index, (code, reason) in enumerate(blocks(page)):
        if reason:
            continue
        exec(compile(code, f"{page.name}[python block {index}]", "exec"), namespace)


def test_getting_started_trains_on_a_folder_of_images_it_writes():
    # Your own images: image_folder_dataloader and the image_folder recipe dataset, in blocks test_guide_code_runs
    # runs, on a folder the example writes itself (nothing downloaded).
    code = "\n".join(code for code, reason in blocks(DOCS / "guides" / "getting-started.md") if not reason)
    assert "image_folder_dataloader(" in code and "train_dataset: {image_folder: {path:" in code
    assert "load_recipe(" in code and ".save(folder" in code
