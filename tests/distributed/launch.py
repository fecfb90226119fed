"""Launching the 2-process CPU jobs of the distributed tests: torchrun, or plain processes with the variables it sets.

:func:`two_rank_train_job` runs tests/trainer/dist_worker.py's ``train`` scenario once per test session (about
10-20 s, most of it each rank importing torch and composer); tests/distributed/test_distributed.py and
tests/utils/test_dist.py both read its results.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "trainer" / "dist_worker.py"
WORLD_SIZE = 2
JOB_TIMEOUT = 180  # seconds: a job that takes longer has hung


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it when binding to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": "1"}


def torchrun(
    scenario: str,
    folder: Path,
    worker: Path | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs ``worker`` (default: ``WORKER``, read at the call, tests/trainer/dist_worker.py) under ``python -m torch.distributed.run
    --nproc_per_node 2`` with ``scenario folder *args`` (and the variables ``env`` added to the environment) and returns
    when it ends (after ``JOB_TIMEOUT`` seconds the launcher and its workers are killed, and the test fails)."""
    command = _torchrun_command(f"--nproc_per_node={WORLD_SIZE}", f"--master_port={free_port()}")
    return _finish(_start([*command, str(worker or WORKER), scenario, str(folder), *args], env), scenario)


def torchrun_nodes(
    scenario: str,
    folder: Path,
    worker: Path | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> list[subprocess.CompletedProcess[str]]:
    """Runs ``worker`` (default: ``WORKER``) with ``scenario folder *args`` (and the variables ``env`` added to the
    environment) as a job of two nodes of one rank each:
    one ``torchrun`` per node, on loopback (node 0's agent hosts the job's store). Unlike one torchrun for both
    ranks, a rank that dies is seen by its own node's agent only: the other rank runs on until its collective fails,
    as on a real cluster; and each rank is its node's first (local rank 0). Returns each node's result."""
    port = free_port()
    nodes = [
        _torchrun_command("--nnodes=2", "--nproc_per_node=1", f"--node_rank={n}", f"--master_port={port}")
        for n in range(2)
    ]
    processes = [_start([*command, str(worker or WORKER), scenario, str(folder), *args], env) for command in nodes]
    with ThreadPoolExecutor(2) as pool:  # both read at once: neither fills its output pipe while the other runs
        return list(pool.map(lambda process: _finish(process, scenario), processes))


def _torchrun_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *options, "--master_addr=127.0.0.1"]


def _start(command: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(), **(env or {})},
        cwd=REPO,
        start_new_session=True,  # its own process group: the workers can be killed with it
    )


def _finish(process: subprocess.Popen[str], scenario: str) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        # torchrun starts its workers in sessions of their own, so killing its group misses them: SIGTERM lets it
        # stop them itself; whatever is left after that is killed, and the pipes are not waited on for ever.
        process.terminate()
        try:
            stdout, stderr = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            try:
                stdout, stderr = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                stdout, stderr = "", "(the workers kept the output pipes open)"
        pytest.fail(f"The 2-rank job {scenario!r} did not end within {JOB_TIMEOUT} s:\n{stderr[-10000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@dataclass
class RankProcess:
    """One rank started by :func:`start_ranks`: its process, its output file and when it ended."""

    rank: int
    process: subprocess.Popen[bytes]
    output: Path
    ended_at: float | None = None

    @property
    def text(self) -> str:
        return self.output.read_text()


def start_ranks(scenario: str, folder: Path) -> list[RankProcess]:
    """Starts the worker as two plain processes (no launcher agent to stop the others when one fails)."""
    port = free_port()
    ranks = []
    for rank in range(WORLD_SIZE):
        env = {
            **_env(),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD_SIZE),
            "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        output = folder / f"rank{rank}.log"
        with open(output, "wb") as f:
            process = subprocess.Popen(
                [sys.executable, str(WORKER), scenario, str(folder)],
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        ranks.append(RankProcess(rank, process, output))
    return ranks


def wait_for(ranks: list[RankProcess], until: Any, deadline: float = JOB_TIMEOUT) -> None:
    """Polls the processes, noting when each ends, until ``until(ranks)`` holds or ``deadline`` seconds passed."""
    start = time.time()
    while time.time() - start < deadline:
        for r in ranks:
            if r.ended_at is None and r.process.poll() is not None:
                r.ended_at = time.time()
        if until(ranks):
            return
        time.sleep(0.05)


def stop(ranks: list[RankProcess]) -> None:
    """Kills the ranks still running (what torchrun's agent does once one has failed)."""
    for r in ranks:
        if r.process.poll() is None:
            r.process.kill()
        r.process.wait()


_JOBS: dict[str, dict[str, Any]] = {}


def two_rank_train_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What each rank of the ``train`` scenario recorded, ``{'folder': Path, 'stderr': str, 0: {...}, 1: {...}}``;
    the job runs on the first call of the session."""
    if "train" in _JOBS:
        return _JOBS["train"]
    folder = tmp_path_factory.mktemp("two_rank_train_job")
    result = torchrun("train", folder)
    if result.returncode != 0:
        pytest.fail(f"The 2-rank job failed ({result.returncode}):\n{result.stdout[-5000:]}\n{result.stderr[-10000:]}")
    job: dict[str, Any] = {"folder": folder, "stderr": result.stderr}
    for rank in range(WORLD_SIZE):
        job[rank] = torch.load(folder / f"rank{rank}.pt", weights_only=False)
    _JOBS["train"] = job
    return job
