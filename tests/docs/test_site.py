"""The documentation site builds in strict mode, and every internal link and anchor of its HTML resolves."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # Never --quiet: it hides the warnings that --strict fails on (scripts/docs builds the same way).
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole site, built once for the module's tests (about 30 s)."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path_factory.mktemp("site") / "site"
    start = time.perf_counter()
    done = _mkdocs_build(ROOT, site)
    print(f"\nsite built in {time.perf_counter() - start:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return site


def test_strict_build_fails_on_an_unresolved_cross_reference(tmp_path):
    # The gate itself: a two-page site with the real site's plugins, one page linking to a name nobody documents.
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the page](#home) and [`thing`][composer.nowhere].\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: gate\nstrict: true\nplugins: [autorefs]\nmarkdown_extensions: [attr_list, toc]\n"
    )
    done = _mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Could not find cross-reference target 'composer.nowhere'" in done.stderr, done.stderr
    # The same page with the target defined builds: the failure above is the reference, not the setup.
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[](){#composer.nowhere}\n\n[`thing`][composer.nowhere]\n")
    done = _mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_site_builds_strict_and_every_internal_link_resolves(site):
    problems = _links_module().broken_links(site)
    assert not problems, "\n".join(problems)
    # An unresolved cross-reference would have failed the build; none shows as literal text either.
    literal = [str(page.relative_to(site)) for page in site.rglob("*.html") if "][]" in page.read_text()]
    assert not literal, f"literal '][]' (an unresolved cross-reference) on: {literal}"
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
    functional = (site / "reference" / "composer.functional" / "index.html").read_text()
    assert 'id="composer.functional.mixup_batch"' in functional
    # A function shadowed by its module (composer.algorithms.randaugment.randaugment) is linked to under its public
    # path: randaugment_image is documented as composer.functional.randaugment, on the same page.
    assert 'href="#composer.functional.randaugment"' in functional
    for figure in ("event_loop.svg", "lr_curves.png", "digits_compare.png"):
        assert (site / "images" / figure).stat().st_size > 1000, figure
    assert (site / "methods" / "mixup" / "index.html").is_file()


@pytest.mark.slow
def test_method_cards_index_shows_each_tldr_and_the_cards_show_their_pictures(site):
    index = (site / "methods" / "index.html").read_text()
    assert "Tags:" not in index
    # Each row's summary is the first words of the card's TL;DR (rendered, so compared after the code spans).
    for card in sorted((ROOT / "composer" / "algorithms").glob("*/README.md")):
        tldr = card.read_text().split("## TL;DR\n\n", 1)[1]
        first_words = " ".join(tldr.split()[:3]).replace("`", "")
        assert first_words in re.sub(r"</?code>", "", index), (card.parent.name, first_words)
    # A card's doctests are console sessions: their prompts are marked, so the copy button can leave them out.
    assert '<span class="gp">&gt;&gt;&gt; </span>' in (site / "methods" / "mixup" / "index.html").read_text()
    for name in ("blurpool", "colout", "cutout", "mixup", "progressive_resizing", "scale_schedule"):
        assert (site / "images" / "methods" / f"{name}.png").stat().st_size > 5000, name
        assert f'src="../../images/methods/{name}.png"' in (site / "methods" / name / "index.html").read_text(), name


@pytest.mark.slow
def test_reference_reads_in_order_and_search_ranks_guides_above_members(site):
    trainer = (site / "reference" / "composer.trainer" / "index.html").read_text()
    # The Trainer first on its page; the scheduler functions before their configs.
    assert trainer.index('id="composer.trainer.Trainer"') < trainer.index('id="composer.trainer.Profiler"')
    scheduler = (site / "reference" / "composer.optim.scheduler" / "index.html").read_text()
    headings = re.findall(r'<h2 id="composer\.optim\.scheduler\.(\w+)"', scheduler)
    functions = [index for index, name in enumerate(headings) if name.endswith("_scheduler")]
    configs = [index for index, name in enumerate(headings) if name.endswith("Hparams")]
    assert functions and configs and max(functions) < min(configs), headings
    # A near-empty subpackage is a section of its parent's page, not a page of its own.
    assert not (site / "reference" / "composer.algorithms.mixup").exists()
    assert 'id="composer.algorithms.mixup"' in (site / "reference" / "composer.algorithms" / "index.html").read_text()
    # RST paper links are links; :math: roles are not code.
    functional = (site / "reference" / "composer.functional" / "index.html").read_text()
    assert 'href="https://arxiv.org/abs/1710.09412"' in functional and "&lt;https://" not in functional
    leftover = [
        str(page.relative_to(site)) for page in site.glob("reference/*/index.html") if ":math:" in page.read_text()
    ]
    assert not leftover, f"a :math: role shows as text on {leftover}"
    # The search index: guides and cards boosted, a class's members (resume_state, ddp_model) far below.
    entries = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    boost = {entry["location"]: entry.get("boost", 1.0) for entry in entries}
    assert boost["guides/checkpoints/"] > 1 and boost["methods/mixup/"] > 1
    assert boost["reference/composer.trainer/#composer.trainer.Trainer.ddp_model"] < 0.1
    assert boost["reference/composer.trainer/#composer.trainer.Trainer"] == 1.0
