"""The object-stores guide's blocks that need a store (marked not-run on the page) run here, against moto's S3
server on loopback (tests/conftest.py's ``s3_env``: authentication on, the credentials in the standard variables).

They run unchanged, in order, after the page's other blocks, except the first store block: it holds the two settings
a reader fills in (``endpoint_url`` and ``bucket``), which are the test server's here.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "object-stores.md"
_BLOCK = re.compile(r"(?:<!-- not-run: (?P<reason>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def test_the_store_blocks_of_the_object_stores_guide_run_against_a_local_s3_server(s3_env, tmp_path, monkeypatch):
    pytest.importorskip("boto3", reason="needs boto3 (the remote extra)")
    blocks = [(m.group("code"), m.group("reason") or "") for m in _BLOCK.finditer(PAGE.read_text())]
    store_blocks = [code for code, reason in blocks if reason]
    assert all("tests/docs/test_object_stores.py" in reason for _, reason in blocks if reason)
    settings = store_blocks[0]
    assigned = re.findall(r"^(\w+) = ", settings, re.M)
    assert assigned == ["endpoint_url", "bucket"], "the first store block holds the reader's two settings alone"

    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("guide_object_stores")  # as tests/docs/test_guides.py runs a page
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for index, (code, reason) in enumerate(blocks):
        if code is settings:
            code = f"endpoint_url = {s3_env.endpoint_url!r}\nbucket = {s3_env.create_bucket()!r}\n"
        exec(
            compile(code, f"{PAGE.name}[python block {index}{', not run there' if reason else ''}]", "exec"), namespace
        )
    keys = s3_env.keys(namespace["bucket"])
    assert "checkpoints/digits/ep1-ba12-rank0.pt" in keys and "logs/logged/logged.txt" in keys
    assert namespace["resumed"].checkpointing.loaded_path is not None
