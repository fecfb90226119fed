"""composer.utils.checkpoint.sharded_mirror: autoresume of sharded checkpoints from a store and the ranks' local
folders, on two "nodes" whose local folders differ: the newest complete checkpoint, made complete in the store, then
downloaded by every node (the jobs: sharded_store_job.py and sharded_outage_job.py, run once a session by the
fixtures of this folder's conftest.py); and a 2-rank checkpoint in the store resumed on one rank (2 -> 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.test_fsdp_trainer import assert_close, assert_equal
from tests.utils.checkpoint.sharded_store_job import SHARD_FILES
from tests.utils.checkpoint.test_sharded import resume_on_one_rank

pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")


@pytest.mark.dist
def test_autoresume_downloads_the_newest_complete_folder_on_each_node_and_resumes_bitwise(sharded_store_job):
    for rank in (0, 1):
        assert (
            Path(sharded_store_job[rank]["auto_loaded"]).name == "ep1-ba8" and sharded_store_job[rank]["auto_at"] == 8
        )
        assert Path(sharded_store_job[rank]["auto_loaded"]).parent.name == f"n{rank}"  # each node its own copy
    warning = next(w for w in sharded_store_job[0]["auto_warnings"] if "autoresume skips" in w)
    assert "ep2-ba16: shard file __1_0.distcp does not carry the checksum listed in the store" in warning
    assert "ep2-ba14: an unfinished upload (no composer.pt in the store)" in warning
    assert_equal(sharded_store_job[0]["auto"], sharded_store_job[0]["plain"])
    # Pruned to two by the resumed run: the stopped run's ep0-ba4 and the damaged ep2-ba16 went; the unfinished
    # ep2-ba14 ranks newer than the newest checkpoint, so it stays (it could be an upload in progress); never used.
    keys = sharded_store_job["server"].keys(sharded_store_job["bucket"], "auto/")
    expected = [f"auto/{name}/{file}" for name in ("ep1-ba12", "ep1-ba8") for file in SHARD_FILES]
    assert keys == sorted([*expected, "auto/ep2-ba14/__1_0.distcp"])


@pytest.mark.dist
def test_a_two_rank_checkpoint_in_the_store_resumes_on_one_rank(sharded_store_job, s3_env, tmp_path):
    client, bucket = s3_env.client(), sharded_store_job["bucket"]
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
    assert_close(final, sharded_store_job[0]["plain"])


@pytest.mark.dist
def test_a_rerun_resumes_from_the_newest_checkpoint_split_across_the_local_folders_and_uploads_it(sharded_outage_job):
    server, bucket = sharded_outage_job["server"], sharded_outage_job["bucket"]
    shards_of_6 = ["lost/ep0-ba6/__0_0.distcp", "lost/ep0-ba6/__1_0.distcp"]  # its commit never came
    complete = [f"lost/{name}/{file}" for name in ("ep0-ba2", "ep0-ba4") for file in SHARD_FILES]
    assert sharded_outage_job[0]["lost_store"] == complete + shards_of_6
    own = {0: [".metadata", "__0_0.distcp", "composer.pt"], 1: ["__1_0.distcp"]}
    for rank in (0, 1):
        assert sharded_outage_job[rank]["lost_local"] == {
            name: own[rank] for name in ("ep0-ba4", "ep1-ba10", "ep1-ba12")
        }
        # The ranks agreed on batch 12, held only by the local folders, and each node downloaded what it lacked.
        assert sharded_outage_job[rank]["rerun_loaded"] == str(
            sharded_outage_job["folder"] / f"node{rank}" / "lost" / "ep1-ba12"
        )
        assert sharded_outage_job[rank]["rerun_at"] == 12
        assert sharded_outage_job[rank]["rerun_local"]["ep1-ba12"] == SHARD_FILES
    assert_equal(sharded_outage_job[0]["rerun"], sharded_outage_job[0]["final"])
    keys = server.keys(bucket, "lost/")
    assert keys == [f"lost/{name}/{file}" for name in ("ep1-ba12", "ep2-ba14") for file in SHARD_FILES]
