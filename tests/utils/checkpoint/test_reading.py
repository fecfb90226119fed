"""composer.utils.checkpoint.reading: a checkpoint file read back without running code; damage named."""

import pickle
from pathlib import Path

import pytest
import torch

from composer.core import State
from composer.utils.checkpoint import (
    CheckpointError,
    read_checkpoint,
    save_checkpoint,
)
from tests.utils.checkpoint.states import flip_bit, trained_state

# ---- corruption and crafted files --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [0.02, 0.5, 0.98, -1])
def test_a_flipped_bit_is_caught_and_names_the_file(tmp_path, where):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    size = path.stat().st_size
    flip_bit(path, int(size * where) if where >= 0 else size - 1)
    with pytest.raises(CheckpointError, match=str(path).replace("\\", "\\\\")):
        read_checkpoint(path)


def test_large_tensors_are_checked_too(tmp_path):
    state = State(model=torch.nn.Linear(2048, 2048), max_duration="1ep")  # 16 MiB: hashed in more than one read
    path = save_checkpoint(state, tmp_path / "big.pt")
    assert torch.equal(read_checkpoint(path)["state"]["model"]["weight"], state.model.weight)
    flip_bit(path, path.stat().st_size // 2)
    with pytest.raises(CheckpointError, match="failed its checksum"):
        read_checkpoint(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.999])
def test_a_truncated_file_is_caught_and_names_the_file(tmp_path, keep):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match=r"ckpt\.pt.*(truncated|corrupt)"):
        read_checkpoint(path)


class RunsCode:
    """Unpickling this object touches a marker file (a stand-in for any code an attacker would run)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_a_file_crafted_to_run_code_is_refused_and_runs_nothing(tmp_path, writer):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    payload = {"format_version": 1, "state": {"model": {}}, "x": RunsCode(marker)}
    if writer == "torch":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(CheckpointError, match=r"Refusing to load .*evil\.pt.*could run code"):
        read_checkpoint(path, verify=False)
    assert not marker.exists()
    # The same file does run code when unpickled without the guard: the test's payload is real.
    if writer == "pickle":
        pickle.loads(path.read_bytes())
        assert marker.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"x",  # a checkpoint truncated to its first byte would be b"P" (a zip archive); both are 1 byte
        b"P",
        b"lorem ipsum dolor sit amet\n",  # a plain text file
        b'{"epoch": 3, "note": "not a checkpoint"}\n',
        b"import os\nos.system('echo hi')\n",  # text that looks like code is still only text
    ],
)
def test_a_file_that_is_no_checkpoint_at_all_says_so_and_not_that_it_could_run_code(tmp_path, content):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint(path)
    message = str(caught.value)
    assert f"not a checkpoint: truncated or corrupt ({len(content)} bytes)" in message
    assert "ckpt.pt" in message and "could run code" not in message and "crafted" not in message


def test_a_checkpoint_truncated_to_one_byte_is_reported_as_truncated(tmp_path):
    path = save_checkpoint(trained_state(), tmp_path / "ckpt.pt")
    path.write_bytes(path.read_bytes()[:1])
    with pytest.raises(CheckpointError, match=r"ckpt\.pt is not a checkpoint: truncated or corrupt \(1 bytes\)"):
        read_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"not a checkpoint: truncated or corrupt \(1 bytes\)"):
        read_checkpoint(path, verify=False)


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        read_checkpoint(tmp_path / "nope.pt")
