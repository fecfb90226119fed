"""A griffe extension that reads the library's docstrings the way its doctests and Sphinx-era markup mean them.

* ``Example:`` starts an examples section (griffe's Google parser knows only ``Examples:``), so the doctest is shown
  as code instead of quoted text.
* Sphinx roles (``:class:`~composer.core.Time```, ``:func:`compile```, ``:meth:`fit <composer.Trainer.fit>```) become cross-references to the named object
  where it is documented (plain code where it is not, such as a torch name), and ``:math:`t \\times s``` becomes
  italic text with the symbols spelled out (*t x s* with a multiplication sign).
* An RST link, ```Title <https://...>`_``, becomes a Markdown link (it would show as code, and not be clickable).
* A paragraph that ends in ``::`` before an indented block ends in ``:`` (the block is already Markdown code).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["SphinxToMarkdown"]

_ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|math):`(~?)([^`]+)`")
_TITLED = re.compile(r"(?P<title>[^<]+)<(?P<target>[^<>\s]+)>", re.S)
_RST_LINK = re.compile(r"`(?P<title>[^`<]+?)\s*<(?P<url>https?://[^>\s]+)>`__?", re.S)
# The LaTeX the docstrings' :math: roles use, as the characters a browser shows.
_SYMBOLS = {
    "\\times": "\u00d7",
    "\\cdot": "\u00b7",
    "\\leq": "\u2264",
    "\\geq": "\u2265",
    "\\alpha": "\u03b1",
    "\\lambda": "\u03bb",
}


def _math(latex: str) -> str:
    for command, symbol in _SYMBOLS.items():
        latex = latex.replace(command, symbol)
    return f"*{latex}*"


def _convert(text: str, module: str) -> str:
    def role(match: re.Match[str]) -> str:
        kind, tilde, target = match.groups()
        if kind == "math":
            return _math(target)
        titled = _TITLED.fullmatch(target.strip())
        if titled:  # Sphinx's explicit title: ``:attr:`shown text <composer.x.Y.z>```
            shown, target = titled["title"].strip(), titled["target"].strip().removesuffix("()")
        else:
            target = target.strip().removesuffix("()")
            shown = target.rsplit(".", 1)[-1] if tilde else target
        if not target.startswith("composer."):
            # A relative name (``compile``, ``State.timer``): look for it in the docstring's own module.
            target = f"{module}.{target}" if not target.startswith(("torch", "typing", "collections")) else ""
        if not target:
            return f"`{shown}`"
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    text = _ROLE.sub(role, text)
    text = _RST_LINK.sub(lambda link: f"[{' '.join(link['title'].split())}]({link['url']})", text)
    text = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", text, flags=re.M)
    return re.sub(r"(\S)::\s*$", r"\1:", text, flags=re.M)


class SphinxToMarkdown(griffe.Extension):
    """Rewrites every docstring before it is parsed (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrites ``obj``'s docstring in place."""
        del kwargs
        if obj.docstring is not None:
            obj.docstring.value = _convert(obj.docstring.value, obj.module.path)
