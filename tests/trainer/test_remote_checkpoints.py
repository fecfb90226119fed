"""Checkpoints in an S3-compatible store (moto's server on loopback, with authentication on).

Round trips, the constructor's refusals, a store that goes away mid-run, SIGKILL inside an upload and between an
upload and its pruning (each followed by autoresume on a "fresh machine": an empty local folder), and a damaged
object that autoresume must pass over. Killed runs are child processes of a fork server that has imported torch and
composer once (multiprocessing's ``forkserver``); each child is a fresh process, killed for real.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import CheckpointSaver
from composer.utils.checkpoint import RemoteCheckpointFolder, read_checkpoint
from composer.utils.object_store import S3ObjectStore, UploadError
from tests.common import SimpleModel, make_dataloader
from tests.common.s3_server import S3Server

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")

PATTERN = "ep{epoch}-ba{batch}-rank{rank}.pt"


def options(server: S3Server, local_folder: Path, **more) -> dict:
    return {"endpoint_url": server.endpoint_url, "local_folder": str(local_folder), "retry_budget": 5, **more}


def make_trainer(save_folder=None, max_duration="2ep", model=None, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = model if model is not None else SimpleModel()
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        save_folder=save_folder,
        progress_bar=False,
        seed=0,
        **kwargs,
    )


# ---- round trips and refusals ------------------------------------------------------------------------------------


def test_save_to_s3_then_load_path_s3_gives_the_same_weights(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    trainer = make_trainer(
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
    make_trainer(
        model=loaded,
        load_path=f"s3://{bucket}/ckpt/round-trip/ep1-ba8-rank0.pt",
        storage_options=options(s3_env, tmp_path / "elsewhere"),
    ).close()
    for a, b in zip(trainer.state.model.parameters(), loaded.parameters()):
        assert torch.equal(a, b)
    # A folder as load_path: its newest checkpoint.
    from_folder = SimpleModel()
    folder_trainer = make_trainer(
        model=from_folder,
        load_path=f"s3://{bucket}/ckpt/round-trip",
        storage_options=options(s3_env, tmp_path / "third"),
    )
    assert folder_trainer.checkpointing.loaded_path.name == "ep1-ba8-rank0.pt"
    assert int(folder_trainer.state.timer.batch) == 8
    folder_trainer.close()


def test_file_urls_are_local_paths(tmp_path):
    trainer = make_trainer(f"file://{tmp_path}/runs", max_duration="1ep")
    trainer.fit()
    trainer.close()
    assert (tmp_path / "runs" / "ep1-ba4-rank0.pt").is_file()


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("gs://bucket-a/ckpt", r"save_folder='gs://bucket-a/ckpt' uses the scheme 'gs://', which is not supported"),
        ("ftp://host/ckpt", r"save_folder='ftp://host/ckpt' uses the scheme 'ftp://'.*s3://BUCKET/PREFIX"),
        ("s3:/bucket-a/ckpt", r"save_folder='s3:/bucket-a/ckpt' is malformed.*two slashes"),
        ("s3:///ckpt", r"save_folder='s3:///ckpt' has no bucket"),
        ("s3://Bucket_A/ckpt", r"invalid bucket name 'Bucket_A'"),
        ("s3://127.0.0.1:9000/ckpt", r"invalid bucket name.*endpoint_url"),
    ],
)
def test_the_constructor_refuses_unknown_schemes_and_malformed_urls(folder, message):
    with pytest.raises(ValueError, match=message):
        make_trainer(folder)


def test_the_constructor_refuses_wrong_credentials_without_showing_the_secret(s3_env, monkeypatch, tmp_path):
    bucket = s3_env.create_bucket()
    wrong_secret = "wrong-secret-0123456789abcdefghijklmnopqrstuv"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong_secret)
    with pytest.raises(ValueError) as error:
        make_trainer(f"s3://{bucket}/ckpt", storage_options=options(s3_env, tmp_path))
    message = str(error.value)
    assert message.startswith(f"save_folder='s3://{bucket}/ckpt': the store refused the credentials")
    assert (
        "AWS_SECRET_ACCESS_KEY" in message and wrong_secret not in message and s3_env.secret_access_key not in message
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000")
    with pytest.raises(ValueError, match=r"InvalidAccessKeyId"):
        make_trainer(load_path=f"s3://{bucket}/ckpt/ep1-ba4-rank0.pt", storage_options=options(s3_env, tmp_path))


def test_the_constructor_refuses_a_missing_bucket_and_an_unreachable_store(s3_env, tmp_path):
    with pytest.raises(
        ValueError, match=r"save_folder='s3://no-such-bucket-x/ckpt': the bucket 'no-such-bucket-x' does not exist"
    ):
        make_trainer("s3://no-such-bucket-x/ckpt", storage_options=options(s3_env, tmp_path))
    unreachable = {"endpoint_url": "http://127.0.0.1:9", "retry_budget": 1}
    with pytest.raises(ValueError, match=r"the store at http://127.0.0.1:9 cannot be reached"):
        make_trainer("s3://bucket-a/ckpt", storage_options=unreachable)
    with pytest.raises(ValueError, match=r"storage_options has the key 'aws_secret_access_key'"):
        make_trainer("s3://bucket-a/ckpt", storage_options={"aws_secret_access_key": "hunter2"})


def test_a_remote_folder_holding_checkpoints_is_refused_without_autoresume(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    first = make_trainer(f"s3://{bucket}/ckpt", max_duration="1ep", storage_options=options(s3_env, tmp_path / "a"))
    first.fit()
    first.close()
    with pytest.raises(ValueError, match=rf"s3://{bucket}/ckpt already holds checkpoints.*autoresume=True"):
        make_trainer(f"s3://{bucket}/ckpt", storage_options=options(s3_env, tmp_path / "b"))


# ---- the store going away ----------------------------------------------------------------------------------------


class StopServerAfter(Callback):
    """Stops the S3 server once the checkpoint of ``batch`` is in the store."""

    def __init__(self, server: S3Server, batch: int) -> None:
        self.server, self.batch = server, batch

    def batch_end(self, state, logger):
        if state.timer.batch.value == self.batch + 1:
            for callback in state.callbacks:
                if isinstance(callback, CheckpointSaver):
                    callback.destination.wait()  # the upload of the checkpoint of `batch` is complete
            self.server.stop()


def test_a_store_that_goes_away_fails_the_run_after_the_retry_budget_naming_the_object(
    s3_server, monkeypatch, tmp_path
):
    server = S3Server().start()  # its own server, to stop
    try:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        bucket = server.create_bucket()
        trainer = make_trainer(
            f"s3://{bucket}/ckpt",
            max_duration="2ep",
            save_interval="2ba",
            callbacks=[StopServerAfter(server, batch=2)],
            storage_options=options(server, tmp_path, retry_budget=1.5),
        )
        start = time.monotonic()
        with pytest.raises(UploadError) as error:
            trainer.fit()
        elapsed = time.monotonic() - start
    finally:
        server.stop()
    message = str(error.value)
    assert f"Uploading checkpoint ep0-ba4-rank0.pt to s3://{bucket}/ckpt/ep0-ba4-rank0.pt failed" in message
    assert f"the store at {server.endpoint_url} cannot be reached" in message and "retry_budget=1.5 s" in message
    assert 1.5 <= elapsed < 15
    assert s3_server.running  # the session's server was not touched
    # The newest checkpoint the store got is intact locally, and so are the ones written after it (training went on
    # while the upload was retried, until a save found the failure waiting).
    local = sorted(p.name for p in tmp_path.glob("ep*.pt"))
    assert local[:2] == ["ep0-ba2-rank0.pt", "ep0-ba4-rank0.pt"]
    for path in tmp_path.glob("ep*.pt"):
        read_checkpoint(path)


# ---- kills, then autoresume on a fresh machine -------------------------------------------------------------------


def train_command(endpoint_url: str, env: dict, bucket: str, local_folder: str, out: str, kill: str = "") -> None:
    """The training command the kill tests run in fresh processes: autoresume into s3://BUCKET/run, a save every
    2 batches keeping 2, 6 MB checkpoints (uploaded in two parts), shuffling and Dropout; the final weights go to
    ``out``. ``kill='upload:<glob>'`` SIGKILLs the process after the first bytes of a matching upload were sent;
    ``kill='prune:<glob>'`` right after a matching upload completed, before the store is pruned."""
    os.environ.update(env)
    torch.set_num_threads(1)
    moment, _, name_glob = kill.partition(":")
    if moment == "upload":
        upload = S3ObjectStore.upload

        def killing_upload(self, local_path, key, *, metadata=None, progress=None):
            if fnmatch.fnmatch(key, name_glob):
                progress = lambda sent: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
            return upload(self, local_path, key, metadata=metadata, progress=progress)

        S3ObjectStore.upload = killing_upload  # type: ignore[method-assign]
    elif moment == "prune":
        prune = RemoteCheckpointFolder.prune

        def killing_prune(self, pattern, keep, newest, run_name=""):
            if fnmatch.fnmatch(newest, name_glob):
                os.kill(os.getpid(), signal.SIGKILL)
            return prune(self, pattern, keep, newest, run_name)

        RemoteCheckpointFolder.prune = killing_prune  # type: ignore[method-assign]
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
    net.register_buffer("ballast", torch.zeros(6 * 2**18))  # 6 MB: a multipart upload of two parts
    from composer.models import ComposerClassifier

    model = ComposerClassifier(net, num_classes=3)
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=20, batch_size=4, shuffle=True, seed=3),
        max_duration="3ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        seed=7,
        deterministic_mode=True,
        progress_bar=False,
        run_name="killed",
        save_folder=f"s3://{bucket}/run",
        save_interval="2ba",
        save_num_checkpoints_to_keep=2,
        autoresume=True,
        storage_options={
            "endpoint_url": endpoint_url,
            "local_folder": local_folder,
            "multipart_threshold_mb": 5,
            "multipart_chunksize_mb": 5,
            "retry_budget": 10,
        },
    )
    resumed = trainer.checkpointing.loaded_path
    trainer.fit()
    trainer.close()
    torch.save({"weights": [p.detach() for p in model.parameters()], "resumed": resumed.name if resumed else None}, out)


@pytest.fixture(scope="module")
def fresh_process():
    """Runs ``train_command`` in a fresh child process; returns its exit code (-9 when SIGKILLed)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "composer.trainer", "boto3", __name__])

    def run(**kwargs) -> int:
        process = context.Process(target=train_command, kwargs=kwargs)
        process.start()
        process.join(timeout=120)
        assert process.exitcode is not None, "the training process hung"
        return process.exitcode

    return run


def run_kwargs(server: S3Server, bucket: str, folder: Path, **more) -> dict:
    folder.mkdir(parents=True)
    return {
        "endpoint_url": server.endpoint_url,
        "env": server.environment(),
        "bucket": bucket,
        "local_folder": str(folder / "local"),
        "out": str(folder / "final.pt"),
        **more,
    }


@pytest.fixture(scope="module")
def uninterrupted(s3_server, fresh_process, tmp_path_factory):
    folder = tmp_path_factory.mktemp("uninterrupted")
    assert fresh_process(**run_kwargs(s3_server, s3_server.create_bucket(), folder / "run")) == 0
    return torch.load(folder / "run" / "final.pt", weights_only=True)["weights"]


def assert_bitwise_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), f"max difference {(x - y).abs().max()}"


# (what is killed, the store's objects after the kill, the unfinished multipart uploads, the checkpoint resumed from)
KILLS = [
    # Inside the upload of the checkpoint of batch 6 (its first part sent): the store keeps the two before it.
    ("upload:*ep1-ba6-*", ["ep0-ba2-rank0.pt", "ep0-ba4-rank0.pt"], ["run/ep1-ba6-rank0.pt"], "ep0-ba4-rank0.pt"),
    # After the upload of batch 8, before the store was pruned: one checkpoint more than num_checkpoints_to_keep.
    ("prune:*ep1-ba8-*", ["ep0-ba4-rank0.pt", "ep1-ba6-rank0.pt", "ep1-ba8-rank0.pt"], [], "ep1-ba8-rank0.pt"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("kill", "left", "unfinished", "resumed_from"), KILLS, ids=["in-upload", "before-prune"])
def test_sigkill_then_autoresume_from_the_bucket_on_a_fresh_machine_is_bitwise_equal(
    s3_server, fresh_process, uninterrupted, tmp_path, kill, left, unfinished, resumed_from
):
    bucket = s3_server.create_bucket()
    assert fresh_process(**run_kwargs(s3_server, bucket, tmp_path / "first", kill=kill)) == -signal.SIGKILL
    client = s3_server.client()
    assert [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == unfinished
    assert s3_server.keys(bucket) == [f"run/{name}" for name in left]

    assert fresh_process(**run_kwargs(s3_server, bucket, tmp_path / "second")) == 0  # an empty local folder
    result = torch.load(tmp_path / "second" / "final.pt", weights_only=True)
    assert result["resumed"] == resumed_from
    assert_bitwise_equal(result["weights"], uninterrupted)
    # Nothing left for good: the unfinished upload aborted, the store pruned to num_checkpoints_to_keep.
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert s3_server.keys(bucket) == ["run/ep2-ba14-rank0.pt", "run/ep3-ba15-rank0.pt"]


def test_autoresume_never_chooses_a_partial_or_damaged_object(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    first = make_trainer(
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
        resumed = make_trainer(
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
    first = make_trainer(
        f"s3://{bucket}/ckpt", max_duration="4ba", save_interval="2ba", storage_options=options(s3_env, tmp_path / "a")
    )
    first.fit()
    first.close()
    s3_env.client().put_object(Bucket=bucket, Key="ckpt/ep0-ba2-rank0.pt/notes.txt", Body=b"notes")
    stray = rf"not checkpoints, passed over.*: s3://{bucket}/ckpt/ep0-ba2-rank0.pt/notes.txt\. Move or delete them"
    with pytest.warns(UserWarning, match=stray):
        resumed = make_trainer(
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
