"""Runs a function in a forked child of a process that has imported what it needs: a fresh process, killable for real."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["in_forked_child"]


def in_forked_child(function: Callable[..., Any], *args: Any, log: Path | None = None) -> int:
    """Runs ``function(*args)`` in a forked child; returns its exit code, or minus the signal that ended it.

    Args:
        function: What the child runs; it exits 0 when this returns, 1 when it raises (the traceback printed).
        args: Its arguments.
        log: A file that receives the child's standard output and error (appended), or None to share the parent's.
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if log is not None:
                descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                os.dup2(descriptor, 1)
                os.dup2(descriptor, 2)
            function(*args)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
