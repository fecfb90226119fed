"""Training against an S3-compatible store that hangs (moto on loopback behind tests.common.store_proxy), and the
``on_upload_failure`` policy: a hung store ends the run within about ``retry_budget`` under ``'raise'``; under
``'keep_local'`` training goes on, keeps the newest checkpoints locally, and uploads them once the store answers.
Then autoresume's choice of the newest sound checkpoint, local or remote: on one process, and on two ranks under
torchrun (which runs this file: ``main`` at the bottom) whose local folders differ."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import CheckpointSaver
from composer.utils import dist
from composer.utils.object_store import S3ObjectStore, UploadError
from tests.common import SimpleModel, make_dataloader
from tests.common.store_proxy import StoreProxy
from tests.distributed import launch

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")

BUDGET = 2.0  # retry_budget, in seconds
KEEP_LOCAL = r"on_upload_failure='keep_local': training goes on"


@pytest.fixture
def proxy(s3_env):
    proxy = StoreProxy(s3_env.endpoint_url).start()
    yield proxy
    proxy.stop()


def make_trainer(save_folder: str, local: Path, endpoint_url: str, **kwargs) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),  # 4 batches per epoch
        max_duration=kwargs.pop("max_duration", "16ba"),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        save_folder=save_folder,
        save_interval="2ba",
        save_num_checkpoints_to_keep=2,
        storage_options={"endpoint_url": endpoint_url, "local_folder": str(local), "retry_budget": BUDGET},
        run_name="faults",
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def wait_for_uploads(state) -> None:
    for callback in state.callbacks:
        if isinstance(callback, CheckpointSaver):
            callback.destination.wait()


class At(Callback):
    """At the end of the given batches: waits until no upload is pending, then calls the action."""

    def __init__(self, actions: dict[int, Callable[[], object]]) -> None:
        self.actions = actions

    def batch_end(self, state, logger):
        action = self.actions.get(state.timer.batch.value)
        if action is not None:
            wait_for_uploads(state)
            action()


class SaveTimes(Callback):
    """How long each save kept the training thread (from BATCH_CHECKPOINT, where the saver runs after this
    callback, to the next BATCH_START)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.durations: list[float] = []

    def batch_checkpoint(self, state, logger):
        self.started = time.monotonic()

    def batch_start(self, state, logger):
        if self.started is not None:
            self.durations.append(time.monotonic() - self.started)
            self.started = None


def local_checkpoints(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ep*-ba*-rank0.pt"))


def test_on_upload_failure_is_checked():
    with pytest.raises(ValueError, match=r"on_upload_failure='keep' is not a policy; expected one of \['raise', "):
        Trainer(model=SimpleModel(), train_dataloader=make_dataloader(), max_duration="1ba", on_upload_failure="keep")


def test_a_hung_store_ends_the_run_within_the_retry_budget(s3_env, proxy, tmp_path):
    """The store hangs after batch 3: the upload of batch 4 fails within about retry_budget, and the save that
    finds the queue full (batch 8) raises it; before, botocore's 60 s read timeout and its own retries ran first."""
    bucket = s3_env.create_bucket()
    hung_at: list[float] = []
    times = SaveTimes()
    trainer = make_trainer(
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
    trainer = make_trainer(
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

    fresh = make_trainer(f"s3://{bucket}/ckpt", tmp_path / "fresh", s3_env.endpoint_url, autoresume=True)
    assert fresh.checkpointing.loaded_path.name == "ep3-ba16-rank0.pt"
    for a, b in zip(trainer.state.model.parameters(), fresh.state.model.parameters(), strict=True):
        assert torch.equal(a, b)
    fresh.close()


# ---- autoresume: the newest sound checkpoint, local or remote ------------------------------------------------------


def test_autoresume_takes_newer_local_checkpoints_than_the_stores_and_uploads_them(s3_env, proxy, tmp_path):
    """The store hangs after batch 6 is in it, and stays down: the store holds batches 4 and 6, the local folder 6 to
    12, all intact. Rerun on the same machine (the store back), autoresume resumes from 12, not 6, and uploads the
    newest 2 of those the store lacks (12 and 10), then prunes it to 2."""
    bucket = s3_env.create_bucket()
    local = tmp_path / "local"
    first = make_trainer(
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

    rerun = make_trainer(f"s3://{bucket}/ckpt", local, s3_env.endpoint_url, autoresume=True)
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
