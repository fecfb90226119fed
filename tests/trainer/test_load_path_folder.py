"""load_path given a folder (issue 17): the newest valid checkpoint in it, by autoresume's rule, or an error that
says it is a folder and lists what is inside."""

import pytest
import torch

from composer import Trainer
from tests.common import SimpleModel, make_dataloader


def make_trainer(**kwargs):
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
    trainer = make_trainer(max_duration="2ep", save_folder=str(tmp_path))
    trainer.fit()
    weights = {k: v.clone() for k, v in trainer.state.model.state_dict().items()}
    trainer.close()
    return tmp_path, weights


def test_a_folder_loads_its_newest_checkpoint(saved):
    folder, weights = saved
    assert sorted(p.name for p in folder.glob("*.pt")) == ["ep1-ba4-rank0.pt", "ep2-ba8-rank0.pt", "latest-rank0.pt"]
    trainer = make_trainer(load_path=folder)
    assert trainer.checkpointing.loaded_path == folder / "ep2-ba8-rank0.pt"
    assert int(trainer.state.timer.batch) == 8
    for key, value in trainer.state.model.state_dict().items():
        torch.testing.assert_close(value, weights[key])


def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(saved):
    folder, _ = saved
    newest = folder / "ep2-ba8-rank0.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="ep2-ba8-rank0.pt"):
        trainer = make_trainer(load_path=folder)
    assert trainer.checkpointing.loaded_path == folder / "ep1-ba4-rank0.pt"
    assert int(trainer.state.timer.batch) == 4


def test_a_folder_without_a_checkpoint_is_named_and_listed(tmp_path):
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    (tmp_path / "runs").mkdir()
    with pytest.raises(FileNotFoundError) as error:
        make_trainer(load_path=tmp_path)
    message = str(error.value)
    assert f"load_path={str(tmp_path)!r} is a folder" in message
    assert "notes.txt, runs/" in message
    assert "No checkpoint at" not in message
