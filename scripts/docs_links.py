"""Checks every internal link and anchor of a built site, without a network.

Usage: ``python scripts/docs_links.py [SITE_DIR]`` (default ``site``). Every ``href`` and ``src`` in every HTML file
that is not a web address must name a file of the site (a folder means its ``index.html``), and a ``#fragment`` must
name an ``id`` (or ``name``) in that file. Prints each broken link and exits 1 if there is any.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["broken_links", "main"]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name") and tag != "meta":
                self.ids.add(value)
            elif key in ("href", "src") and tag not in ("base",):
                self.links.append(value)


def _target(site: Path, page: Path, link: str) -> tuple[Path | None, str]:
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:", "javascript:")):
        return None, ""
    path = unquote(parts.path)
    if not path:
        return page, parts.fragment
    target = (site / path.lstrip("/")) if path.startswith("/") else (page.parent / path)
    if target.is_dir() or path.endswith("/"):
        target = target / "index.html"
    return target.resolve(), unquote(parts.fragment)


def broken_links(site: Path) -> list[str]:
    """Every broken internal link of the site in ``site``, as ``'page: link (why)'``.

    Args:
        site (Path): The built site's folder.

    Returns:
        list[str]: One line per broken link; empty when every link and anchor resolves.
    """
    site = site.resolve()
    pages: dict[Path, _Page] = {}
    for path in sorted(site.rglob("*.html")):
        parser = _Page()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = parser
    problems = []
    for path, parser in pages.items():
        if path.name == "404.html" and path.parent == site:
            continue  # served from any folder, so its links are written relative to the site's root URL
        for link in parser.links:
            target, fragment = _target(site, path, link)
            if target is None:
                continue
            where = path.relative_to(site)
            if not target.exists():
                problems.append(f"{where}: {link} (no such file)")
            elif fragment and target.suffix == ".html" and fragment not in pages[target].ids:
                problems.append(f"{where}: {link} (no anchor #{fragment})")
    return problems


def main(argv: list[str]) -> int:
    """Checks the site named in ``argv`` (default ``site``) and prints what is broken.

    Args:
        argv (list[str]): The command-line arguments after the script's name.

    Returns:
        int: The exit status, 0 when nothing is broken.
    """
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").is_file():
        print(f"{site}/index.html does not exist: build the site first (bash scripts/docs).", file=sys.stderr)
        return 2
    problems = broken_links(site)
    for line in problems:
        print(line)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(
        f"links: {len(problems)} broken in {pages} pages"
        if problems
        else f"links: every internal link and anchor of {pages} pages resolves"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
