"""composer.utils.checkpoint.sharded_uploads: every rank uploads its own shards, rank 0 commits the checkpoint, and
``on_upload_failure='keep_local'`` trains through an outage, on two "nodes" whose local folders differ (the jobs:
sharded_store_job.py and sharded_outage_job.py, run once a session by the fixtures of this folder's conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.distributed.test_fsdp_trainer import assert_equal
from tests.utils.checkpoint.sharded_store_job import COMPLETED_BEFORE, SHARD_FILES, finish, start_job

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")


@pytest.mark.dist
def test_each_rank_uploads_its_shards_and_the_store_keeps_the_newest_two(sharded_store_job):
    keys = sharded_store_job["server"].keys(sharded_store_job["bucket"], "plain/")
    assert keys == [f"plain/{name}/{file}" for name in ("ep1-ba12", "ep1-ba8") for file in SHARD_FILES]
    # Each node's local folder keeps the newest checkpoint; node 1's holds its own shard only (no shared disk).
    assert sorted(p.name for p in (sharded_store_job["folder"] / "node0" / "plain").iterdir() if p.is_dir()) == [
        "ep1-ba12"
    ]
    assert sorted(p.name for p in (sharded_store_job["folder"] / "node1" / "plain" / "ep1-ba12").iterdir()) == [
        "__1_0.distcp"
    ]


@pytest.mark.dist
def test_sigkill_inside_a_shard_upload_then_autoresume_on_fresh_machines_is_bitwise_equal(sharded_store_job, tmp_path):
    server, bucket = sharded_store_job["server"], sharded_store_job["bucket"]
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
    assert_equal(resumed[0]["final"], sharded_store_job[0]["plain"])  # the full state is gathered on rank 0


@pytest.mark.dist
def test_keep_local_trains_through_an_outage_keeps_the_newest_locally_then_uploads_them(sharded_outage_job):
    server, bucket = sharded_outage_job["server"], sharded_outage_job["bucket"]
    assert len(sharded_outage_job[0]["warnings"]) == 1 and sharded_outage_job[1]["warnings"] == [], sharded_outage_job[
        0
    ]["warnings"]
    assert "did not answer" in sharded_outage_job[0]["warnings"][0], sharded_outage_job[0]["warnings"][0]
    # While the store hung (after batch 11), each node held the newest checkpoint the store had (batch 2) and the
    # newest 2 it lacked; node 1 only rank 1's shard of each.
    names = ["ep0-ba2", "ep1-ba10", "ep1-ba8"]
    assert sharded_outage_job[0]["during_outage"] == {
        name: [".metadata", "__0_0.distcp", "composer.pt"] for name in names
    }
    assert sharded_outage_job[1]["during_outage"] == {name: ["__1_0.distcp"] for name in names}
    # Once it answered: the newest 2, complete; nothing else (batch 4's shards, uploaded before the hang, went too).
    keys = server.keys(bucket, "outage/")
    assert keys == [f"outage/{name}/{file}" for name in ("ep1-ba12", "ep2-ba14") for file in SHARD_FILES]
    assert list(sharded_outage_job[0]["after_outage"]) == ["ep2-ba14"] and list(
        sharded_outage_job[1]["after_outage"]
    ) == ["ep2-ba14"]
    # Fresh machines resume from the store, bitwise.
    for rank in (0, 1):
        assert (
            Path(sharded_outage_job[rank]["fresh_loaded"]).name == "ep2-ba14"
            and sharded_outage_job[rank]["fresh_at"] == 14
        )
    assert_equal(sharded_outage_job[0]["fresh"], sharded_outage_job[0]["final"])
