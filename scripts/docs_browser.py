"""Opens the built site in headless Chromium: screenshots of three pages, and two searches that must find their name.

Usage: ``python scripts/docs_browser.py [SITE_DIR] [SCREENSHOT_DIR]`` (defaults ``site`` and ``site-check``). The site
is served from ``127.0.0.1`` on a free port (the search index loads in a web worker, which ``file://`` pages may not
start). Without a Chromium binary it prints that the check was skipped and why, and exits 0: CI installs no browser,
and the link check (``scripts/docs_links.py``) runs there instead.
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

__all__ = ["PAGES", "SEARCHES", "find_browser", "main"]

# What to photograph: file name -> page of the site.
PAGES = {
    "home.png": "",
    "guide.png": "guides/how-it-works/",
    "api.png": "reference/composer.algorithms/",
}
# Search terms that must come back with a result whose title names them.
SEARCHES = ["MixUp", "cosine_annealing_scheduler"]


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
        self.send("Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1, mobile=False)

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


# Every search result's title (pages and sections on them), once the results are in.
_RESULTS = "Array.from(document.querySelectorAll('.md-search-result__article h1, .md-search-result__article h2')).map(e => e.textContent)"


def main(argv: list[str]) -> int:
    """Runs the browser check on the site in ``argv[0]`` and writes the screenshots to ``argv[1]``.

    Args:
        argv (list[str]): The command-line arguments after the script's name.

    Returns:
        int: The exit status: 0 when every search found its name (or no browser was there), 1 otherwise.
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
    failures = 0
    with tempfile.TemporaryDirectory() as profile:
        chromium = _Browser(browser, profile)
        try:
            for name, page in PAGES.items():
                chromium.open(base + page)
                chromium.screenshot(shots / name)
                print(f"screenshot: {shots / name} ({base + page})")
            for term in SEARCHES:
                chromium.open(base)
                chromium.wait_for("document.querySelector('[data-md-component=search-query]') !== null")
                # Type the term into the search box the way a reader does, then wait for the worker's answer.
                chromium.evaluate(
                    "(() => { const box = document.querySelector('[data-md-component=search-query]');"
                    f" box.focus(); box.value = {json.dumps(term)};"
                    " box.dispatchEvent(new Event('input', {bubbles: true})); })()"
                )
                titles = chromium.wait_for(f"{_RESULTS}.length > 0 && {_RESULTS}") or []
                found = [title for title in titles if term.lower() in title.lower()]
                print(f"search {term!r}: {len(titles)} results, {len(found)} naming it (first: {titles[:3]})")
                failures += not found
                chromium.screenshot(shots / f"search-{term}.png")
        finally:
            chromium.close()
            server.shutdown()
    return 1 if failures else 0


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        del format, args


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
