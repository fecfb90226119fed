"""Sharded FSDP checkpoints in an S3-compatible store that goes down, on two "nodes" whose local folders differ.

One job of two torchrun launchers (``--nnodes 2``, one gloo CPU rank each, each its node's first rank) runs this file
as its script (``main``); :func:`run_outage_job` starts it for the ``sharded_outage_job`` fixture
(tests/utils/checkpoint/conftest.py), whose tests are in test_sharded_uploads.py and test_sharded_mirror.py. Each rank reaches the store (moto on loopback) through a
tests.common.store_proxy in its own process, and both make it hang after the same batch, so the store goes down for
the whole job. Each node has its own local folder: node 1's holds rank 1's shards only, node 0's the rest. With
``on_upload_failure='keep_local'``:

* ``outage``: the store hangs after batch 5 and answers again after batch 11; training goes on with one warning, each
  node keeps the newest 2 checkpoints not uploaded (and the newest one the store has); once the store answers they
  are uploaded, and the run ends (batch 14) with the store holding the newest 2, complete. Fresh machines (empty
  local folders) then resume from the store, bitwise;
* ``lost``: the store hangs after batch 7 and stays down to the end of the run (batch 12): the store holds batches 2
  and 4, the local folders batch 12, split between the nodes. The rerun on the same machines (the store back)
  resumes from batch 12: the ranks agree on it, upload their shards, rank 0 commits it, each node downloads what it
  lacks. It ends bitwise equal to the ``outage`` run, whose training no outage changed.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Trainer
from composer.distributed.fsdp import full_model_state_dict
from composer.utils import dist
from composer.utils.object_store import S3ObjectStore
from tests.common.store_proxy import StoreProxy
from tests.distributed import launch
from tests.distributed.test_fsdp_trainer import fsdp_trainer
from tests.trainer import dist_worker as worker
from tests.utils.checkpoint.store_runs import BUDGET, At
from tests.utils.checkpoint.test_sharded import SHARDED


def trainer(folder: Path, endpoint: str, bucket: str, run: str, local: str, seed: int, **kwargs: Any) -> Trainer:
    options = {"endpoint_url": endpoint, "retry_budget": BUDGET, "local_folder": str(folder / local)}
    return fsdp_trainer(
        worker.make_model(seed=seed),
        fsdp_config=SHARDED,
        save_folder=f"s3://{bucket}/{run}",
        run_name=run,
        save_interval="2ba",
        save_num_checkpoints_to_keep=2,
        storage_options=options,
        on_upload_failure="keep_local",
        **kwargs,
    )


def local_copies(folder: Path) -> dict[str, list[str]]:
    return {p.name: sorted(f.name for f in p.iterdir()) for p in sorted(folder.glob("ep*-ba*"))}


def store_keys(endpoint: str, bucket: str, prefix: str) -> list[str]:
    store = S3ObjectStore(bucket, {"endpoint_url": endpoint})
    return sorted(info.key for info in store.list_objects(prefix))


def run_outage(folder: Path, endpoint: str, bucket: str, out: dict[str, Any]) -> None:
    rank, node = dist.get_global_rank(), dist.get_node_rank()
    proxy = StoreProxy(endpoint).start()
    local = folder / f"node{node}" / "outage"
    actions = {
        3: lambda: None,  # batch 2's shards are uploaded: the save of batch 4 commits it
        5: lambda: setattr(proxy, "mode", "hang"),  # batch 2 is complete in the store, batch 4's shards are there
        7: lambda: None,  # the uploads of batch 6 have failed: the save of batch 8 finds the store down
        11: lambda: (out.update(during_outage=local_copies(local)), setattr(proxy, "mode", "forward")),
    }
    run = trainer(
        folder,
        proxy.endpoint_url,
        bucket,
        "outage",
        f"node{node}/outage",
        rank,
        callbacks=[At(actions)],
        max_duration="14ba",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.fit()
    run.close()
    proxy.stop()
    out["warnings"] = [str(w.message) for w in caught if "keep_local" in str(w.message)]
    out["final"] = full_model_state_dict(run.state.model)
    out["after_outage"] = local_copies(local)
    fresh = trainer(folder, endpoint, bucket, "outage", f"fresh{node}", 100 + rank, autoresume=True)
    out["fresh_loaded"], out["fresh_at"] = str(fresh.checkpointing.loaded_path), int(fresh.state.timer.batch)
    out["fresh"] = full_model_state_dict(fresh.state.model)
    fresh.close()


def run_lost(folder: Path, endpoint: str, bucket: str, out: dict[str, Any]) -> None:
    rank, node = dist.get_global_rank(), dist.get_node_rank()
    proxy = StoreProxy(endpoint).start()
    hang = At({3: lambda: None, 5: lambda: None, 7: lambda: setattr(proxy, "mode", "hang")})
    first = trainer(folder, proxy.endpoint_url, bucket, "lost", f"node{node}/lost", rank, callbacks=[hang])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outage's
        first.fit()  # 12 batches
    first.close()
    proxy.stop()
    out["lost_store"] = store_keys(endpoint, bucket, "lost/")
    out["lost_local"] = local_copies(folder / f"node{node}" / "lost")
    rerun = trainer(
        folder, endpoint, bucket, "lost", f"node{node}/lost", 200 + rank, autoresume=True, max_duration="14ba"
    )
    out["rerun_loaded"], out["rerun_at"] = str(rerun.checkpointing.loaded_path), int(rerun.state.timer.batch)
    out["rerun_local"] = local_copies(folder / f"node{node}" / "lost")
    rerun.fit()
    out["rerun"] = full_model_state_dict(rerun.state.model)
    rerun.close()


def main() -> None:
    scenario, folder, endpoint, bucket = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    assert scenario == "faults", scenario
    out: dict[str, Any] = {}
    run_outage(folder, endpoint, bucket, out)
    run_lost(folder, endpoint, bucket, out)
    torch.save(out, folder / f"faults{dist.get_global_rank()}.pt")
    worker.end_job()


def run_outage_job(s3_server: Any, folder: Path) -> dict[Any, Any]:
    """Runs the ``faults`` scenario into a new bucket; returns each rank's results (by rank), the folder, the bucket
    and the server."""
    bucket = s3_server.create_bucket()
    args = [s3_server.endpoint_url, bucket]
    nodes = launch.torchrun_nodes("faults", folder, Path(__file__), args, s3_server.environment())
    if any(node.returncode != 0 for node in nodes):
        pytest.fail("The 2-node job failed:\n" + "\n".join(n.stdout[-3000:] + n.stderr[-6000:] for n in nodes))
    results = {rank: torch.load(folder / f"faults{rank}.pt", weights_only=False) for rank in (0, 1)}
    return {"folder": folder, "bucket": bucket, "server": s3_server, **results}


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
