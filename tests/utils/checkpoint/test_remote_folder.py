"""composer.utils.checkpoint.remote_folder: a run's checkpoints in a store, ranked, pruned and verified like a local
folder's (against a local S3 server)."""

import pytest

from composer.utils.checkpoint import CheckpointError, RemoteCheckpointFolder
from composer.utils.object_store import ObjectStoreURL


def test_ranking_pruning_and_verification_follow_the_local_rules(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    url = ObjectStoreURL(bucket, "run")
    folder = RemoteCheckpointFolder.open(
        url, {"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "local")}, "save_folder", write=True
    )
    for batch in (3, 9, 6):
        path = tmp_path / f"ep0-ba{batch}.pt"
        path.write_bytes(bytes([batch]) * 1000)
        folder.upload(path, path.name)
    s3_env.client().put_object(Bucket=bucket, Key="run/notes.txt", Body=b"not a checkpoint")
    assert folder.newest_first("ep{epoch}-ba{batch}.pt") == ["ep0-ba9.pt", "ep0-ba6.pt", "ep0-ba3.pt"]
    assert folder.download("ep0-ba6.pt").read_bytes() == bytes([6]) * 1000
    # Bytes that do not match their checksum are refused, and not left behind.
    s3_env.client().put_object(
        Bucket=bucket, Key="run/ep0-ba9.pt", Body=b"damaged", Metadata={"composer-sha256": "0" * 64}
    )
    with pytest.raises(CheckpointError, match=r"does not match the checksum it was uploaded with"):
        folder.download("ep0-ba9.pt")
    assert not (tmp_path / "local" / "ep0-ba9.pt").exists()
    # Newest = the one just uploaded (6): the one ahead of it (9) goes first, then the oldest.
    assert folder.prune("ep{epoch}-ba{batch}.pt", 1, "ep0-ba6.pt") == ["ep0-ba9.pt", "ep0-ba3.pt"]
    assert s3_env.keys(bucket) == ["run/ep0-ba6.pt", "run/notes.txt"]
