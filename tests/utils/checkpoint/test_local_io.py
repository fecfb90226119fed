"""composer.utils.checkpoint.local_io: atomic writes under faults, and the 'latest' link."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from composer.utils.checkpoint import (
    find_checkpoints,
    link_latest,
    local_io,
    read_checkpoint,
    save_checkpoint,
)
from tests.utils.checkpoint.states import trained_state

REPO = Path(__file__).resolve().parents[3]


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
