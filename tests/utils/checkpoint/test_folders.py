"""composer.utils.checkpoint.folders: one interface (newest_first, open, commit, prune) wherever the folder lives."""

import pytest
import torch

from composer.utils.checkpoint import LocalFolder, RemoteCheckpointFolder, RemoteFolder
from composer.utils.object_store import ObjectStoreURL
from tests.common import SimpleModel
from tests.utils.checkpoint.store_runs import options, remote_trainer

PATTERN = "ep{epoch}-ba{batch}.pt"


def make_folder(where, tmp_path, request):
    if where == "local":
        return LocalFolder(tmp_path / "ckpt", PATTERN, keep=2, latest_filename="latest.pt")
    s3_env = request.getfixturevalue("s3_env")
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "local")}
    store = RemoteCheckpointFolder.open(
        ObjectStoreURL(s3_env.create_bucket(), "run"), options, "save_folder", write=True
    )
    return RemoteFolder(store, store.local_folder, PATTERN, keep=2)


@pytest.mark.parametrize("where", ["local", "store"])
def test_commits_keep_the_newest_and_a_walk_opens_them_newest_first_wherever_the_folder_is(where, tmp_path, request):
    folder = make_folder(where, tmp_path, request)
    folder.local_folder.mkdir(parents=True, exist_ok=True)
    for batch in (1, 3, 2):  # 2 after 3: the one just committed is kept, and the newest behind it
        path = folder.local_folder / f"ep0-ba{batch}.pt"
        path.write_bytes(bytes([batch]) * 100)
        folder.commit(path)
    folder.finish()
    # Kept: the one just committed (2) and the newest behind it (1); 3, ahead of it, was left by a run gone back.
    assert list(folder.newest_first()) == ["ep0-ba2.pt", "ep0-ba1.pt"]
    assert folder.open("ep0-ba2.pt").read_bytes() == bytes([2]) * 100
    if where == "local":
        assert (folder.local_folder / "latest.pt").resolve().name == "ep0-ba2.pt"
    folder.close()


def test_save_to_s3_then_load_path_s3_gives_the_same_weights(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    trainer = remote_trainer(
        f"s3://{bucket}/ckpt/{{run_name}}",
        run_name="round-trip",
        save_interval="2ba",
        save_num_checkpoints_to_keep=2,
        storage_options=options(s3_env, tmp_path / "staging"),
    )
    trainer.fit()  # returns once every upload is complete
    assert s3_env.keys(bucket) == ["ckpt/round-trip/ep1-ba6-rank0.pt", "ckpt/round-trip/ep1-ba8-rank0.pt"]
    # Locally only the newest uploaded checkpoint stays: the store holds the run's checkpoints.
    assert [p.name for p in (tmp_path / "staging").iterdir()] == ["ep1-ba8-rank0.pt"]
    trainer.close()

    loaded = SimpleModel()
    remote_trainer(
        model=loaded,
        load_path=f"s3://{bucket}/ckpt/round-trip/ep1-ba8-rank0.pt",
        storage_options=options(s3_env, tmp_path / "elsewhere"),
    ).close()
    for a, b in zip(trainer.state.model.parameters(), loaded.parameters()):
        assert torch.equal(a, b)
    # A folder as load_path: its newest checkpoint.
    from_folder = SimpleModel()
    folder_trainer = remote_trainer(
        model=from_folder,
        load_path=f"s3://{bucket}/ckpt/round-trip",
        storage_options=options(s3_env, tmp_path / "third"),
    )
    assert folder_trainer.checkpointing.loaded_path.name == "ep1-ba8-rank0.pt"
    assert int(folder_trainer.state.timer.batch) == 8
    folder_trainer.close()
