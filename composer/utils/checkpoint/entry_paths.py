"""Names read from a checkpoint or a store's listing, turned into local paths only inside their folder.

A sharded checkpoint's ``composer.pt`` lists its files by name, DCP's index names the file each tensor is in, and a
store's keys name the files a download writes. Whoever can write the checkpoint (or the bucket) chooses those names,
so each is checked before any byte is read or written under it: :func:`entry_path` refuses an absolute name, an
empty, ``.`` or ``..`` component, a backslash or a NUL, and a name whose path resolves outside the folder (through a
symlink in it, say).
"""

from __future__ import annotations

import os
from pathlib import Path

from composer.utils.checkpoint.errors import CheckpointError

__all__ = ["entry_path"]


def entry_path(folder: str | os.PathLike[str], name: object, *, source: str, nested: bool = False) -> Path:
    """The local path of the entry ``name`` of ``folder``, refused unless it stays inside ``folder``.

    Args:
        folder (str | PathLike): The folder the name is relative to (it need not exist yet).
        name (object): The name, as read from a checkpoint or a listing (any type: it is checked).
        source (str): Where the name was read, for the error message (``'composer.pt's file list'``).
        nested (bool): Allow ``/``-separated names (a file in a subfolder); otherwise one plain file name.

    Returns:
        Path: ``folder`` joined with the name's components.

    Raises:
        CheckpointError: Naming the entry and ``source``, if the name is not a plain relative name, or its path
            resolves outside ``folder``.

    Example:
        >>> entry_path("ckpt/ep1-ba6", "__0_0.distcp", source="composer.pt's file list").as_posix()
        'ckpt/ep1-ba6/__0_0.distcp'
        >>> entry_path("ckpt/ep1-ba6", "../../etc/passwd", source="composer.pt's file list")
        Traceback (most recent call last):
          ...
        composer.utils.checkpoint.errors.CheckpointError: Refusing the entry '../../etc/passwd' of composer.pt's file list: it is not a plain file name...
    """
    folder = Path(folder)
    problem = _name_problem(name, nested)
    if problem is None:
        assert isinstance(name, str)
        path = folder.joinpath(*name.split("/"))
        if not path.resolve().is_relative_to(folder.resolve()):
            problem = f"its path {path} resolves to {path.resolve()}, outside {folder} (through a symlink)"
    if problem is not None:
        raise CheckpointError(
            f"Refusing the entry {name!r} of {source}: {problem}. A checkpoint written by composer names only "
            f"files inside its folder ({folder}); this one was crafted or damaged, so nothing is read from or written "
            "for it. Use another checkpoint (autoresume falls back to an older one by itself).",
            reason=f"{source} names {name!r}, which is not a file inside the checkpoint's folder",
        )
    return path


def _name_problem(name: object, nested: bool) -> str | None:
    if not isinstance(name, str) or not name:
        return f"it is not a non-empty string but {type(name).__name__} {name!r}"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "it is not a plain file name but an absolute path"
    if "\\" in name or "\0" in name:
        return "it is not a plain file name: it holds a backslash or a NUL"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "it is not a plain file name: it has an empty, '.' or '..' component"
    if len(parts) > 1 and not nested:
        return "it is not a plain file name but a path into a subfolder"
    return None
