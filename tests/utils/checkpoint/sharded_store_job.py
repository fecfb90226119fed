"""Sharded FSDP checkpoints in an S3-compatible store (moto on loopback, authentication on), on two "nodes".

One job of two torchrun launchers (``--nnodes 2``, one CPU rank each) runs this file as its script (``main``);
:func:`run_store_job` starts it for the ``sharded_store_job`` fixture (tests/utils/checkpoint/conftest.py), whose
tests are in test_sharded_uploads.py and test_sharded_mirror.py. Each node has its own local folder, as machines without a shared disk do, so each rank uploads its own
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
from tests.distributed.test_fsdp_trainer import fsdp_trainer
from tests.trainer import dist_worker as worker
from tests.utils.checkpoint.test_sharded import SHARDED

SHARD_FILES = [".metadata", "__0_0.distcp", "__1_0.distcp", "composer.pt"]


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


def run_store_job(s3_server: Any, folder: Path) -> dict[Any, Any]:
    """Runs the ``sharded_remote`` scenario into a new bucket, damaging the store while the job waits; returns each
    rank's results (by rank), the folder, the bucket and the server."""
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


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
