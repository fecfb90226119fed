"""The documentation site builds in strict mode, and every internal link and anchor of its HTML resolves."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _links_module():
    spec = importlib.util.spec_from_file_location("docs_links", ROOT / "scripts" / "docs_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="guide/">ok</a><a href="guide/#here">ok</a><a href="#top" id="top">ok</a>'
        '<a href="https://example.com/x">web</a><a href="gone/">broken</a><a href="guide/#nowhere">broken</a>'
    )
    (tmp_path / "guide" / "index.html").write_text('<h2 id="here">Here</h2><img src="../missing.png">')
    problems = _links_module().broken_links(tmp_path)
    assert problems == [
        "guide/index.html: ../missing.png (no such file)",
        "index.html: gone/ (no such file)",
        "index.html: guide/#nowhere (no anchor #nowhere)",
    ]


@pytest.mark.slow
def test_site_builds_strict_and_every_internal_link_resolves(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    problems = _links_module().broken_links(site)
    print(f"\nsite built in {seconds:.1f} s; {len(problems)} broken links")
    assert not problems, "\n".join(problems)
    # The generated parts are there: a reference page per package, the method cards, the three figures.
    for page in (
        "reference/composer.algorithms",
        "reference/composer.functional",
        "reference/composer.optim.scheduler",
    ):
        assert (site / page / "index.html").is_file(), page
    html = (site / "reference" / "composer.optim.scheduler" / "index.html").read_text()
    assert 'id="composer.optim.scheduler.cosine_annealing_scheduler"' in html
    assert 'id="composer.algorithms.MixUp"' in (site / "reference" / "composer.algorithms" / "index.html").read_text()
    assert (
        'id="composer.functional.mixup_batch"'
        in (site / "reference" / "composer.functional" / "index.html").read_text()
    )
    for figure in ("event_loop.svg", "lr_curves.png", "digits_compare.png"):
        assert (site / "images" / figure).stat().st_size > 1000, figure
    assert (site / "methods" / "mixup" / "index.html").is_file()
