"""Autoresume (composer/trainer/checkpointing.py): which checkpoint of save_folder a relaunched run resumes from, and
that it resumes exactly; each through the Trainer, checked bitwise, on CPU, in deterministic mode."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

from composer import Trainer
from composer.core import State
from composer.loggers import InMemoryLogger
from composer.utils.checkpoint import CheckpointError, find_checkpoints
from tests.common import SimpleModel, make_dataloader
from tests.trainer.checkpointing.runs import (
    Crash,
    assert_bitwise_equal,
    crash_then_resume,
    exact_trainer,
    make_trainer,
    uninterrupted,
    weights,
)

# ---- exact resumption ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "crash_at",  # batches, 1-based; 6 an epoch; a save every 3
    [5, 12, pytest.param(7, marks=pytest.mark.slow), pytest.param(17, marks=pytest.mark.slow)],
)
def test_a_run_resumed_after_a_crash_ends_bitwise_equal(tmp_path, num_workers, crash_at):
    _, resumed = crash_then_resume(tmp_path, num_workers, crash_at)
    # It resumed from the last checkpoint before the crash, behind the crash point, in the middle of an epoch.
    saved_at = (crash_at - 1) // 3 * 3
    assert resumed.checkpointing.loaded_path.name.endswith(f"-ba{saved_at}-rank0.pt")
    assert_bitwise_equal(weights(resumed), uninterrupted(num_workers))
    assert int(resumed.state.timer.batch) == 18 and int(resumed.state.timer.epoch) == 3


def test_without_replaying_the_random_states_the_resumed_run_differs(tmp_path, monkeypatch):
    # The exactness test is not vacuous: the data order and the transforms do depend on the restored states.
    monkeypatch.setattr(State, "restore_rng", lambda self, snapshot: None)
    _, resumed = crash_then_resume(tmp_path, 0, 8)
    assert any(not torch.equal(a, b) for a, b in zip(weights(resumed), uninterrupted(0)))


# ---- which checkpoint: the newest sound one, or none ----------------------------------------------------------------


def test_autoresume_skips_a_corrupt_newest_checkpoint(tmp_path):
    first = exact_trainer(tmp_path, crash_at=8, autoresume=True)
    with pytest.raises(Crash):
        first.fit()
    newest = find_checkpoints(tmp_path, "ep{epoch}-ba{batch}-rank{rank}.pt")[0]
    assert newest.name == "ep0-ba6-rank0.pt"  # batch 6 ends epoch 0
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x01
    newest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"autoresume skips .*ep0-ba6-rank0\.pt.*failed its checksum") as caught:
        second = exact_trainer(tmp_path, autoresume=True)
    assert len([w for w in caught if "autoresume" in str(w.message)]) == 1
    assert second.checkpointing.loaded_path.name == "ep0-ba3-rank0.pt"
    second.fit()
    assert_bitwise_equal(weights(second), uninterrupted(0))


def damaged_run(folder):
    """A run's folder whose every checkpoint is damaged, each in another way; returns {name: what is wrong}."""
    run = make_trainer(save_folder=str(folder), run_name="r", save_interval="1ba", max_duration="4ba")
    run.fit()
    run.close()
    names = sorted(p.name for p in folder.glob("ep*.pt"))
    assert names == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "ep0-ba3-rank0.pt", "ep0-ba4-rank0.pt"]
    (folder / names[0]).write_bytes((folder / names[0]).read_bytes()[:1])
    data = bytearray((folder / names[1]).read_bytes())
    data[len(data) // 2] ^= 0x01
    (folder / names[1]).write_bytes(bytes(data))
    (folder / names[2]).write_text("not a checkpoint\n")
    make_trainer().save_checkpoint(folder / names[3], weights_only=True)  # sound, but weights only
    return {
        names[0]: r"not a checkpoint: truncated or corrupt \(1 bytes\)",
        names[1]: "failed its checksum",
        names[2]: r"not a checkpoint: truncated or corrupt \(17 bytes\)",
        names[3]: "holds only model weights",
    }


def test_autoresume_with_every_checkpoint_damaged_stops_with_one_error_listing_them(tmp_path):
    reasons = damaged_run(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(CheckpointError) as error:
            make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True)
    assert [str(w.message) for w in caught if "autoresume" in str(w.message)] == []
    message = str(error.value)
    assert f"autoresume found 4 checkpoints of this run in {tmp_path}, and none can be resumed" in message
    for name, reason in reasons.items():
        assert re.search(re.escape(name) + ": " + reason, message), (name, message)
    assert "save_overwrite=True" in message and "load_path" in message
    assert not (tmp_path / "ep0-ba5-rank0.pt").exists()  # nothing trained, nothing written


def test_autoresume_over_damaged_checkpoints_starts_afresh_only_when_allowed(tmp_path):
    reasons = damaged_run(tmp_path)
    with pytest.warns(UserWarning) as caught:
        trainer = make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True, save_overwrite=True)
    about_autoresume = [str(w.message) for w in caught if "autoresume" in str(w.message)]
    assert len(about_autoresume) == 1  # one warning, not one for each file
    assert "training from the start" in about_autoresume[0]
    assert all(name in about_autoresume[0] for name in reasons)
    assert trainer.checkpointing.loaded_path is None and int(trainer.state.timer.batch) == 0
    trainer.fit()
    assert int(trainer.state.timer.epoch) == 1


def test_autoresume_with_nothing_saved_starts_fresh_or_from_load_path(tmp_path):
    source = make_trainer(max_duration="1ep")
    source.fit()
    path = source.save_checkpoint(tmp_path / "pretrained.pt", weights_only=True)
    trainer = make_trainer(save_folder=str(tmp_path / "run"), autoresume=True, load_path=path, load_weights_only=True)
    assert trainer.checkpointing.loaded_path == path and int(trainer.state.timer.batch) == 0
    assert_bitwise_equal(weights(trainer), weights(source))


def test_a_longer_max_duration_on_relaunch_extends_the_run(tmp_path):
    first = make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True, scale_schedule_ratio=2.0)
    first.fit()
    assert int(first.state.timer.epoch) == 2
    # The budget comes from the command (the checkpoint holds the progress): a longer one trains on.
    second = make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True, max_duration="3ep")
    assert str(second.state.max_duration) == "3ep" and second.state.scale_schedule_ratio == 1.0
    second.fit()
    assert int(second.state.timer.epoch) == 3


def test_a_logger_added_between_runs_does_not_block_resuming(tmp_path):
    first = make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True, loggers=[InMemoryLogger()])
    first.fit()
    second = make_trainer(save_folder=str(tmp_path), run_name="r", autoresume=True, max_duration="2ep")
    assert int(second.state.timer.epoch) == 1
    second.fit()
    assert int(second.state.timer.epoch) == 2


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
