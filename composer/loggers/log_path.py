"""Where a destination writes: filling in ``{run_name}``, ``{rank}``, ... as in ``save_folder``, and checking, before
training starts, that it will be able to write there."""

from __future__ import annotations

import os
import string
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from composer.utils.checkpoint import FILENAME_FIELDS, format_checkpoint_name

if TYPE_CHECKING:
    from composer.core.state import State

__all__ = ["check_writable", "fill_log_path", "format_log_path", "has_placeholders"]


def has_placeholders(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds ``str.format`` fields such as ``{run_name}`` (``{{`` and ``}}`` are literal braces).

    Example:
        >>> has_placeholders("runs/{run_name}/log.txt"), has_placeholders("runs/log.txt")
        (True, False)
    """
    try:
        return any(field is not None for _, field, _, _ in string.Formatter().parse(str(path)))
    except ValueError:
        return True  # an unbalanced brace: format_log_path says what is wrong


def format_log_path(path: str | os.PathLike[str], state: State, argument: str) -> Path:
    """Fills the fields of ``path`` from the run, with the same fields and values as the Trainer's ``save_folder``.

    ``{run_name}`` is the run's name (``state.run_name``), ``{rank}`` the process's rank, and the other fields of
    :data:`~composer.utils.checkpoint.FILENAME_FIELDS` are read from ``state`` (its time fields when called: 0 at
    ``Event.INIT``). A path without fields is returned as it is.

    Args:
        path (str | PathLike): The pattern, e.g. ``'out/{run_name}/log.txt'``.
        state (State): The run.
        argument (str): The parameter that named the path, for the messages.

    Raises:
        ValueError: If ``path`` uses a field that does not exist, or ``{run_name}`` when the run has no name.

    Example:
        >>> import torch
        >>> from composer.core.state import State
        >>> state = State(model=torch.nn.Linear(1, 1), max_duration="1ep", run_name="demo")
        >>> format_log_path("out/{run_name}/rank{rank}.log", state, "filename").as_posix()
        'out/demo/rank0.log'
    """
    text = str(path)
    if not has_placeholders(text):
        return Path(text).expanduser()
    if "run_name" in _fields(text) and not state.run_name:
        raise ValueError(
            f"{argument}={text!r} uses {{run_name}}, but the run has no name (state.run_name is "
            f"{state.run_name!r}). Pass run_name to the Trainer, or write the name into the path."
        )
    try:
        filled = format_checkpoint_name(text, state, run_name=state.run_name or "", rank=state.rank)
    except ValueError:
        unknown = sorted(_fields(text) - set(FILENAME_FIELDS))
        problem = (
            "has fields that cannot be filled: " + ", ".join(f"{{{name}}}" for name in unknown)
            if unknown
            else "is not a valid pattern (an unmatched brace)"
        )
        raise ValueError(
            f"{argument}={text!r} {problem}. Use fields from "
            f"{list(FILENAME_FIELDS)} (as in save_folder), or double the braces ('{{{{' and '}}}}') for literal ones."
        ) from None
    return Path(filled).expanduser()


def fill_log_path(pattern: str | os.PathLike[str], state: State, argument: str) -> Path:
    """A destination's file at ``Event.INIT``: ``pattern`` with its fields filled in (:func:`format_log_path`), checked
    writable again when it had fields (:func:`check_writable`); a path without fields as it is.

    Example:
        >>> import tempfile, torch
        >>> from composer.core.state import State
        >>> state = State(model=torch.nn.Linear(1, 1), max_duration="1ep", run_name="demo")
        >>> fill_log_path(Path(tempfile.mkdtemp()) / "metrics-{run_name}.csv", state, "filename").name
        'metrics-demo.csv'
    """
    if not has_placeholders(pattern):
        return Path(pattern).expanduser()
    return check_writable(format_log_path(pattern, state, argument), argument, is_dir=False)


def _fields(text: str) -> set[str]:
    try:
        return {field.split(".")[0].split("[")[0] for _, field, _, _ in string.Formatter().parse(text) if field}
    except ValueError:
        return set()


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
