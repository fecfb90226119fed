"""load_path (composer/trainer/checkpointing.py): a file or a folder, all of the state or the weights only, strict or
with ignored keys; refused when crafted, and warned about when it cannot resume exactly."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.utils.checkpoint import CheckpointError
from tests.common import SimpleModel, make_dataloader
from tests.trainer.checkpointing.runs import (
    Crash,
    assert_bitwise_equal,
    exact_trainer,
    make_trainer,
    uninterrupted,
    weights,
)


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


def test_load_path_resumes_mid_epoch_like_autoresume(tmp_path):
    first = exact_trainer(tmp_path / "a", crash_at=11)
    with pytest.raises(Crash):
        first.fit()
    resumed = exact_trainer(tmp_path / "b", load_path=tmp_path / "a" / "ep1-ba9-rank0.pt")
    assert int(resumed.state.timer.batch_in_epoch) == 3
    resumed.fit()
    assert_bitwise_equal(weights(resumed), uninterrupted(0))


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


# ---- a folder as load_path (issue 17): its newest valid checkpoint, by autoresume's rule ---------------------------


def three_epoch_trainer(**kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    kwargs.setdefault("max_duration", "3ep")
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        progress_bar=False,
        seed=0,
        **kwargs,
    )


@pytest.fixture
def saved(tmp_path):
    """A folder with the checkpoints of epochs 1 and 2 (4 batches an epoch), and the weights after epoch 2."""
    trainer = three_epoch_trainer(max_duration="2ep", save_folder=str(tmp_path))
    trainer.fit()
    weights = {k: v.clone() for k, v in trainer.state.model.state_dict().items()}
    trainer.close()
    return tmp_path, weights


def test_a_folder_loads_its_newest_checkpoint(saved):
    folder, weights = saved
    assert sorted(p.name for p in folder.glob("*.pt")) == ["ep1-ba4-rank0.pt", "ep2-ba8-rank0.pt", "latest-rank0.pt"]
    trainer = three_epoch_trainer(load_path=folder)
    assert trainer.checkpointing.loaded_path == folder / "ep2-ba8-rank0.pt"
    assert int(trainer.state.timer.batch) == 8
    for key, value in trainer.state.model.state_dict().items():
        torch.testing.assert_close(value, weights[key])


def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(saved):
    folder, _ = saved
    newest = folder / "ep2-ba8-rank0.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="ep2-ba8-rank0.pt"):
        trainer = three_epoch_trainer(load_path=folder)
    assert trainer.checkpointing.loaded_path == folder / "ep1-ba4-rank0.pt"
    assert int(trainer.state.timer.batch) == 4


def test_a_folder_without_a_checkpoint_is_named_and_listed(tmp_path):
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    (tmp_path / "runs").mkdir()
    with pytest.raises(FileNotFoundError) as error:
        three_epoch_trainer(load_path=tmp_path)
    message = str(error.value)
    assert f"load_path={str(tmp_path)!r} is a folder" in message
    assert "notes.txt, runs/" in message
    assert "No checkpoint at" not in message
