"""Checking, before training starts, that a destination will be able to write where it was told to."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_writable"]


def check_writable(path: str | os.PathLike[str], argument: str, *, is_dir: bool) -> Path:
    """Checks that ``path`` can be written (created if missing), leaving nothing behind.

    A folder that exists must be a folder in which a file can be created; a file that exists must be a writable file;
    a missing path needs its nearest existing ancestor to be a folder in which a file can be created. The test creates
    and at once deletes a temporary file, which is what tells (permission bits do not, for root or on read-only
    mounts).

    Args:
        path (str | PathLike): The file or folder a destination will write.
        argument (str): The parameter that named it, for the message.
        is_dir (bool): Whether ``path`` is a folder (else a file).

    Returns:
        Path: ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: If it cannot be written; the message says why and what to change.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> check_writable(Path(folder) / "runs" / "a", "log_dir", is_dir=True).name
        'a'
        >>> check_writable("/proc/not_here/run", "log_dir", is_dir=True)
        Traceback (most recent call last):
        ...
        ValueError: log_dir='/proc/not_here/run' cannot be written: ...
    """
    target = Path(path).expanduser()

    def fail(reason: str) -> ValueError:
        return ValueError(f"{argument}={str(path)!r} cannot be written: {reason}. Choose a folder you can write to.")

    if target.exists():
        if is_dir and not target.is_dir():
            raise fail("it exists and is not a folder")
        if not is_dir and target.is_dir():
            raise fail("it is a folder, not a file")
        if not is_dir and not os.access(target, os.W_OK):
            raise fail("permission denied")
        if is_dir and not _can_create_in(target):
            raise fail("no file can be created in it (permission denied or a read-only file system)")
        return target
    ancestor = target.parent
    while not ancestor.exists():
        if ancestor == ancestor.parent:
            raise fail("none of its parent folders exists")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise fail(f"{str(ancestor)!r} is a file, not a folder")
    if not _can_create_in(ancestor):
        raise fail(f"no file can be created in {str(ancestor)!r} (permission denied or a read-only file system)")
    return target


def _can_create_in(folder: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False
