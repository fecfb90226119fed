"""The benchmarks' multi-process CPU jobs: the ``torchrun`` command for a script, on a free loopback port.

Imported by the benchmark scripts next to it (``python benchmarks/<name>.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from composer.cli.launch import torchrun_args

__all__ = ["free_port", "torchrun_command", "worker_env"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it when binding to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(script: str | Path, *script_args: str, nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run`` running ``script`` with ``script_args`` on ``nproc`` local processes."""
    args = torchrun_args(nproc, str(script), script_args, master_addr="127.0.0.1", master_port=free_port())
    return [sys.executable, "-m", "torch.distributed.run", *args]


def worker_env() -> dict[str, str]:
    """This process's environment for the workers: the repository importable, one OpenMP thread per rank."""
    repo = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": repo + (os.pathsep + path if path else "")}
