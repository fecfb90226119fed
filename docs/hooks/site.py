"""The MkDocs hook that generates the pages and figures the site builds from the code.

* ``reference/<module>.md``: one page per public package (and the modules in ``reference.MODULE_PAGES``), listing
  every name of its ``__all__`` for mkdocstrings to render from the docstrings.
* ``methods/<name>.md``: each algorithm's method card (``composer/algorithms/<name>/README.md``), unchanged but for
  its links and the highlighting of its doctest blocks.
* ``notes/*.md``: the longer notes kept next to the code (recipes, distributed training, ``composer launch``).
* ``images/``: the event-loop diagram, the schedulers' learning-rate curves, the method cards' pictures
  (``method_figures.py``) and the main job's committed Pareto plot.

The hand-written pages under ``docs/`` link to the repository's files (a method card's ``README.md``, a module's
source for its reference page), so that their links work on the repository host too; ``on_page_markdown`` points
them at the site's pages.
"""

from __future__ import annotations

import importlib
import inspect
import json
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).parent))

import figures
import method_figures
import reference

ROOT = Path(__file__).resolve().parents[2]

# Markdown kept next to the code that the site shows as a page: repository path -> page path.
NOTES = {
    "recipes/README.md": "notes/recipes.md",
    "composer/distributed/DISTRIBUTED.md": "notes/distributed.md",
    "composer/cli/LAUNCH.md": "notes/launch.md",
}
NOTE_TITLES = {
    "notes/recipes.md": "Recipes and results",
    "notes/distributed.md": "Distributed training (details)",
    "notes/launch.md": "composer launch (details)",
}
# The committed result of the main job (`bash scripts/train`): the build shows it, and never reruns the job.
PARETO = "recipes/results/digits_compare.png"
# The figures drawn from the code, committed under docs/ so that the pages show them on the repository host too
# (tests/docs/test_links.py checks the event loop is current); the build draws them again.
FIGURES = {"event_loop.svg": "images/event_loop.svg", "lr_curves.png": "images/lr_curves.png"}

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _cards() -> dict[str, str]:
    """Method cards: repository path -> page path, in the order of the registry's names."""
    return {
        f"composer/algorithms/{card.parent.name}/README.md": f"methods/{card.parent.name}.md"
        for card in sorted((ROOT / "composer" / "algorithms").glob("*/README.md"))
    }


def site_pages(modules: list[str] | dict[str, str]) -> dict[str, str]:
    """Every repository path the site shows as a generated page: repository path -> page path.

    The notes, the method cards (and their folder, ``composer/algorithms``, as the cards' index), the README as the home
    page, and the source of each module in ``modules`` (its ``__init__.py``, or its ``.py`` file) as its reference page
    (``modules`` may map a module to the page that shows it, :func:`reference.page_of`). So a page links to the
    repository's file, which works on the repository host, and the site shows the page.
    """
    pages = {**NOTES, **_cards(), "composer/algorithms": "methods/index.md", "README.md": "index.md"}
    uris = modules if isinstance(modules, dict) else {module: f"reference/{module}.md" for module in modules}
    for module, uri in uris.items():
        path = module.replace(".", "/")
        pages[f"{path}/__init__.py" if (ROOT / path).is_dir() else f"{path}.py"] = uri
    return pages


def rewrite_links(text: str, source: str, page: str, assets: dict[str, str], pages: dict[str, str]) -> str:
    """Points the relative links of ``source`` (a repository path) at their place on the site, seen from ``page``.

    A link to a file of ``pages`` (from :func:`site_pages`) goes to its page, a link into ``docs/`` to that file of
    the site; a link to another image copies the image to ``assets/`` (added to ``assets``: repository path -> site
    path); a link to any other repository file becomes its path in code, since the site has no copy of it. Web links,
    in-page anchors and code blocks are left alone.
    """

    def replace(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if repo_path in pages:
            site_path = pages[repo_path]
        elif repo_path.startswith("docs/"):
            site_path = repo_path.removeprefix("docs/")
        elif bang and (ROOT / repo_path).is_file():
            site_path = assets.setdefault(repo_path, f"assets/{repo_path}")
        else:
            return f"{label} (`{repo_path}`)" if label.strip("`") != repo_path else f"`{repo_path}`"
        relative = posixpath.relpath(site_path, posixpath.dirname(page))
        return f"{bang}[{label}]({relative}{'#' + anchor if anchor else ''})"

    # Fenced blocks are code, not Markdown: `model[0](x)` in an example is no link.
    parts = re.split(r"(^```.*?^```)", text, flags=re.M | re.S)
    return "".join(part if part.startswith("```") else _LINK.sub(replace, part) for part in parts)


def _card_markdown(text: str) -> str:
    # Card examples are doctests (in plain or python fences): highlight them as Python console sessions, so that the
    # prompts and the output are marked as such (and the copy button leaves them out).
    return re.sub(r"^```(?:python)?\n(?=>>> )", "```pycon\n", text, flags=re.M)


def _reference_markdown(page: reference.Page) -> str:
    lines = [
        f"# `{page.module}`",
        "",
        f"::: {page.module}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "",
    ]
    if page.elsewhere:
        lines += [
            "",
            "Also importable from here (documented where listed):",
            "",
            "| name | documented as |",
            "|---|---|",
        ]
        lines += [f"| `{name}` | [`{path}`][{path}] |" for name, path in page.elsewhere.items()]
        lines.append("")
    lines += _names_markdown(page, level=2)
    for folded in page.folded:  # a near-empty subpackage: its docstring and its own names, a level down
        lines += [f"::: {folded.module}", "    options:", "      members: false", "      heading_level: 2", ""]
        lines += _names_markdown(folded, level=3)
    return "\n".join(lines)


def _names_markdown(page: reference.Page, level: int) -> list[str]:
    lines: list[str] = []
    module = importlib.import_module(page.module)
    for name in page.documented:
        path = f"{page.module}.{name}"
        source = reference.source_path(path, getattr(module, name))
        if source == path:
            lines += [f"::: {path}", "    options:", f"      heading_level: {level}", ""]
        else:  # shadowed by its module: rendered from its definition, under the path users type
            # `[](){#id}` (attr_list) is an anchor autorefs registers, so `[text][path]` links here; a raw <a id> is not.
            lines += [f"[](){{#{path}}}", "", f"::: {source}", "    options:", f"      heading_level: {level}"]
            lines += [f"      heading: {path}", f"      toc_label: {name}", ""]
    return lines


def _reference_index(pages: list[reference.Page]) -> str:
    lines = [
        "# API reference",
        "",
        "Every public name of every package, generated from the docstrings. Each name is documented once, under the",
        "import path you would type; the other packages that re-export it link to it.",
        "",
        "| module | names documented there |",
        "|---|---|",
    ]
    for page in pages:
        count = len(page.documented) + sum(len(folded.documented) for folded in page.folded)
        folded = ", ".join(f"`{folded.module}`" for folded in page.folded)
        lines.append(f"| [`{page.module}`]({page.module}.md) | {count}{f' (with {folded})' if folded else ''} |")
    return "\n".join(lines) + "\n"


# Every method card's sections, in this order (tests/docs/test_method_cards.py checks each card).
CARD_SECTIONS = [
    "TL;DR",
    "How to use",
    "Implementation details",
    "When it helps",
    "Measured cost and effect",
    "Reference",
]


def card_summary(text: str) -> str:
    """The first sentence of a method card's TL;DR (``text`` is the card's Markdown), for the cards' index."""
    tldr = text.split("\n## TL;DR\n", 1)[1].split("\n## ", 1)[0]
    paragraph = " ".join(tldr.strip().split("\n\n")[0].split())
    # A sentence ends at '.', '!' or '?' before a capital letter, but not after an abbreviation ("et al.", "e.g.").
    return re.split(r"(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z`(])", paragraph, maxsplit=1)[0]


def _methods_index(cards: dict[str, str]) -> str:
    lines = [
        "# Method cards",
        "",
        "One card per speed-up method: what it does, how to use it with the Trainer and in your own loop, the exact",
        "rule it applies, when it helps, and what it measured here. [How to read a card](../guides/speedup-methods.md).",
        "",
        "| method | what it does |",
        "|---|---|",
    ]
    for source, page in cards.items():
        text = (ROOT / source).read_text()
        title = text.splitlines()[0].lstrip("# ").strip()
        summary = card_summary(text).replace("|", "\\|")  # a table cell
        lines.append(f"| [{title}]({posixpath.basename(page)}) | {summary} |")
    return "\n".join(lines) + "\n"


_STATE: dict[str, Any] = {}


def on_config(config: Any) -> Any:
    """Adds the generated sections to the navigation."""
    pages = reference.fold_near_empty(reference.reference_pages())
    cards = _cards()
    _STATE.update(pages=pages, cards=cards, site_pages=site_pages(reference.page_of(pages)))
    titles = {page: (ROOT / source).read_text().splitlines()[0].lstrip("# ").strip() for source, page in cards.items()}
    config.nav.append({"Method cards": ["methods/index.md", *({title: page} for page, title in titles.items())]})
    config.nav.append({"API reference": ["reference/index.md", *_reference_nav(pages)]})
    config.nav.append({"Notes": [{NOTE_TITLES[page]: page} for page in NOTES.values()]})
    return config


def _reference_nav(pages: list[reference.Page]) -> list[Any]:
    """The reference pages grouped by package (``composer.algorithms`` holds ``composer.algorithms.mixup``)."""
    groups: dict[str, list[str]] = {}
    for page in pages:
        groups.setdefault(".".join(page.module.split(".")[:2]), []).append(page.uri)
    return [uris[0] if len(uris) == 1 else {package: uris} for package, uris in groups.items()]


# Search: the guides and the method cards answer the words users type ("resume", "DDP", "warmup"), so they rank above
# the API reference. A class's members (an attribute ``resume_state``, a property ``ddp_model``) would otherwise win
# on their title alone; on_post_build ranks them lower still (MEMBER_BOOST).
SEARCH_BOOST = {"guides/": 8.0, "methods/": 6.0}
MEMBER_BOOST = 0.01


def _search_boost(uri: str) -> float | None:
    return next((boost for prefix, boost in SEARCH_BOOST.items() if uri.startswith(prefix)), None)


def _is_class_member(path: str, modules: dict[str, Any]) -> bool:
    """Whether the dotted ``path`` (an API reference anchor) names an attribute or method of a class.

    ``modules`` caches each dotted prefix's module (None where it is not one): most prefixes are classes, and a failed
    import is slow.
    """
    parts = path.split(".")[:-1]
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix not in modules:
            try:
                modules[prefix] = importlib.import_module(prefix)
            except ImportError:
                modules[prefix] = None
        if modules[prefix] is not None:
            obj = modules[prefix]
            for name in parts[cut:]:
                obj = getattr(obj, name, None)
            return inspect.isclass(obj)
    return False


def on_post_build(config: Any) -> None:
    """Ranks the API reference's class members below everything else in the search index Material wrote."""
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text())
    modules: dict[str, Any] = {}
    for entry in data["docs"]:
        page, _, anchor = entry["location"].partition("#")
        if page.startswith("reference/") and anchor.startswith("composer.") and _is_class_member(anchor, modules):
            entry["boost"] = entry.get("boost", 1.0) * MEMBER_BOOST
    index.write_text(json.dumps(data, separators=(",", ":")))


def _add(files: Files, config: Any, uri: str, content: str | bytes) -> None:
    # A figure committed under docs/ (so that it shows on the repository host) is replaced by the one drawn now.
    if (existing := files.get_file_from_path(uri)) is not None:
        files.remove(existing)
    files.append(File.generated(config, uri, content=content))


def on_files(files: Files, config: Any) -> Files:
    """Adds the generated pages and figures."""
    pages: list[reference.Page] = _STATE["pages"]
    cards: dict[str, str] = _STATE["cards"]
    assets: dict[str, str] = {PARETO: "images/digits_compare.png"}
    _STATE.update(assets=assets, added=set())
    _add(files, config, "reference/index.md", _reference_index(pages))
    for page in pages:
        _add(files, config, page.uri, _reference_markdown(page))
    _add(files, config, "methods/index.md", _methods_index(cards))
    for source, page in {**cards, **NOTES}.items():
        text = rewrite_links((ROOT / source).read_text(), source, page, assets, _STATE["site_pages"])
        _add(files, config, page, _card_markdown(text) if page.startswith("methods/") else text)
    _add_assets(files, config)
    _add(files, config, FIGURES["event_loop.svg"], figures.event_loop_svg())
    _add(files, config, FIGURES["lr_curves.png"], figures.lr_curves_png())
    for name in method_figures.METHOD_FIGURES:
        _add(files, config, f"images/methods/{name}.png", method_figures.method_figure_png(name))
    return files


def _add_assets(files: Files, config: Any) -> None:
    added: set[str] = _STATE["added"]
    for source, site_path in _STATE["assets"].items():
        if source not in added:
            added.add(source)
            _add(files, config, site_path, (ROOT / source).read_bytes())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Points the links of the pages written under docs/ (which link to the repository's files) at the site's pages.

    Also sets the page's search boost (:data:`SEARCH_BOOST`) unless its front matter sets one.
    """
    boost = _search_boost(page.file.src_uri)
    if boost is not None and "boost" not in (page.meta.get("search") or {}):
        page.meta["search"] = {**(page.meta.get("search") or {}), "boost": boost}
    if page.file.generated_by is not None:  # a card or a note: rewritten when it was added
        return markdown
    uri = page.file.src_uri
    text = rewrite_links(markdown, f"docs/{uri}", uri, _STATE["assets"], _STATE["site_pages"])
    _add_assets(files, config)
    return text
