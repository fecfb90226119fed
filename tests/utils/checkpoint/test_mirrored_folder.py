"""composer.utils.checkpoint.mirrored_folder: autoresume's choice of the newest sound checkpoint, in the store or in a
rank's local folder, against an S3-compatible store that hangs (moto on loopback behind tests.common.store_proxy).

On one process, and on two ranks under torchrun (which runs this file: ``main`` at the bottom) whose local folders
differ."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Trainer
from composer.utils import dist
from composer.utils.object_store import S3ObjectStore
from tests.common.store_proxy import StoreProxy
from tests.distributed import launch
from tests.utils.checkpoint.store_runs import (
    BUDGET,
    KEEP_LOCAL,
    At,
    faults_trainer,
    local_checkpoints,
    wait_for_uploads,
)

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")


def test_autoresume_takes_newer_local_checkpoints_than_the_stores_and_uploads_them(s3_env, proxy, tmp_path):
    """The store hangs after batch 6 is in it, and stays down: the store holds batches 4 and 6, the local folder 6 to
    12, all intact. Rerun on the same machine (the store back), autoresume resumes from 12, not 6, and uploads the
    newest 2 of those the store lacks (12 and 10), then prunes it to 2."""
    bucket = s3_env.create_bucket()
    local = tmp_path / "local"
    first = faults_trainer(
        f"s3://{bucket}/ckpt",
        local,
        proxy.endpoint_url,
        max_duration="12ba",
        on_upload_failure="keep_local",
        callbacks=[At({7: lambda: setattr(proxy, "mode", "hang")})],
    )
    with pytest.warns(UserWarning, match=KEEP_LOCAL):
        first.fit()
    first.close()
    assert s3_env.keys(bucket) == ["ckpt/ep0-ba4-rank0.pt", "ckpt/ep1-ba6-rank0.pt"]
    assert local_checkpoints(local) == [f"ep{(b - 1) // 4}-ba{b}-rank0.pt" for b in (6, 8, 10, 12)]

    rerun = faults_trainer(f"s3://{bucket}/ckpt", local, s3_env.endpoint_url, autoresume=True)
    assert rerun.checkpointing.loaded_path == local / "ep2-ba12-rank0.pt"
    for a, b in zip(first.state.model.parameters(), rerun.state.model.parameters(), strict=True):
        assert torch.equal(a, b)
    wait_for_uploads(rerun.state)
    assert s3_env.keys(bucket) == ["ckpt/ep2-ba10-rank0.pt", "ckpt/ep2-ba12-rank0.pt"]
    rerun.fit()
    rerun.close()
    assert s3_env.keys(bucket) == ["ckpt/ep3-ba14-rank0.pt", "ckpt/ep3-ba16-rank0.pt"]


MACHINES = ("machine-a", "machine-b")  # the local folders of the two "nodes"


@pytest.mark.dist
def test_two_ranks_whose_local_folders_differ_resume_from_the_newest_checkpoint_of_either(s3_env, tmp_path):
    """A 2-rank run whose uploads failed after batch 6 left batches 6 to 12 in rank 0's local folder (machine a) and
    4 and 6 in the store. Rerun with the machines' roles swapped, rank 0's folder (machine b) is empty: the ranks
    agree on batch 12, which rank 1 (on machine a) uploads and rank 0 downloads, and they finish bitwise equal to an
    uninterrupted run; the store ends with the newest 2."""
    bucket = s3_env.create_bucket()
    (tmp_path / "store.json").write_text(json.dumps({"endpoint_url": s3_env.endpoint_url, "bucket": bucket}))
    result = launch.torchrun("swapped_machines", tmp_path, worker=Path(__file__))
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-8000:]}"
    out = {rank: torch.load(tmp_path / f"swapped{rank}.pt", weights_only=False) for rank in (0, 1)}
    assert out[0]["first_store"] == ["ep0-ba4-rank0.pt", "ep0-ba6-rank0.pt"]
    assert out[0]["first_local"] == ["ep0-ba6-rank0.pt", "ep1-ba10-rank0.pt", "ep1-ba12-rank0.pt", "ep1-ba8-rank0.pt"]
    assert out[1]["first_local"] == []
    for rank in (0, 1):
        assert out[rank]["loaded"] == str(tmp_path / MACHINES[1 - rank] / "ep1-ba12-rank0.pt")
        assert out[rank]["at"] == 12
        for name, value in out[rank]["plain"].items():
            assert torch.equal(out[rank]["final"][name], value), name
    assert s3_env.keys(bucket) == ["run/ep2-ba14-rank0.pt", "run/ep2-ba16-rank0.pt"]


def run_swapped_machines(folder: Path, endpoint_url: str, bucket: str) -> dict[str, Any]:
    """Each rank: an uninterrupted run; the run whose uploads fail after batch 6 (rank 0 hosts the proxy that
    hangs); the rerun with the local folders swapped."""
    from tests.trainer import dist_worker as worker

    rank = dist.get_global_rank()

    def trainer(local: str, endpoint: str, **kwargs: Any) -> tuple[Trainer, torch.nn.Module]:
        model = worker.make_model(seed=rank)
        options = {"endpoint_url": endpoint, "local_folder": str(folder / local), "retry_budget": BUDGET}
        kwargs = {"save_interval": "2ba", "save_num_checkpoints_to_keep": 2, "storage_options": options, **kwargs}
        return worker.trainer_for(model, save_folder=f"s3://{bucket}/run", run_name="swap", **kwargs), model

    out: dict[str, Any] = {}
    model = worker.make_model(seed=rank)
    plain = worker.trainer_for(model, max_duration="16ba")
    plain.fit()
    out["plain"] = worker.weights(model)
    plain.close()
    proxy = StoreProxy(endpoint_url).start() if rank == 0 else None
    hang = At({7: lambda: setattr(proxy, "mode", "hang")}) if proxy is not None else None
    first, _ = trainer(
        MACHINES[rank],
        endpoint_url if proxy is None else proxy.endpoint_url,
        max_duration="12ba",
        on_upload_failure="keep_local",
        callbacks=[hang] if hang is not None else [],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outage's
        first.fit()
    first.close()
    if proxy is not None:
        proxy.stop()
        store = S3ObjectStore(bucket, {"endpoint_url": endpoint_url})
        out["first_store"] = sorted(info.key.removeprefix("run/") for info in store.list_objects("run/"))
    out["first_local"] = local_checkpoints(folder / MACHINES[rank])
    rerun, model = trainer(MACHINES[1 - rank], endpoint_url, max_duration="16ba", autoresume=True)
    out["loaded"], out["at"] = str(rerun.checkpointing.loaded_path), int(rerun.state.timer.batch)
    rerun.fit()
    out["final"] = worker.weights(model)
    rerun.close()
    return out


def main() -> None:
    from tests.trainer import dist_worker as worker

    scenario, folder = sys.argv[1], Path(sys.argv[2])
    store = json.loads((folder / "store.json").read_text())
    assert scenario == "swapped_machines", scenario
    out = run_swapped_machines(folder, store["endpoint_url"], store["bucket"])
    torch.save(out, folder / f"swapped{dist.get_global_rank()}.pt")
    worker.end_job()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
