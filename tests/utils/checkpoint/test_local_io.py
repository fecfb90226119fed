"""composer.utils.checkpoint.local_io: atomic writes under faults, and the 'latest' link."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from composer.utils.checkpoint import (
    find_checkpoints,
    link_latest,
    local_io,
    read_checkpoint,
    save_checkpoint,
)
from tests.distributed.launch import _env
from tests.utils.checkpoint.states import trained_state

REPO = Path(__file__).resolve().parents[3]
DISK_WORKER = REPO / "tests" / "utils" / "checkpoint" / "disk_full_worker.py"
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


# ---- atomic writes and fault injection ---------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["after_write", "after_fsync"])
def test_an_interrupted_write_leaves_the_previous_file_and_link_alone(tmp_path, monkeypatch, moment):
    state = trained_state()
    old = save_checkpoint(state, tmp_path / "ep0-ba1.pt")
    link_latest(tmp_path / "latest.pt", old)
    old_bytes = old.read_bytes()

    class Killed(BaseException):
        pass

    seen = []

    def crash(path):
        seen.append(path.name)
        if path.name == "ep0-ba2.pt":
            raise Killed

    monkeypatch.setattr(local_io, moment, crash)  # the seam the writer calls at that moment
    state.timer.on_batch_complete()
    save_checkpoint(state, tmp_path / "ep0-ba1-other.pt")  # not the crashing name: written normally
    with pytest.raises(Killed):
        save_checkpoint(state, tmp_path / "ep0-ba2.pt")
    assert seen == ["ep0-ba1-other.pt", "ep0-ba2.pt"]
    assert not (tmp_path / "ep0-ba2.pt").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # an exception (not a kill) cleans up
    assert old.read_bytes() == old_bytes and (tmp_path / "latest.pt").resolve() == old.resolve()


FAULT_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, torch
    from composer.core import State
    from composer.utils.checkpoint import local_io, save_checkpoint

    def kill(path):
        if path.name == "ep0-ba2.pt":
            os.kill(os.getpid(), signal.SIGKILL)

    setattr(local_io, sys.argv[2], kill)
    state = State(model=torch.nn.Linear(64, 64), max_duration="1ep")
    save_checkpoint(state, sys.argv[1] + "/ep0-ba1.pt")
    state.timer.on_batch_complete()
    save_checkpoint(state, sys.argv[1] + "/ep0-ba2.pt")
    print("not killed")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["after_write", "after_fsync"])
def test_a_writer_killed_between_the_steps_leaves_only_a_temporary_file(tmp_path, moment):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", FAULT_SCRIPT, str(tmp_path), moment],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -9, result.stderr
    assert "not killed" not in result.stdout
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".ep0-ba2.pt.tmp-" + names[0].rsplit("-", 1)[1], "ep0-ba1.pt"]
    # The temporary file holds the complete checkpoint, but nothing treats it as one.
    assert find_checkpoints(tmp_path, "ep{epoch}-ba{batch}.pt") == [tmp_path / "ep0-ba1.pt"]
    read_checkpoint(tmp_path / "ep0-ba1.pt")


def test_the_latest_link_moves_atomically(tmp_path):
    first, second = tmp_path / "a.pt", tmp_path / "b.pt"
    first.write_text("a")
    second.write_text("b")
    link_latest(tmp_path / "latest", first)
    link_latest(tmp_path / "latest", second)
    assert (tmp_path / "latest").read_text() == "b" and os.readlink(tmp_path / "latest") == "b.pt"


# ---- a full disk (DiskFullError) ----------------------------------------------------------------------------------


def _can_mount_tmpfs(folder: Path) -> bool:
    """Whether this machine lets the tests mount a tmpfs in namespaces of their own (Linux, unprivileged user
    namespaces allowed; root in a container also passes)."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    folder.mkdir()
    probe = subprocess.run(
        [*UNSHARE, "mount", "-t", "tmpfs", "-o", "size=4096", "tmpfs", str(folder)], capture_output=True, timeout=30
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory) -> dict:
    """What saving onto full disks raised, and what the disks held after (tests/utils/checkpoint/disk_full_worker.py).

    The disks are real tmpfs mounts where the machine allows them (as on CI: same image, same user). Elsewhere the
    worker emulates them by wrapping the files it opens, and this says so: the test is never skipped."""
    folder = tmp_path_factory.mktemp("disk_full")
    real = _can_mount_tmpfs(folder / "probe_mount")
    command = [sys.executable, str(DISK_WORKER), "tmpfs" if real else "emulated", str(folder)]
    if real:
        command = [*UNSHARE, *command]
    else:
        warnings.warn(
            "This machine does not allow mounting a tmpfs in a user namespace: the disk-full tests run on disks "
            "emulated in Python (writes raise OSError(ENOSPC) once a folder is full).",
            stacklevel=1,
        )
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr[-5000:]
    return {"real": real, **json.loads((folder / "result.json").read_text()), "folder": folder}


def _assert_says_disk_full(message: str, name: str, folder: Path) -> None:
    assert f"Could not write the checkpoint {name} in {folder}: no space left on the device" in message, message
    assert "To fix: free space on that disk, give save_folder a folder on a disk with more room" in message
    assert "keep fewer checkpoints (save_num_checkpoints_to_keep)" in message
    assert "Keeping N checkpoints needs room for N+1: each new one is written before the oldest is deleted" in message
    assert "unexpected pos" not in message


def test_a_full_disk_names_the_checkpoint_the_folder_and_the_fix_and_loses_nothing(disk_full):
    # Room for 2.5 checkpoints, keeping 2: the third is written before the first is deleted, and does not fit.
    run, folder = disk_full["one_file"], disk_full["folder"] / "one_file"
    assert run["error"] == "DiskFullError"
    _assert_says_disk_full(run["message"], "ep0-ba3-rank0.pt", folder)
    # The temporary file is gone; the two checkpoints saved before, and the link to the newest, are intact.
    assert run["names"] == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "latest-rank0.pt"]
    assert run["readable"] == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt"]
    assert run["latest"] == "ep0-ba2-rank0.pt"


def test_a_full_disk_under_a_safetensors_or_sharded_save_says_so_and_leaves_nothing(disk_full):
    for kind in ("safetensors", "sharded"):
        run, folder = disk_full[kind], disk_full["folder"] / kind
        name = "ep0-ba1-rank0.safetensors" if kind == "safetensors" else "ep0-ba1"  # a sharded one is a folder
        assert run["error"] == "DiskFullError", (kind, run["message"])
        _assert_says_disk_full(run["message"], name, folder)
        assert run["names"] == [], (kind, run["names"])  # no temporary file or folder is left
