"""composer.utils.checkpoint.folders: one interface (newest_first, open, commit, prune) wherever the folder lives."""

import pytest

from composer.utils.checkpoint import LocalFolder, RemoteCheckpointFolder, RemoteFolder
from composer.utils.object_store import ObjectStoreURL

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
