"""``composer launch -n N script.py`` and ``composer -n N script.py``: real torchrun jobs of 2 CPU processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from composer.cli.__main__ import main
from composer.cli.launch import route, torchrun_args

# Each rank writes what torchrun told it; rank 1 exits with the status given as the second argument, and when that
# is not 0, rank 0 hangs until torchrun stops it.
WORKER = textwrap.dedent(
    """
    import os, pathlib, sys, time
    rank = os.environ["RANK"]
    fields = [rank, os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"], os.environ["OMP_NUM_THREADS"], *sys.argv[3:]]
    pathlib.Path(sys.argv[1], f"rank{rank}.txt").write_text(" ".join(fields))
    if rank == "1":
        sys.exit(int(sys.argv[2]))
    if sys.argv[2] != "0":
        time.sleep(60)
    """
)
pytestmark = pytest.mark.filterwarnings("ignore:Unable to enable fault handler")  # pytest captures stderr


@pytest.fixture
def worker(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return script


def _written(folder):
    return {path.name: path.read_text() for path in sorted(folder.glob("rank*.txt"))}


@pytest.mark.parametrize("form", [["launch", "-n", "2"], ["-n", "2"], ["--nproc=2"]], ids=["launch", "-n", "--nproc="])
def test_runs_two_processes_with_their_ranks(worker, tmp_path, form):
    assert main([*form, str(worker), str(tmp_path), "0", "--lr", "0.1"]) == 0
    # Every rank got its RANK, the world size, its local rank, one thread, and the script's own arguments untouched.
    assert _written(tmp_path) == {"rank0.txt": "0 2 0 1 --lr 0.1", "rank1.txt": "1 2 1 1 --lr 0.1"}


def test_a_failing_worker_ends_the_job_with_its_exit_status(worker, tmp_path, capsys):
    before = signal.getsignal(signal.SIGTERM)
    start = time.monotonic()
    assert main(["-n", "2", str(worker), str(tmp_path), "3"]) == 3
    assert time.monotonic() - start < 30  # the hanging rank 0 was stopped, not waited for
    assert "rank 1 failed with exit status 3" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # torchrun's handlers do not outlive the job


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["launch", "-n", "0", "x.py"], "argument -n/--nproc: expects at least 1 process, received 0"),
        (["-n", "two", "x.py"], "argument -n/--nproc: expects a whole number of processes, received 'two'"),
        (["launch", "-n", "2"], "SCRIPT: missing; give the Python file to run on each rank"),
        (["-n", "2", "no/such/script.py"], "script: 'no/such/script.py' not found"),
        (["launch", "-n", "2", "--nnodes", "2", "WORKER"], "--nnodes: 2 nodes need --node-rank and --master-addr"),
        (["launch", "-n", "1", "--nnodes", "0", "WORKER"], "argument --nnodes: expects N or MIN:MAX"),
        (
            ["launch", "-n", "1", "--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "WORKER"],
            "--node-rank: received 2 but --nnodes 2 allows 0 to 1.",
        ),
    ],
)
def test_bad_input_exits_with_status_2_and_says_why(worker, tmp_path, capsys, argv, message):
    argv = [str(worker) if arg == "WORKER" else arg for arg in argv]
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err
    assert "composer launch: error: " in err and message in err
    assert not _written(tmp_path)


def test_torchrun_arguments_for_several_nodes():
    static = torchrun_args(
        8, "train.py", ["--lr", "1"], nnodes="2", node_rank=1, master_addr="node0", master_port=29400
    )
    assert static == [
        *("--nproc-per-node", "8", "--nnodes", "2", "--max-restarts", "0", "--node-rank", "1"),
        *("--master-addr", "node0", "--master-port", "29400", "train.py", "--lr", "1"),
    ]
    dynamic = torchrun_args(4, "pkg.train", nnodes="1:4", rdzv_backend="c10d", rdzv_endpoint="h:29400", module=True)
    assert dynamic[-6:] == ["--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400", "--module", "pkg.train"]
    # The launcher's list parses as torchrun's own command line.
    from torch.distributed.run import parse_args

    parsed = parse_args(static)
    assert (parsed.nproc_per_node, parsed.nnodes, parsed.node_rank, parsed.master_addr) == ("8", "2", 1, "node0")
    assert (parsed.training_script, parsed.training_script_args) == ("train.py", ["--lr", "1"])


def test_torchrun_gets_a_shutdown_timeout_longer_than_the_trainers_grace_period(worker, monkeypatch):
    import inspect

    from torch.distributed.run import parse_args

    from composer import Trainer
    from composer.cli import launch

    passed: list[list[str]] = []
    monkeypatch.setattr(launch, "launch", lambda argv: passed.append(list(argv)) or 0)
    assert main(["launch", "-n", "2", str(worker)]) == 0
    assert main(["launch", "-n", "2", "--shutdown-timeout", "45", str(worker)]) == 0
    timeouts = [parse_args(argv).shutdown_timeout for argv in passed]  # as torchrun reads its command line
    assert (
        timeouts == [30, 45] and timeouts[0] > inspect.signature(Trainer).parameters["preemption_grace_period"].default
    )


def test_only_the_short_form_is_routed_to_launch():
    assert route(["-n", "4", "a.py"])[0] == "launch"
    assert route(["--nproc", "4", "a.py"])[0] == "launch"
    for argv in (["train", "-f", "r.yaml"], ["list"], [], ["--help"]):
        assert route(argv) == argv


def test_the_shell_sees_the_failed_workers_status(worker, tmp_path):
    command = [sys.executable, "-m", "composer.cli", "-n", "2", str(worker), str(tmp_path), "5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 5, done.stderr[-2000:]
    assert set(_written(tmp_path)) == {"rank0.txt", "rank1.txt"}
