"""Every relative link of the Markdown in the repository works where it is read: on the repository host, it names a
file or folder of the repository; on the site, the docs hook (docs/hooks/site.py) maps it to a page or an asset.

Links in code blocks and code spans are code, not links, and are left out.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = sorted(
    {*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md")}
    | {path for folder in ("composer", "recipes", "scripts", "benchmarks") for path in ROOT.glob(f"{folder}/**/*.md")}
)
_CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.M | re.S)
_LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(text: str, images: bool = False) -> list[str]:
    """The relative link targets of a Markdown text (web addresses and in-page anchors left out), anchors removed.

    With ``images``, an image's target keeps a leading ``!``.
    """
    targets = [(bang if images else "") + t for bang, t in _LINK.findall(_CODE.sub("", text))]
    return [t.partition("#")[0] for t in targets if not re.match(r"^!?([a-z]+:|#)", t)]


def test_relative_links_skip_code_web_addresses_and_anchors():
    text = "[a](x.md#top) ![i](img/p.png) [w](https://e.com/y) [h](#here) `[c](code.md)`\n```\n[d](block.md)\n```\n"
    assert relative_links(text) == ["x.md", "img/p.png"]


def _repository_links() -> list[tuple[str, str]]:
    return [
        (path.relative_to(ROOT).as_posix(), target) for path in MARKDOWN for target in relative_links(path.read_text())
    ]


def test_every_relative_link_names_a_file_or_folder_of_the_repository():
    links = _repository_links()
    assert len(MARKDOWN) > 40 and len(links) > 80
    dead = [
        f"{source}: {target}"
        for source, target in links
        if not (ROOT / posixpath.dirname(source) / target).exists()
        or not (ROOT / posixpath.dirname(source) / target).resolve().is_relative_to(ROOT)
    ]
    assert not dead, "dead on the repository host (link to the repository's file; the docs hook maps it):\n" + (
        "\n".join(dead)
    )


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_{name}_hook", ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_committed_event_loop_figure_is_the_one_the_code_draws():
    # The pages show docs/images/event_loop.svg on the repository host; `bash scripts/docs figures` draws it again.
    committed = (ROOT / "docs" / "images" / "event_loop.svg").read_text()
    assert committed == _hook("figures").event_loop_svg(), "run `bash scripts/docs figures` and commit docs/images"


def _docs_links() -> dict[str, list[str]]:
    """Each page under docs/ (repository path) -> its relative link targets, images with a leading ``!``."""
    return {
        path.relative_to(ROOT).as_posix(): relative_links(path.read_text(), images=True)
        for path in sorted(ROOT.glob("docs/**/*.md"))
    }


def _linked_modules(links: dict[str, list[str]]) -> list[str]:
    """The modules whose source a page links to (for their reference page), each checked to have one."""
    modules: dict[str, str] = {}  # module -> its source file
    for source, targets in links.items():
        for target in targets:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
            if path.startswith("composer/") and path.endswith(".py"):
                modules[path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")] = path
    reference = _hook("reference")
    for module, path in modules.items():  # a page documents a package with __all__, or a module of MODULE_PAGES
        is_package = path.endswith("__init__.py") and hasattr(importlib.import_module(module), "__all__")
        assert module in reference.MODULE_PAGES or is_package, f"docs link to {path}, which has no reference page"
    return sorted(modules)


def test_the_site_hook_maps_every_link_of_the_docs_pages_to_a_page_or_an_asset():
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    hook = _hook("site")
    links = _docs_links()
    pages = hook.site_pages(_linked_modules(links))
    assert pages["composer/optim/scheduler.py"] == "reference/composer.optim.scheduler.md"
    assert pages["composer/functional/__init__.py"] == "reference/composer.functional.md"
    unmapped = []
    for source, targets in links.items():
        text = "\n".join(f"{'!' * t.startswith('!')}[link]({t.lstrip('!')})" for t in targets)
        rewritten = hook.rewrite_links(text, source, source.removeprefix("docs/"), {}, pages)
        unmapped += [f"{source}: {line}" for line in rewritten.splitlines() if not line.lstrip("!").startswith("[")]
    assert not unmapped, "the site would show these as code, not links:\n" + "\n".join(unmapped)
