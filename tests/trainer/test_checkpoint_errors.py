"""Clear errors where saving or resuming meets a folder it cannot use: a full disk, a folder under a checkpoint's
name, another model's checkpoint; each through the Trainer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from composer import Trainer
from composer.utils.checkpoint import CheckpointError
from tests.common import SimpleModel, make_dataloader
from tests.distributed.launch import REPO, _env

DISK_WORKER = REPO / "tests" / "trainer" / "disk_full_worker.py"
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


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
    """What saving onto full disks raised, and what the disks held after (tests/trainer/disk_full_worker.py).

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


# ---- what autoresume finds in save_folder ----------------------------------------------------------------------------


def _trainer(folder: Path, features: int = 8, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel(num_features=features)
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_features=features),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        save_folder=str(folder),
        save_interval="1ba",
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def test_a_folder_named_like_the_newest_checkpoint_is_refused_before_training(tmp_path):
    _trainer(tmp_path, max_duration="1ba").fit()
    stray = tmp_path / "ep0-ba2-rank0.pt"  # where batch 2's checkpoint goes: a folder of the user's
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    # Refused at the start (autoresume would pass over it to batch 1, and saving batch 2 would then fail).
    with pytest.raises(ValueError, match=re.escape("holds a folder named like a checkpoint, ep0-ba2-rank0.pt/")) as e:
        _trainer(tmp_path, max_duration="3ba", autoresume=True)
    assert f"To fix: move or rename {stray}, or choose another save_folder (or run_name)" in str(e.value)
    assert (stray / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "latest-rank0.pt"]


def test_autoresume_over_another_models_checkpoint_names_it(tmp_path):
    _trainer(tmp_path, max_duration="2ba").fit()  # 8 features; then a model of 16 resumes in the same folder
    newest = tmp_path / "ep0-ba2-rank0.pt"
    with pytest.raises(CheckpointError) as e:
        _trainer(tmp_path, features=16, max_duration="4ba", autoresume=True)
    message = str(e.value)
    assert f"autoresume: {newest} does not fit this run's model, so it belongs to another model" in message, message
    assert "shape mismatch for ['module.0.weight: saved (16, 8), model (16, 16)']" in message
    assert (
        "To fix: give this run another save_folder (or another run_name, where save_folder or save_filename holds "
        f"{{run_name}}), or remove that model's checkpoints from {tmp_path}."
    ) in message
    assert "load_ignore_keys" not in message  # for fine-tuning from load_path, not for resuming
