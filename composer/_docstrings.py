"""The ``Args:`` section of a Google-style docstring, read without importing anything of the library.

Shared by the config classes derived from constructors (:mod:`composer.core.hparams`) and the torch-free view of the
registries (:mod:`composer.config.sources`), so that both give a field the same doc.
"""

from __future__ import annotations

import re

__all__ = ["args_section"]

_HEADINGS = ("Args:", "Arguments:", "Attributes:")


def args_section(doc: str) -> dict[str, str]:
    """Each argument of the first ``Args:`` section (or ``Arguments:``, ``Attributes:``) and its description.

    An entry's type in parentheses is dropped, and its continuation lines are joined with single spaces.

    Args:
        doc: A docstring, as written or as :func:`inspect.getdoc` returns it.

    Returns:
        dict[str, str]: In the docstring's order; empty when there is no such section.

    Example:
        >>> args_section('''Scales.
        ...
        ... Args:
        ...     factor (float): How much;
        ...         at least 0.
        ...     name: Its name.
        ...
        ... Returns:
        ...     Nothing.''')
        {'factor': 'How much; at least 0.', 'name': 'Its name.'}
    """
    args: dict[str, str] = {}
    lines = doc.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in _HEADINGS]
    if not starts:
        return args
    indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    current = ""
    for line in lines[starts[0] + 1 :]:
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= indent:
            break
        entry = re.match(r"\s*\*{0,2}(\w+)(?: \(.*?\))?: ?(.*)$", line)
        if entry and (not current or depth <= indent + 4):
            current = entry.group(1)
            args[current] = entry.group(2).strip()
        elif current and line.strip():
            args[current] = f"{args[current]} {line.strip()}".strip()
    return args
