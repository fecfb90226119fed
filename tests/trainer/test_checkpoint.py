"""Saving, loading and resuming through the Trainer; exactness is checked bitwise, on CPU, in deterministic mode."""

import functools
import pickle
import re
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from composer import Callback, Trainer
from composer.algorithms import LabelSmoothing, MixUp, SelectiveBackprop
from composer.callbacks.checkpoint_saver import CheckpointSaver
from composer.core import State
from composer.loggers import InMemoryLogger
from composer.models import ComposerClassifier
from composer.optim.scheduler_functions import cosine_annealing_scheduler
from composer.utils.checkpoint import CheckpointError, find_checkpoints, read_checkpoint
from tests.common import SimpleModel, make_dataloader

NUM_SAMPLES, BATCH_SIZE = 22, 4  # 6 batches an epoch, the last one short


class NoisyDataset(Dataset):
    """Fixed points plus fresh uniform noise at every access: a random transform, drawn from torch's global RNG (or
    the worker's)."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(NUM_SAMPLES, 6, generator=g)
        self.y = torch.randint(0, 3, (NUM_SAMPLES,), generator=g)

    def __len__(self):
        return NUM_SAMPLES

    def __getitem__(self, i):
        return self.x[i] + 0.1 * torch.rand(6), self.y[i]


class Crash(Exception):
    pass


class CrashAt(Callback):
    """Simulates the process dying in the middle of batch ``batch`` (after its backward, before its update)."""

    def __init__(self, batch):
        self.batch = batch

    def after_backward(self, state, logger):
        if state.timer.batch.value + 1 == self.batch:
            raise Crash


def exact_trainer(folder, num_workers=0, crash_at=None, **kwargs):
    """Every source of randomness at once: shuffling without a generator, a random transform (in the main process or
    in workers), Dropout, MixUp, LabelSmoothing and SelectiveBackprop, a composer scheduler."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
    model = ComposerClassifier(net, num_classes=3)
    kwargs.setdefault("max_duration", "3ep")
    return Trainer(
        model=model,
        train_dataloader=DataLoader(NoisyDataset(), batch_size=BATCH_SIZE, shuffle=True, num_workers=num_workers),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        schedulers=functools.partial(cosine_annealing_scheduler),
        algorithms=[
            MixUp(alpha=0.2),
            LabelSmoothing(alpha=0.1),
            SelectiveBackprop(start=0.3, end=0.9, keep=0.5, scale_factor=1.0, interrupt=2),
        ],
        callbacks=[CrashAt(crash_at)] if crash_at else [],
        seed=7,
        deterministic_mode=True,
        progress_bar=False,
        save_folder=str(folder),
        save_interval="3ba",
        run_name="exact",
        **kwargs,
    )


def weights(trainer):
    return [p.detach().clone() for p in trainer.state.model.parameters()]


def assert_bitwise_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), (x - y).abs().max()


@functools.cache
def uninterrupted(num_workers):
    import tempfile

    trainer = exact_trainer(tempfile.mkdtemp(), num_workers)
    trainer.fit()
    trainer.close()
    return weights(trainer)


def crash_then_resume(folder, num_workers, crash_at):
    first = exact_trainer(folder, num_workers, crash_at=crash_at, autoresume=True)
    with pytest.raises(Crash):
        first.fit()
    second = exact_trainer(folder, num_workers, autoresume=True)  # the same command again
    second.fit()
    second.close()
    return first, second


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


def test_load_path_resumes_mid_epoch_like_autoresume(tmp_path):
    first = exact_trainer(tmp_path / "a", crash_at=11)
    with pytest.raises(Crash):
        first.fit()
    resumed = exact_trainer(tmp_path / "b", load_path=tmp_path / "a" / "ep1-ba9-rank0.pt")
    assert int(resumed.state.timer.batch_in_epoch) == 3
    resumed.fit()
    assert_bitwise_equal(weights(resumed), uninterrupted(0))


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


# ---- saving -------------------------------------------------------------------------------------------------------


def make_trainer(model=None, **kwargs):
    torch.manual_seed(0)
    model = model or SimpleModel()
    kwargs.setdefault("train_dataloader", make_dataloader(num_samples=16, batch_size=4))
    kwargs.setdefault("max_duration", "1ep")
    kwargs.setdefault("optimizers", torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    return Trainer(model=model, progress_bar=False, seed=0, **kwargs)


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


class Killed(BaseException):
    """The process dying (a BaseException that nothing handles stands in for SIGKILL)."""


@pytest.mark.parametrize("keep", [1, 2])
def test_save_num_checkpoints_to_keep_converges_after_a_kill_between_rename_and_pruning(tmp_path, monkeypatch, keep):
    import composer.utils.checkpoint.folders as saver_module  # where the saver's folder moves the link

    link_latest = saver_module.link_latest

    def dies_after_the_rename_of_batch_3(link, target):
        if "-ba3-" in Path(target).name:
            raise Killed  # the checkpoint of batch 3 is in place; 'latest' and the pruning never happen
        link_latest(link, target)

    def run():
        return make_trainer(
            save_folder=str(tmp_path),
            run_name="r",
            save_interval="1ba",
            save_num_checkpoints_to_keep=keep,
            autoresume=True,
            max_duration="2ep",
        )

    monkeypatch.setattr(saver_module, "link_latest", dies_after_the_rename_of_batch_3)
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


def test_no_saver_without_a_save_folder():
    trainer = make_trainer()
    assert not any(isinstance(c, CheckpointSaver) for c in trainer.state.callbacks)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"autoresume": True}, "autoresume=True needs save_folder"),
        ({"autoresume": True, "save_folder": "x", "save_weights_only": True}, "weights-only"),
        ({"autoresume": True, "save_folder": "ckpt/{run_name}"}, "needs a run_name"),
        ({"load_ignore_keys": "module.2.*"}, "list of glob patterns"),
    ],
)
def test_checkpoint_arguments_are_checked(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make_trainer(**kwargs)


# ---- loading ------------------------------------------------------------------------------------------------------


@pytest.fixture
def pretrained(tmp_path):
    trainer = make_trainer(max_duration="2ep")
    trainer.fit()
    return trainer, trainer.save_checkpoint(tmp_path / "pretrained.pt")


def test_weights_only_loading_ignores_the_optimizer_and_timer(pretrained):
    source, path = pretrained
    model = SimpleModel()
    trainer = make_trainer(
        model=model, optimizers=torch.optim.Adam(model.parameters()), load_path=path, load_weights_only=True
    )
    assert_bitwise_equal(weights(trainer), weights(source))
    assert int(trainer.state.timer.batch) == 0 and not trainer.state.optimizers[0].state
    trainer.fit()
    assert int(trainer.state.timer.epoch) == 1


def test_full_loading_restores_the_optimizer_and_timer(pretrained):
    source, path = pretrained
    trainer = make_trainer(load_path=path, max_duration="2ep")
    assert int(trainer.state.timer.epoch) == 2 and str(trainer.state.max_duration) == "2ep"
    saved, loaded = source.state.optimizers[0].state_dict()["state"], trainer.state.optimizers[0].state_dict()["state"]
    assert saved.keys() == loaded.keys()
    for key, value in saved.items():
        assert torch.equal(loaded[key]["momentum_buffer"], value["momentum_buffer"])


def test_a_new_classification_head_loads_with_ignored_keys(pretrained):
    source, path = pretrained
    with pytest.raises(ValueError, match=r"shape mismatch.*load_ignore_keys"):
        make_trainer(model=SimpleModel(num_classes=5), load_path=path, load_weights_only=True)
    finetune = make_trainer(
        model=SimpleModel(num_classes=5), load_path=path, load_weights_only=True, load_ignore_keys=["module.2.*"]
    )
    assert torch.equal(finetune.state.model.module[0].weight, source.state.model.module[0].weight)
    finetune.fit()


def test_strict_and_non_strict_loading(pretrained):
    _, path = pretrained
    model = SimpleModel()
    model.extra = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"missing keys \['extra.bias', 'extra.weight'\]"):
        make_trainer(model=model, load_path=path, load_weights_only=True)
    trainer = make_trainer(model=model, load_path=path, load_weights_only=True, load_strict_model_weights=False)
    trainer.fit()


class RunsCode:
    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_a_crafted_load_path_is_refused(tmp_path):
    evil = RunsCode()
    evil.marker = str(tmp_path / "pwned")
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"state": evil}, protocol=2))
    with pytest.raises(CheckpointError, match=r"Refusing to load .*evil\.pt"):
        make_trainer(load_path=tmp_path / "evil.pt")
    assert not (tmp_path / "pwned").exists()


def test_resuming_with_persistent_workers_warns_that_it_cannot_be_exact(tmp_path):
    def loader():
        data = make_dataloader(num_samples=16, batch_size=4).dataset
        return DataLoader(data, batch_size=4, shuffle=True, num_workers=1, persistent_workers=True)

    path = make_trainer(train_dataloader=loader()).save_checkpoint(tmp_path / "ckpt.pt")
    with pytest.warns(UserWarning, match="persistent_workers"):
        make_trainer(train_dataloader=loader(), load_path=path)
