"""composer.utils.checkpoint.remote_folder: a run's checkpoints in a store, ranked, pruned and verified like a local
folder's (against a local S3 server)."""

import pytest

from composer.utils.checkpoint import CheckpointError, RemoteCheckpointFolder
from composer.utils.object_store import ObjectStoreURL
from tests.utils.checkpoint.store_runs import options, remote_trainer


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


# ---- through the Trainer: save_folder and autoresume in a store --------------------------------------------------


def test_the_constructor_refuses_wrong_credentials_without_showing_the_secret(s3_env, monkeypatch, tmp_path):
    bucket = s3_env.create_bucket()
    wrong_secret = "wrong-secret-0123456789abcdefghijklmnopqrstuv"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong_secret)
    with pytest.raises(ValueError) as error:
        remote_trainer(f"s3://{bucket}/ckpt", storage_options=options(s3_env, tmp_path))
    message = str(error.value)
    assert message.startswith(f"save_folder='s3://{bucket}/ckpt': the store refused the credentials")
    assert (
        "AWS_SECRET_ACCESS_KEY" in message and wrong_secret not in message and s3_env.secret_access_key not in message
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000")
    with pytest.raises(ValueError, match=r"InvalidAccessKeyId"):
        remote_trainer(load_path=f"s3://{bucket}/ckpt/ep1-ba4-rank0.pt", storage_options=options(s3_env, tmp_path))


def test_the_constructor_refuses_a_missing_bucket_and_an_unreachable_store(s3_env, tmp_path):
    with pytest.raises(
        ValueError, match=r"save_folder='s3://no-such-bucket-x/ckpt': the bucket 'no-such-bucket-x' does not exist"
    ):
        remote_trainer("s3://no-such-bucket-x/ckpt", storage_options=options(s3_env, tmp_path))
    unreachable = {"endpoint_url": "http://127.0.0.1:9", "retry_budget": 1}
    with pytest.raises(ValueError, match=r"the store at http://127.0.0.1:9 cannot be reached"):
        remote_trainer("s3://bucket-a/ckpt", storage_options=unreachable)
    with pytest.raises(ValueError, match=r"storage_options has the key 'aws_secret_access_key'"):
        remote_trainer("s3://bucket-a/ckpt", storage_options={"aws_secret_access_key": "hunter2"})


def test_autoresume_never_chooses_a_partial_or_damaged_object(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    first = remote_trainer(
        f"s3://{bucket}/ckpt",
        max_duration="4ba",
        save_interval="2ba",
        run_name="r",
        storage_options=options(s3_env, tmp_path / "first"),
    )
    first.fit()
    first.close()
    client = s3_env.client()
    good = client.get_object(Bucket=bucket, Key="ckpt/ep0-ba4-rank0.pt")
    body, metadata = good["Body"].read(), good["Metadata"]
    # Newer than the good ones: the same bytes cut short under their checksum, and an object without one.
    client.put_object(Bucket=bucket, Key="ckpt/ep1-ba6-rank0.pt", Body=body[: len(body) // 2], Metadata=metadata)
    client.put_object(Bucket=bucket, Key="ckpt/ep1-ba8-rank0.pt", Body=body[: len(body) // 2])
    with pytest.warns(UserWarning, match=r"autoresume skips 2 checkpoint\(s\).*ep1-ba8-rank0.pt: no composer-sha256"):
        resumed = remote_trainer(
            f"s3://{bucket}/ckpt",
            max_duration="4ba",
            run_name="r",
            autoresume=True,
            storage_options=options(s3_env, tmp_path / "second"),
        )
    assert resumed.checkpointing.loaded_path.name == "ep0-ba4-rank0.pt"
    assert int(resumed.state.timer.batch) == 4
    resumed.close()


def test_a_stray_object_under_a_checkpoint_name_is_passed_over_with_a_warning(s3_env, tmp_path):
    """``ckpt/ep0-ba2-rank0.pt`` and ``ckpt/ep0-ba2-rank0.pt/notes.txt``: a name both an object and a folder. The
    listing passes over the notes (naming them) instead of failing autoresume and pruning for the whole folder."""
    bucket = s3_env.create_bucket()
    first = remote_trainer(
        f"s3://{bucket}/ckpt", max_duration="4ba", save_interval="2ba", storage_options=options(s3_env, tmp_path / "a")
    )
    first.fit()
    first.close()
    s3_env.client().put_object(Bucket=bucket, Key="ckpt/ep0-ba2-rank0.pt/notes.txt", Body=b"notes")
    stray = rf"not checkpoints, passed over.*: s3://{bucket}/ckpt/ep0-ba2-rank0.pt/notes.txt\. Move or delete them"
    with pytest.warns(UserWarning, match=stray):
        resumed = remote_trainer(
            f"s3://{bucket}/ckpt",
            max_duration="6ba",
            save_interval="2ba",
            save_num_checkpoints_to_keep=1,
            autoresume=True,
            storage_options=options(s3_env, tmp_path / "b"),
        )
    assert resumed.checkpointing.loaded_path.name == "ep0-ba4-rank0.pt"
    with pytest.warns(UserWarning, match=stray):
        resumed.fit()  # the pruning (on the upload thread) lists the folder too
    resumed.close()
    assert s3_env.keys(bucket) == ["ckpt/ep0-ba2-rank0.pt/notes.txt", "ckpt/ep1-ba6-rank0.pt"]
