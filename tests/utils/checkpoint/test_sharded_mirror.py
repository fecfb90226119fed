"""Sharded FSDP checkpoints in an S3-compatible store (moto on loopback, authentication on), on two "nodes".

One job of two torchrun launchers (``--nnodes 2``, one CPU rank each) runs this file as its script (``main``, at the
bottom). Each node has its own local folder, as machines without a shared disk do, so each rank uploads its own
shards, and each node downloads the whole folder to resume. The job runs: an uninterrupted sharded run saving to
``s3://BUCKET/plain``; a run stopped at batch 8; then, after an unfinished folder (shards, no composer.pt) and a
folder with a shard of the wrong checksum were put in the store, a resumed run on fresh local folders. Two more
jobs: rank 1 SIGKILLed while it uploads its shard of batch 8 (the whole job ends), then a fresh job on empty local
folders that autoresumes from the store. In this process: the 2-rank checkpoint resumed by autoresume on one rank
(2 -> 1).
"""

from __future__ import annotations

import fnmatch
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from composer.distributed.fsdp import full_model_state_dict
from composer.utils import dist
from composer.utils.object_store import S3ObjectStore
from tests.distributed import launch
from tests.distributed.test_fsdp_trainer import assert_close, assert_equal, fsdp_trainer
from tests.trainer import dist_worker as worker
from tests.utils.checkpoint.test_sharded import SHARDED, resume_on_one_rank

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")

SHARD_FILES = [".metadata", "__0_0.distcp", "__1_0.distcp", "composer.pt"]


# ---- the 2-node job (each rank runs this) ----------------------------------------------------------------------------


def remote_trainer(model: torch.nn.Module, folder: Path, endpoint: str, bucket: str, prefix: str, local: str, **kw):
    options = {"endpoint_url": endpoint, "retry_budget": 10, "local_folder": str(folder / local)}
    return fsdp_trainer(
        model,
        fsdp_config=SHARDED,
        save_folder=f"s3://{bucket}/{prefix}",
        save_interval="4ba",
        save_num_checkpoints_to_keep=2,
        storage_options=options,
        **kw,
    )


def run_job(folder: Path, endpoint: str, bucket: str) -> dict[str, Any]:
    rank, node = dist.get_global_rank(), dist.get_node_rank()
    out: dict[str, Any] = {}
    trainer = remote_trainer(worker.make_model(seed=rank), folder, endpoint, bucket, "plain", f"node{node}/plain")
    trainer.fit()  # returns once every checkpoint is complete in the store
    out["plain"] = full_model_state_dict(trainer.state.model)
    trainer.close()

    auto = {"run_name": "auto", "autoresume": True}
    stopped = remote_trainer(
        worker.make_model(seed=0), folder, endpoint, bucket, "auto", f"node{node}/auto", max_duration="8ba", **auto
    )
    stopped.fit()
    stopped.close()
    dist.barrier()  # the test's process damages the store now (damage, below): rank 0 waits until it is done
    if rank == 0:
        (folder / "ready").write_text("")
        while not (folder / "damaged").exists():
            time.sleep(0.05)
    dist.barrier()
    # A fresh machine: an empty local folder on each node.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = remote_trainer(
            worker.make_model(seed=100 + rank), folder, endpoint, bucket, "auto", f"n{node}", **auto
        )
    out["auto_warnings"] = [str(w.message) for w in caught]
    out["auto_loaded"] = str(trainer.checkpointing.loaded_path)
    out["auto_at"] = int(trainer.state.timer.batch)
    trainer.fit()
    out["auto"] = full_model_state_dict(trainer.state.model)
    trainer.close()
    return out


KILLED_UPLOAD = "killed/ep1-ba8/__1_0.distcp"  # rank 1's shard of batch 8
COMPLETED_BEFORE = "killed/ep0-ba4/composer.pt"  # batch 4's checkpoint, which rank 0 completes at batch 8's save


def kill_in_upload(name_glob: str, after: str) -> None:
    """SIGKILLs this process once the first bytes of an upload whose key matches ``name_glob`` were sent, and not
    before the object ``after`` is in the store (waiting up to a minute in the upload thread). Rank 0 uploads batch
    4's ``composer.pt`` in the background at batch 8's save, while rank 1 starts uploading its shard of batch 8:
    without the wait, whether that upload ends before the launcher stops rank 0 would be a race."""
    upload = S3ObjectStore.upload

    def killing_upload(self, local_path, key, *, metadata=None, progress=None):  # type: ignore[no-untyped-def]
        if fnmatch.fnmatch(key, name_glob):
            deadline = time.monotonic() + 60
            while self.head(after) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            progress = lambda sent: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
        return upload(self, local_path, key, metadata=metadata, progress=progress)

    S3ObjectStore.upload = killing_upload  # type: ignore[method-assign]


def run_killed_job(folder: Path, endpoint: str, bucket: str, resume: bool) -> dict[str, Any]:
    """``resume=False``: rank 1 dies inside its upload of batch 8's shard. ``resume=True``: a fresh machine (empty
    local folders, other initial weights) autoresumes from the store and trains to the end."""
    rank, node = dist.get_global_rank(), dist.get_node_rank()
    if not resume and rank == 1:
        kill_in_upload(KILLED_UPLOAD, after=COMPLETED_BEFORE)
    local = f"resumed{node}" if resume else f"node{node}/killed"
    seed = 200 + rank if resume else rank
    auto = {"run_name": "killed", "autoresume": True}
    trainer = remote_trainer(worker.make_model(seed=seed), folder, endpoint, bucket, "killed", local, **auto)
    out: dict[str, Any] = {"loaded": str(trainer.checkpointing.loaded_path), "at": int(trainer.state.timer.batch)}
    trainer.fit()
    out["final"] = full_model_state_dict(trainer.state.model)
    trainer.close()
    return out


def main() -> None:
    scenario, folder, endpoint, bucket = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    if scenario == "sharded_remote":
        out = run_job(folder, endpoint, bucket)
    else:
        out = run_killed_job(folder, endpoint, bucket, resume=scenario == "resume_killed")
    torch.save(out, folder / f"{scenario}{dist.get_global_rank()}.pt")
    worker.end_job()


# ---- the job, and damaging the store while it waits -------------------------------------------------------------------


def damage(server, bucket: str) -> None:
    """Newer than the stopped run's checkpoints: an unfinished upload (rank 1's shard only) and a folder whose shard
    does not carry the checksum its composer.pt lists."""
    client = server.client()
    client.put_object(Bucket=bucket, Key="auto/ep2-ba14/__1_0.distcp", Body=b"shard")
    for name in SHARD_FILES:
        source = client.get_object(Bucket=bucket, Key=f"auto/ep1-ba8/{name}")
        metadata = {} if name == "__1_0.distcp" else source["Metadata"]
        client.put_object(Bucket=bucket, Key=f"auto/ep2-ba16/{name}", Body=source["Body"].read(), Metadata=metadata)


def start_job(scenario: str, s3_server: Any, folder: Path, bucket: str) -> list[subprocess.Popen[str]]:
    """Starts the two torchrun launchers (one per node) running ``main`` with ``scenario``."""
    port = launch.free_port()
    env = {**launch._env(), **s3_server.environment()}
    env.pop("AWS_PROFILE", None)
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                f"--node_rank={node}",
                "--nproc_per_node=1",
                "--master_addr=127.0.0.1",
                f"--master_port={port}",
                __file__,
                scenario,
                str(folder),
                s3_server.endpoint_url,
                bucket,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=launch.REPO,
        )
        for node in (0, 1)
    ]


def finish(processes: list[subprocess.Popen[str]]) -> list[str]:
    """Waits for both launchers (killing them after ``JOB_TIMEOUT``); returns their output."""
    try:
        return [p.communicate(timeout=launch.JOB_TIMEOUT)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()


@pytest.fixture(scope="module")
def job(s3_server, tmp_path_factory) -> dict[Any, Any]:
    folder = tmp_path_factory.mktemp("sharded_remote")
    bucket = s3_server.create_bucket()
    processes = start_job("sharded_remote", s3_server, folder, bucket)
    try:
        for _ in range(launch.JOB_TIMEOUT * 20):
            if (folder / "ready").exists() or any(p.poll() is not None for p in processes):
                break
            time.sleep(0.05)
        if (folder / "ready").exists():
            damage(s3_server, bucket)
            (folder / "damaged").write_text("")
    finally:
        outputs = finish(processes)
    if any(p.returncode != 0 for p in processes):
        pytest.fail("The 2-node job failed:\n" + "\n".join(o[-6000:] for o in outputs))
    results = {r: torch.load(folder / f"sharded_remote{r}.pt", weights_only=False) for r in (0, 1)}
    return {"folder": folder, "bucket": bucket, "server": s3_server, **results}


# ---- tests -----------------------------------------------------------------------------------------------------------


@pytest.mark.dist
def test_each_rank_uploads_its_shards_and_the_store_keeps_the_newest_two(job):
    keys = job["server"].keys(job["bucket"], "plain/")
    assert keys == [f"plain/{name}/{file}" for name in ("ep1-ba12", "ep1-ba8") for file in SHARD_FILES]
    # Each node's local folder keeps the newest checkpoint; node 1's holds its own shard only (no shared disk).
    assert sorted(p.name for p in (job["folder"] / "node0" / "plain").iterdir() if p.is_dir()) == ["ep1-ba12"]
    assert sorted(p.name for p in (job["folder"] / "node1" / "plain" / "ep1-ba12").iterdir()) == ["__1_0.distcp"]


@pytest.mark.dist
def test_autoresume_downloads_the_newest_complete_folder_on_each_node_and_resumes_bitwise(job):
    for rank in (0, 1):
        assert Path(job[rank]["auto_loaded"]).name == "ep1-ba8" and job[rank]["auto_at"] == 8
        assert Path(job[rank]["auto_loaded"]).parent.name == f"n{rank}"  # each node its own copy
    warning = next(w for w in job[0]["auto_warnings"] if "autoresume skips" in w)
    assert "ep2-ba16: shard file __1_0.distcp does not carry the checksum listed in the store" in warning
    assert "ep2-ba14: an unfinished upload (no composer.pt in the store)" in warning
    assert_equal(job[0]["auto"], job[0]["plain"])
    # Pruned to two by the resumed run: the stopped run's ep0-ba4 and the damaged ep2-ba16 went; the unfinished
    # ep2-ba14 ranks newer than the newest checkpoint, so it stays (it could be an upload in progress); never used.
    keys = job["server"].keys(job["bucket"], "auto/")
    expected = [f"auto/{name}/{file}" for name in ("ep1-ba12", "ep1-ba8") for file in SHARD_FILES]
    assert keys == sorted([*expected, "auto/ep2-ba14/__1_0.distcp"])


@pytest.mark.dist
def test_a_two_rank_checkpoint_in_the_store_resumes_on_one_rank(job, s3_env, tmp_path):
    client, bucket = s3_env.client(), job["bucket"]
    for file in SHARD_FILES:  # the plain run's checkpoint of batch 8, as the only one of a run
        client.copy_object(
            Bucket=bucket, Key=f"reshard/ep1-ba8/{file}", CopySource={"Bucket": bucket, "Key": f"plain/ep1-ba8/{file}"}
        )
    _, resumed_at, final = resume_on_one_rank(
        tmp_path,
        save_folder=f"s3://{bucket}/reshard",
        autoresume=True,
        run_name="reshard",
        storage_options={"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "local")},
    )
    assert resumed_at == 8
    assert_close(final, job[0]["plain"])


@pytest.mark.dist
def test_sigkill_inside_a_shard_upload_then_autoresume_on_fresh_machines_is_bitwise_equal(job, tmp_path):
    server, bucket = job["server"], job["bucket"]
    outputs = finish(start_job("killed", server, tmp_path, bucket))
    assert not (tmp_path / "killed1.pt").exists(), "rank 1 was not killed:\n" + outputs[1][-4000:]
    assert "SIGKILL" in outputs[1] or "Signals.SIGKILL" in outputs[1] or "-9" in outputs[1], outputs[1][-4000:]
    # Batch 8's checkpoint never completed: no composer.pt, so it does not count.
    assert COMPLETED_BEFORE in server.keys(bucket, "killed/")
    assert "killed/ep1-ba8/composer.pt" not in server.keys(bucket, "killed/")

    processes = start_job("resume_killed", server, tmp_path, bucket)
    outputs = finish(processes)
    assert [p.returncode for p in processes] == [0, 0], "\n".join(o[-6000:] for o in outputs)
    resumed = {r: torch.load(tmp_path / f"resume_killed{r}.pt", weights_only=False) for r in (0, 1)}
    for rank in (0, 1):  # each node downloaded the newest complete checkpoint into its own empty folder
        assert Path(resumed[rank]["loaded"]).name == "ep0-ba4" and resumed[rank]["at"] == 4
        assert Path(resumed[rank]["loaded"]).parent.name == f"resumed{rank}"
    assert_equal(resumed[0]["final"], job[0]["plain"])  # the full state is gathered on rank 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
