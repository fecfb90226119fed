"""Opens the built site in headless Chromium at 1400 px: screenshots, overflow measured in the DOM, and search order.

Usage: ``python scripts/docs_browser.py [SITE_DIR] [SCREENSHOT_DIR]`` (defaults ``site`` and ``site-check``). The site
is served from ``127.0.0.1`` on a free port (the search index loads in a web worker, which ``file://`` pages may not
start). For the home page, every guide, one method card and one API page it

* saves a screenshot of the window (1400 x 1000) into SCREENSHOT_DIR;
* takes the widths of every code block and table from the DOM (DevTools protocol, on a pipe) and fails on any that is
  wider than its container, that is, one the reader has to scroll sideways;

and it types each of :data:`SEARCHES` into the search box, and fails unless the first result is a guide or a method
card (not an API entry); and it checks that the copy button leaves out a console session's prompts and output. Without a Chromium binary it prints that the check was skipped and why, and exits 0: CI
installs no browser, and the strict build and the link check (``scripts/docs_links.py``) run there instead.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["PAGES", "SEARCHES", "check_copy", "check_page", "check_search", "find_browser", "main"]

# The pages besides the guides (every page under guides/ is checked too): screenshot name -> page of the site.
PAGES = {
    "home": "",
    "card-mixup": "methods/mixup/",
    "api-composer.trainer": "reference/composer.trainer/",
}
# The words users type: for each, the first search result must be a guide or a method card.
SEARCHES = ["resume", "DDP", "warmup", "MixUp", "checkpoint"]
WIDTH, HEIGHT = 1400, 1000


def find_browser() -> str | None:
    """The path of a Chromium (or Chrome) binary on PATH, or None.

    Returns:
        str | None: The first of ``chromium``, ``chromium-browser``, ``google-chrome`` found.
    """
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (no network port, no extra package)."""

    def __init__(self, binary: str, profile: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Move the browser's ends above 9 first, so that putting them at 3 and 4 cannot close one of them.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
        os.close(to_browser_r)
        os.close(from_browser_w)
        to_browser_r, from_browser_w = high
        command = [
            binary,
            "--headless",
            "--no-sandbox",  # the check may run as root in a container
            "--disable-gpu",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]

        # The browser reads commands from fd 3 and writes replies to fd 4: bash puts the pipes there.
        wire = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        self._process = subprocess.Popen(
            ["bash", "-c", wire, *command],
            pass_fds=(to_browser_r, from_browser_w),
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Sends one command and returns its result (events that arrive meanwhile are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if getattr(self, "_session", None):
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        return self.send("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def open(self, url: str) -> None:
        """Loads ``url`` and waits until the document has loaded."""
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def wait_for(self, expression: str, seconds: float = 30.0) -> Any:
        """Polls ``expression`` until it is truthy (or ``seconds`` pass) and returns its last value."""
        deadline = time.monotonic() + seconds
        value = self.evaluate(expression)
        while not value and time.monotonic() < deadline:
            time.sleep(0.2)
            value = self.evaluate(expression)
        return value

    def screenshot(self, path: Path) -> None:
        """Saves what the window shows as a PNG."""
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        """Ends the browser."""
        self._process.terminate()
        self._process.wait(timeout=30)
        os.close(self._to_browser)
        os.close(self._from_browser)


# Every code block and table wider than the box it sits in, as [kind, content width, box width, first words]. A code
# block scrolls inside its <pre>; Material wraps a table in a scrolling div (.md-typeset__scrollwrap).
_OVERFLOW = """Array.from(document.querySelectorAll('.md-content pre > code, .md-content .md-typeset__scrollwrap, .md-content table'))
  .filter(e => !e.closest('.md-typeset__scrollwrap table') || e.tagName !== 'TABLE')
  .map(e => {
    const box = e.tagName === 'TABLE' ? e.parentElement : e;
    return [e.tagName === 'CODE' ? 'code' : 'table', box.scrollWidth, box.clientWidth,
            e.textContent.trim().replace(/\\s+/g, ' ').slice(0, 60)];
  })
  .filter(([kind, content, width]) => content > width + 1)"""
# The search results' links, in order, once the worker has answered.
_RESULTS = "Array.from(document.querySelectorAll('.md-search-result__item > a')).map(a => a.getAttribute('href'))"
_READER_PAGES = ("guides/", "methods/")  # a search for the words users type should land on one of these first


def _pages(site: Path) -> dict[str, str]:
    """Screenshot name -> page: :data:`PAGES` and every guide."""
    guides = {
        f"guide-{path.parent.name}": f"guides/{path.parent.name}/" for path in sorted(site.glob("guides/*/index.html"))
    }
    return {**PAGES, **guides}


def check_page(chromium: _Browser, url: str, shot: Path) -> list[str]:
    """Opens ``url``, saves its screenshot to ``shot`` and returns its overflowing code blocks and tables."""
    chromium.open(url)
    chromium.wait_for("document.fonts.status === 'loaded'")
    chromium.screenshot(shot)
    wide = chromium.evaluate(_OVERFLOW) or []
    return [f"{url}: {kind} {content} px wide in a {width} px box: {text!r}" for kind, content, width, text in wide]


# What the copy button copies from the first console session on the page (docs/javascripts/copy.js).
_COPIED = "(() => { const p = document.querySelector('.md-content pre > code .gp'); return p && copyableText(p.closest('code')); })()"


def check_copy(chromium: _Browser, url: str) -> str | None:
    """Returns a problem unless the copy button copies a console session's code without prompts or output."""
    chromium.open(url)
    copied = chromium.evaluate(_COPIED) or ""
    print(f"copy button on {url}: {copied.splitlines()[:2]}")
    if not copied.strip() or ">>>" in copied or "\n... " in copied:
        return f"{url}: the copy button copies {copied[:80]!r}, not the session's code without its prompts"
    return None


def check_search(chromium: _Browser, base: str, term: str) -> str | None:
    """Types ``term`` into the search box; returns a problem unless the first result is a guide or a card."""
    chromium.open(base)
    chromium.wait_for("document.querySelector('[data-md-component=search-query]') !== null")
    # Type the term into the search box the way a reader does, then wait for the worker's answer.
    chromium.evaluate(
        "(() => { const box = document.querySelector('[data-md-component=search-query]');"
        f" box.focus(); box.value = {json.dumps(term)};"
        " box.dispatchEvent(new Event('input', {bubbles: true})); })()"
    )
    links = chromium.wait_for(f"{_RESULTS}.length > 0 && {_RESULTS}") or []
    pages = [link.removeprefix(base).removeprefix("./") for link in links]
    print(f"search {term!r}: {len(pages)} results, first: {pages[:3]}")
    if not pages or not pages[0].startswith(_READER_PAGES):
        return f"search {term!r}: the first result is {pages[:1]}, not a guide or a method card"
    return None


def main(argv: list[str]) -> int:
    """Runs the browser check on the site in ``argv[0]`` and writes the screenshots to ``argv[1]``.

    Args:
        argv (list[str]): The command-line arguments after the script's name.

    Returns:
        int: The exit status: 0 when nothing overflows and every search puts a guide or card first (or no browser was
        there), 1 otherwise, 2 without a built site.
    """
    site = Path(argv[0] if argv else "site").resolve()
    shots = Path(argv[1] if len(argv) > 1 else "site-check").resolve()
    browser = find_browser()
    if browser is None:
        print("browser check skipped: no chromium on PATH (apt-get install chromium); the link check still ran.")
        return 0
    if not (site / "index.html").is_file():
        print(f"{site}/index.html does not exist: build the site first (bash scripts/docs).", file=sys.stderr)
        return 2
    shots.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        chromium = _Browser(browser, profile)
        try:
            for name, page in _pages(site).items():
                problems += check_page(chromium, base + page, shots / f"{name}.png")
            print(f"screenshots: {len(_pages(site))} pages at {WIDTH} px into {shots}")
            problem = check_copy(chromium, base + PAGES["card-mixup"])
            problems += [problem] if problem else []
            for term in SEARCHES:
                problem = check_search(chromium, base, term)
                problems += [problem] if problem else []
                chromium.screenshot(shots / f"search-{term}.png")
        finally:
            chromium.close()
            server.shutdown()
    print("\n".join(problems) if problems else "no code block or table is wider than its box; every search as expected")
    return 1 if problems else 0


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        del format, args


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
