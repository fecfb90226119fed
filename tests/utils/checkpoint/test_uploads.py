"""composer.utils.checkpoint.uploads: one-file checkpoints uploaded as they are saved, and what an upload that fails
for good does (``on_upload_failure``), against an S3-compatible store (moto's server on loopback, authentication on).

A store that goes away or hangs ends the run within about ``retry_budget`` under ``'raise'``, naming the object;
under ``'keep_local'`` training goes on, keeps the newest checkpoints locally, and uploads them once the store
answers. SIGKILL inside an upload and between an upload and its pruning, each followed by autoresume on a "fresh
machine" (an empty local folder): killed runs are child processes of a fork server that has imported torch and
composer once (multiprocessing's ``forkserver``); each child is a fresh process, killed for real.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
import signal
import time
import warnings
from pathlib import Path

import pytest
import torch

from composer import Trainer
from composer.utils.checkpoint import RemoteCheckpointFolder, read_checkpoint
from composer.utils.object_store import S3ObjectStore, UploadError
from tests.common import make_dataloader
from tests.common.s3_server import S3Server
from tests.utils.checkpoint.store_runs import (
    BUDGET,
    At,
    SaveTimes,
    faults_trainer,
    local_checkpoints,
    options,
    remote_trainer,
)

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")


# ---- a store that goes away or hangs: the run ends ---------------------------------------------------------------


def test_a_store_that_goes_away_fails_the_run_after_the_retry_budget_naming_the_object(
    s3_server, monkeypatch, tmp_path
):
    server = S3Server().start()  # its own server, to stop
    try:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        bucket = server.create_bucket()
        trainer = remote_trainer(
            f"s3://{bucket}/ckpt",
            max_duration="2ep",
            save_interval="2ba",
            callbacks=[At({3: server.stop})],  # the store goes away once the checkpoint of batch 2 is in it
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


def test_a_hung_store_ends_the_run_within_the_retry_budget(s3_env, proxy, tmp_path):
    """The store hangs after batch 3: the upload of batch 4 fails within about retry_budget, and the save that
    finds the queue full (batch 8) raises it; before, botocore's 60 s read timeout and its own retries ran first."""
    bucket = s3_env.create_bucket()
    hung_at: list[float] = []
    times = SaveTimes()
    trainer = faults_trainer(
        f"s3://{bucket}/ckpt",
        tmp_path,
        proxy.endpoint_url,
        callbacks=[At({3: lambda: (setattr(proxy, "mode", "hang"), hung_at.append(time.monotonic()))}), times],
    )
    with pytest.raises(UploadError) as error:
        trainer.fit()
    elapsed = time.monotonic() - hung_at[0]
    message = str(error.value)
    assert f"Uploading checkpoint ep0-ba4-rank0.pt to s3://{bucket}/ckpt/ep0-ba4-rank0.pt failed" in message
    assert f"the store at {proxy.endpoint_url} did not answer within 1 s" in message, message
    assert elapsed < BUDGET + 10, f"the run ended {elapsed:.1f} s after the store hung"
    assert max(times.durations) < BUDGET + 10, times.durations
    print(f"ended {elapsed:.1f} s after the hang; saves {times.durations}")
    assert s3_env.keys(bucket) == ["ckpt/ep0-ba2-rank0.pt"]
    t = time.monotonic()
    trainer.close()
    print("close", time.monotonic() - t)


# ---- on_upload_failure='keep_local': training goes on ------------------------------------------------------------


def test_keep_local_trains_through_an_outage_then_uploads_the_newest_and_a_fresh_machine_resumes(
    s3_env, proxy, tmp_path
):
    """The store hangs from batch 5 to batch 13. Training goes on with one warning; the checkpoints not uploaded stay
    locally, the newest 2 at most; once the store answers, they are uploaded newest first and the store is pruned
    to 2. A fresh machine (empty local folder) then resumes from the store bitwise."""
    bucket = s3_env.create_bucket()
    local = tmp_path / "local"
    during_outage: list[list[str]] = []
    times = SaveTimes()
    actions = {
        5: lambda: setattr(proxy, "mode", "hang"),
        11: lambda: None,  # the upload of batch 6 has failed by now: the outage is known from the save of batch 12 on
        13: lambda: (during_outage.append(local_checkpoints(local)), setattr(proxy, "mode", "forward")),
    }
    trainer = faults_trainer(
        f"s3://{bucket}/ckpt", local, proxy.endpoint_url, on_upload_failure="keep_local", callbacks=[At(actions), times]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit()
    trainer.close()
    outage_warnings = [w for w in caught if "keep_local" in str(w.message)]
    assert len(outage_warnings) == 1, [str(w.message) for w in caught]
    assert f"the store at {proxy.endpoint_url} did not answer" in str(outage_warnings[0].message)
    # While the store hung: the newest checkpoint it got (batch 4) and the newest 2 of those it did not get.
    assert during_outage == [["ep0-ba4-rank0.pt", "ep2-ba10-rank0.pt", "ep2-ba12-rank0.pt"]]
    assert max(times.durations) < BUDGET + 5, times.durations  # no save waited on the hung store beyond the budget
    assert s3_env.keys(bucket) == ["ckpt/ep3-ba14-rank0.pt", "ckpt/ep3-ba16-rank0.pt"]
    assert local_checkpoints(local) == ["ep3-ba16-rank0.pt"]

    fresh = faults_trainer(f"s3://{bucket}/ckpt", tmp_path / "fresh", s3_env.endpoint_url, autoresume=True)
    assert fresh.checkpointing.loaded_path.name == "ep3-ba16-rank0.pt"
    for a, b in zip(trainer.state.model.parameters(), fresh.state.model.parameters(), strict=True):
        assert torch.equal(a, b)
    fresh.close()


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
