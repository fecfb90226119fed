import io

import pytest
import torch

from composer import Trainer
from composer.callbacks.checkpoint_saver import CheckpointSaver, CheckpointSaverHparams
from composer.utils.checkpoint import read_checkpoint
from tests.common import SimpleModel, make_dataloader
from tests.trainer.checkpointing.runs import make_trainer
from tests.utils.checkpoint.store_runs import options, remote_trainer


def train(saver, max_duration="2ep", num_samples=16, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=num_samples, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[saver],
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    trainer.close()
    return trainer


def names(saver):
    return [p.name for p in saver.saved_checkpoints]


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ("1ep", ["ep1-ba4.pt", "ep2-ba8.pt"]),
        (1, ["ep1-ba4.pt", "ep2-ba8.pt"]),
        ("3ba", ["ep0-ba3.pt", "ep1-ba6.pt", "ep2-ba8.pt"]),  # and the final state
        ("4ba", ["ep0-ba4.pt", "ep1-ba8.pt"]),  # the epoch's last batch, before the epoch ends; the end: saved
        ("20sp", ["ep1-ba5.pt", "ep2-ba8.pt"]),  # 4 samples a batch: 20 samples are crossed at batch 5
        ("0.5dur", ["ep0-ba4.pt", "ep1-ba8.pt"]),
    ],
)
def test_save_interval(tmp_path, interval, expected):
    saver = CheckpointSaver(folder=str(tmp_path), filename="ep{epoch}-ba{batch}.pt", save_interval=interval)
    train(saver)
    assert names(saver) == expected
    assert sorted(p.name for p in tmp_path.glob("ep*.pt")) == sorted(expected)


@pytest.mark.parametrize("interval", ["4ba", "0.5dur", "16sp", lambda state: state.timer.batch.value % 4 == 0])
def test_the_final_state_is_saved_once_when_the_last_batch_was_just_saved(tmp_path, interval):
    # The run ends on a batch that the interval saves; the epoch then ends (the epoch count changes) and the final
    # state would be saved a second time, under another name, for the very same weights.
    saver = CheckpointSaver(folder=str(tmp_path), filename="ep{epoch}-ba{batch}.pt", save_interval=interval)
    trainer = train(saver)
    assert int(trainer.state.timer.batch) == 8 and int(trainer.state.timer.epoch) == 2
    assert sorted(p.name for p in tmp_path.glob("ep*.pt")) == ["ep0-ba4.pt", "ep1-ba8.pt"]
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep1-ba8.pt"


def test_the_same_time_guard_survives_a_resume_and_reads_old_checkpoints(tmp_path):
    saver = CheckpointSaver(folder=str(tmp_path), save_interval="1ba")
    saver.load_state_dict({"saved_checkpoints": [], "last_saved": [1, 8], "bucket": None})  # (epoch, batch): old
    assert saver.state_dict()["last_saved"] == 8
    saver.load_state_dict({"saved_checkpoints": [], "last_saved": 8, "bucket": None})
    assert saver.state_dict()["last_saved"] == 8


def test_a_function_of_the_state_decides_when_to_save(tmp_path):
    saver = CheckpointSaver(
        folder=str(tmp_path), filename="ba{batch}.pt", save_interval=lambda state: state.timer.batch.value in (2, 5)
    )
    train(saver)
    assert names(saver) == ["ba2.pt", "ba5.pt", "ba8.pt"]


def test_a_run_that_stops_early_saves_where_it_stopped(tmp_path):
    class StopAt3(CheckpointSaver):
        def batch_end(self, state, logger):
            if state.timer.batch.value == 3:
                state.stop_training("test")

    saver = StopAt3(folder=str(tmp_path), filename="ep{epoch}-ba{batch}.pt", save_interval="10ep")
    train(saver)
    assert names(saver) == ["ep0-ba3.pt"]  # at its last batch, in the epoch it leaves open


def test_keeps_the_newest_and_points_latest_at_the_newest(tmp_path):
    saver = CheckpointSaver(
        folder=str(tmp_path / "{run_name}"),
        filename="ep{epoch}-ba{batch}-rank{rank}.pt",
        save_interval="1ba",
        num_checkpoints_to_keep=2,
        run_name="demo",
    )
    train(saver)
    folder = tmp_path / "demo"
    assert sorted(p.name for p in folder.iterdir()) == ["ep1-ba7-rank0.pt", "ep1-ba8-rank0.pt", "latest-rank0.pt"]
    assert (folder / "latest-rank0.pt").resolve() == (folder / "ep1-ba8-rank0.pt").resolve()
    # Each checkpoint records itself among the saved ones, so a run resumed from it prunes it in turn.
    saved_state = read_checkpoint(folder / "ep1-ba8-rank0.pt")["state"]["callbacks"][-1]["state"]
    assert saved_state["saved_checkpoints"] == ["ep1-ba7-rank0.pt", "ep1-ba8-rank0.pt"]


class Killed(BaseException):
    """The process dying (SIGKILL cannot be caught; a BaseException that nothing handles stands in for it)."""


def die_after_the_rename_of(batch, monkeypatch):
    """Kills the run right after the checkpoint of ``batch`` is renamed into place: before the 'latest' link moves
    and before the old checkpoints are pruned."""
    import composer.utils.checkpoint.folders as saver_module  # where the saver's folder moves the link

    link_latest = saver_module.link_latest

    def dying_link_latest(link, target):
        if f"-ba{batch}-" in target.name:
            raise Killed
        link_latest(link, target)

    monkeypatch.setattr(saver_module, "link_latest", dying_link_latest)


def test_pruning_converges_after_a_run_was_killed_between_the_rename_and_the_pruning(tmp_path, monkeypatch):
    def saver():
        return CheckpointSaver(folder=str(tmp_path), save_interval="1ba", num_checkpoints_to_keep=2, overwrite=True)

    die_after_the_rename_of(3, monkeypatch)
    with pytest.raises(Killed):
        train(saver())
    # Three checkpoints: the third is in place, the first not yet pruned; 'latest' still names the second.
    assert sorted(p.name for p in tmp_path.glob("ep*")) == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "ep0-ba3-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep0-ba2-rank0.pt"
    monkeypatch.undo()
    # The next run (here a fresh one over the same folder, which knows nothing of the first) prunes what was left at
    # its first save, down to 2 files of this pattern: its own and the newest other.
    second = saver()
    train(second, max_duration="1ba")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep0-ba1-rank0.pt", "ep0-ba3-rank0.pt", "latest-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep0-ba1-rank0.pt"


def test_pruning_touches_only_this_patterns_checkpoints_and_keeps_latest_right(tmp_path):
    user_files = [
        "notes.txt",
        "ep0-ba1-rank0.pt.bak",  # a copy the user made
        "ep0-ba2-rank1.pt",  # another rank's file: not this (rank 0) pattern
        "best-ba3.pt",
        "sub/ep0-ba1-rank0.pt",  # a subfolder is not this pattern's place
        ".hidden-ep0-ba1-rank0.pt",
    ]
    for name in user_files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("the user's")
    for batch in (1, 2, 3, 20, 21):  # left by earlier runs of this pattern; 20 and 21 by one that got further
        (tmp_path / f"ep0-ba{batch}-rank0.pt").write_text("old")
    (tmp_path / "latest-rank0.pt").symlink_to("ep0-ba21-rank0.pt")
    saver = CheckpointSaver(folder=str(tmp_path), save_interval="3ba", num_checkpoints_to_keep=2, overwrite=True)
    train(saver, max_duration="6ba")
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file() or p.is_symlink())
    assert left == sorted([*user_files, "ep0-ba3-rank0.pt", "ep1-ba6-rank0.pt", "latest-rank0.pt"])
    for name in user_files:
        assert (tmp_path / name).read_text() == "the user's"
    # Both kept checkpoints are this run's (the old ep0-ba3 was written over), and 'latest' names the newest.
    read_checkpoint(tmp_path / "ep0-ba3-rank0.pt")
    assert (tmp_path / "latest-rank0.pt").is_symlink()
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep1-ba6-rank0.pt"


def test_a_checkpoint_just_written_is_never_pruned_for_newer_looking_leftovers(tmp_path):
    for batch in (50, 60):  # a run that got further, then was restarted over the same folder
        (tmp_path / f"ep9-ba{batch}-rank0.pt").write_text("old")
    saver = CheckpointSaver(folder=str(tmp_path), save_interval="1ba", num_checkpoints_to_keep=1, overwrite=True)
    train(saver, max_duration="2ba")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep0-ba2-rank0.pt", "latest-rank0.pt"]


def test_weights_only_and_safetensors_names(tmp_path):
    saver = CheckpointSaver(folder=str(tmp_path), filename="w-ba{batch}.safetensors", weights_only=True)
    train(saver, max_duration="1ep")
    checkpoint = read_checkpoint(tmp_path / "w-ba4.safetensors")
    assert checkpoint["metadata"]["weights_only"] and set(checkpoint["state"]) == {"model"}


def test_refuses_to_mix_runs_in_one_folder_unless_told(tmp_path):
    train(CheckpointSaver(folder=str(tmp_path)), max_duration="1ep")
    with pytest.raises(ValueError, match=r"already holds checkpoints.*autoresume=True.*save_overwrite=True"):
        train(CheckpointSaver(folder=str(tmp_path)), max_duration="1ep")
    again = CheckpointSaver(folder=str(tmp_path), overwrite=True)
    train(again, max_duration="1ep")
    assert names(again) == ["ep1-ba4-rank0.pt"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"save_interval": "0ba"}, "must be positive"),
        ({"save_interval": "soon"}, "is not a time"),
        ({"save_interval": "2dur"}, "more than the whole run"),
        ({"num_checkpoints_to_keep": 0}, "-1 to keep them all"),
        ({"filename": "ep{epoch}-{loss}.pt"}, "loss"),
        ({"folder": "{run_name}/ckpt"}, "run_name is None"),
    ],
)
def test_bad_arguments_say_what_to_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CheckpointSaver(**kwargs)


def test_state_dict_round_trip_uses_paths_relative_to_the_folder(tmp_path):
    saver = CheckpointSaver(folder=str(tmp_path), save_interval="2ba")
    train(saver, max_duration="4ba")
    saved = saver.state_dict()
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    buffer.seek(0)
    fresh = CheckpointSaver(folder=str(tmp_path), save_interval="2ba")
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.state_dict() == saved and fresh.saved_checkpoints == saver.saved_checkpoints


def test_hparams_build_the_saver(tmp_path):
    saver = CheckpointSaverHparams.from_dict({"folder": str(tmp_path), "save_interval": "2ba"}).initialize_object()
    assert isinstance(saver, CheckpointSaver) and saver.latest_filename == "latest-rank{rank}.pt"


# ---- through the Trainer's save_* arguments ----------------------------------------------------------------------


def test_save_folder_run_name_interval_and_latest(tmp_path):
    trainer = make_trainer(
        save_folder=str(tmp_path / "{run_name}" / "checkpoints"),
        run_name="exp1",
        save_interval="2ba",
        max_duration="6ba",
    )
    trainer.fit()
    folder = tmp_path / "exp1" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ep0-ba2-rank0.pt",
        "ep0-ba4-rank0.pt",
        "ep1-ba6-rank0.pt",  # the final state, saved once (not again as ep2-ba6 when the epoch ends)
        "latest-rank0.pt",
    ]
    assert (folder / "latest-rank0.pt").resolve().name == "ep1-ba6-rank0.pt"
    config = read_checkpoint(folder / "latest-rank0.pt")["metadata"]["config"]
    assert config["run_name"] == "exp1" and config["seed"] == 0 and config["max_duration"] == "6ba"
    assert config["model"] == "SimpleModel" and config["save_interval"] == "2ba"


def test_save_num_checkpoints_to_keep_and_weights_only(tmp_path):
    trainer = make_trainer(
        save_folder=str(tmp_path), save_interval="1ba", save_num_checkpoints_to_keep=1, save_weights_only=True
    )
    trainer.fit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep0-ba4-rank0.pt", "latest-rank0.pt"]
    assert set(read_checkpoint(tmp_path / "ep0-ba4-rank0.pt")["state"]) == {"model"}


@pytest.mark.parametrize("keep", [1, 2])
def test_save_num_checkpoints_to_keep_converges_after_a_kill_between_rename_and_pruning(tmp_path, monkeypatch, keep):
    def run():
        return make_trainer(
            save_folder=str(tmp_path),
            run_name="r",
            save_interval="1ba",
            save_num_checkpoints_to_keep=keep,
            autoresume=True,
            max_duration="2ep",
        )

    die_after_the_rename_of(3, monkeypatch)  # batch 3's checkpoint is in place; 'latest' and the pruning never happen
    first = run()
    with pytest.raises(Killed):
        first.fit()
    assert len(list(tmp_path.glob("ep*.pt"))) == keep + 1  # one too many, for now
    monkeypatch.undo()
    second = run()  # the same command again: resumes from batch 3 and finishes
    assert second.checkpointing.loaded_path.name == "ep0-ba3-rank0.pt"
    second.fit()
    second.close()
    expected = ["ep1-ba7-rank0.pt", "ep1-ba8-rank0.pt"][-keep:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [*expected, "latest-rank0.pt"]
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep1-ba8-rank0.pt"


def test_a_remote_folder_holding_checkpoints_is_refused_without_autoresume(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    first = remote_trainer(f"s3://{bucket}/ckpt", max_duration="1ep", storage_options=options(s3_env, tmp_path / "a"))
    first.fit()
    first.close()
    with pytest.raises(ValueError, match=rf"s3://{bucket}/ckpt already holds checkpoints.*autoresume=True"):
        remote_trainer(f"s3://{bucket}/ckpt", storage_options=options(s3_env, tmp_path / "b"))
