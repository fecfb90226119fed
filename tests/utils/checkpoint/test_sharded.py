"""Sharded FSDP checkpoints (``fsdp_config={'state_dict_type': 'sharded'}``): every rank writes its own shards.

One torchrun job of 2 CPU ranks runs this file as its script (``main``, at the bottom): an uninterrupted sharded run,
a run stopped at batch 8 and resumed by ``autoresume`` past a partial and an incomplete folder, and a run resumed
from a checkpoint saved by one process. In this process, over a process group of one: the 1-rank sharded run whose
checkpoint the job loads (1 -> 2), a 1-rank run resumed from the job's checkpoint (2 -> 1), and the conversion of a
sharded checkpoint into one file that an unsharded run loads. The references are those runs' own uninterrupted
weights (bitwise, for a resume on the same number of ranks) and tests/distributed/test_fsdp_trainer.py's 1-process runs.
"""

from __future__ import annotations

import datetime
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist

from composer.cli.__main__ import main as composer_main
from composer.distributed.fsdp import full_model_state_dict
from composer.trainer import Trainer
from composer.utils import dist
from composer.utils.checkpoint import CheckpointError, convert_sharded_to_full, read_checkpoint
from tests.distributed import launch
from tests.distributed.test_fsdp_trainer import UNITS, assert_close, assert_equal, fsdp_trainer, make_trainer
from tests.distributed.test_fsdp_trainer import one_rank_loader as one_rank_loader
from tests.distributed.test_fsdp_trainer import weights as plain_weights
from tests.trainer import dist_worker as worker

SHARDED = {**UNITS, "state_dict_type": "sharded"}
ONE_RANK = "one_rank"  # the subfolder of the job's folder with the 1-rank sharded run's checkpoints


# ---- the 2-rank job (each rank runs this) -------------------------------------------------------------------------


def run_job(folder: Path) -> dict[str, Any]:
    rank = dist.get_global_rank()
    out: dict[str, Any] = {}
    model = worker.make_model(seed=rank)
    trainer = fsdp_trainer(
        model,
        fsdp_config=SHARDED,
        save_folder=str(folder / "sharded"),
        save_interval="4ba",
        save_num_checkpoints_to_keep=2,
    )
    trainer.fit()
    out["plain"] = full_model_state_dict(model)
    trainer.close()

    # A run that stops at batch 8, then autoresume: the newest folder is incomplete (no composer.pt) and a crashed
    # save left a temporary folder; both are passed over, and the run resumes from batch 8.
    model = worker.make_model(seed=0)
    auto = {"save_folder": str(folder / "auto"), "save_interval": "4ba", "autoresume": True, "run_name": "auto"}
    fsdp_trainer(model, fsdp_config=SHARDED, max_duration="8ba", **auto).fit()
    if rank == 0:
        (folder / "auto" / "ep2-ba16").mkdir()
        (folder / "auto" / "ep2-ba16" / "__0_0.distcp").write_bytes(b"partial")
        (folder / "auto" / ".ep1-ba12.tmp-999999999").mkdir()
    dist.barrier()
    model = worker.make_model(seed=100 + rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fsdp_trainer(model, fsdp_config=SHARDED, **auto)
    out["auto_warnings"] = [str(w.message) for w in caught]
    out["auto_loaded"] = str(trainer.checkpointing.loaded_path)
    out["auto_at"] = int(trainer.state.timer.batch)
    trainer.fit()
    out["auto"] = full_model_state_dict(model)
    trainer.close()

    # 1 -> 2: the 1-rank sharded run's checkpoint, resharded by DCP.
    model = worker.make_model(seed=100 + rank)
    trainer = fsdp_trainer(model, fsdp_config=SHARDED, load_path=folder / ONE_RANK / "ep0-ba4")
    out["from_one_rank_at"] = int(trainer.state.timer.sample)
    trainer.fit()
    out["from_one_rank"] = full_model_state_dict(model)
    return out


def main() -> None:
    folder = Path(sys.argv[2])
    out = run_job(folder)
    torch.save(out, folder / f"rank{dist.get_global_rank()}.pt")
    worker.end_job()


# ---- one process over a process group of one; the job -----------------------------------------------------------


def group_of_one(folder: Path) -> None:
    store = torch_dist.FileStore(str(folder / "store"), 1)
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))


def resume_on_one_rank(folder: Path, **kwargs: Any) -> tuple[Trainer, int, dict[str, torch.Tensor]]:
    """Loads a 2-rank sharded checkpoint (named by ``kwargs``) into a fresh model (seed 7) on a process group of one
    and trains it to the end; returns the closed Trainer, the batch it resumed at and its final full state."""
    group_of_one(folder)
    try:
        model = worker.make_model(seed=7)
        trainer = make_trainer(model, one_rank_loader(), fsdp_config=SHARDED, **kwargs)
        resumed_at = int(trainer.state.timer.batch)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "was saved by 2 ranks")
            trainer.fit()
        final = full_model_state_dict(model)
        trainer.close()
    finally:
        torch_dist.destroy_process_group()
    return trainer, resumed_at, final


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory) -> dict[str, Any]:
    """The sharded run of one rank (batch 2B) whose checkpoint at batch 4 the job loads; its final weights."""
    folder = tmp_path_factory.mktemp("sharded_checkpoint")
    group_of_one(folder)
    try:
        model = worker.make_model(seed=0)
        make_trainer(
            model, one_rank_loader(), fsdp_config=SHARDED, save_folder=str(folder / ONE_RANK), save_interval="4ba"
        ).fit()
        final = full_model_state_dict(model)
    finally:
        torch_dist.destroy_process_group()
    return {"folder": folder, "final": final}


@pytest.fixture(scope="module")
def job(one_rank) -> dict[Any, Any]:
    folder = one_rank["folder"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launch, "WORKER", Path(__file__))
        result = launch.torchrun("sharded", folder)
    if result.returncode != 0:
        pytest.fail(f"The 2-rank job failed ({result.returncode}):\n{result.stdout[-5000:]}\n{result.stderr[-10000:]}")
    return {"folder": folder, **{r: torch.load(folder / f"rank{r}.pt", weights_only=False) for r in (0, 1)}}


# ---- two ranks -------------------------------------------------------------------------------------------------------


@pytest.mark.dist
def test_every_rank_writes_its_shards_into_one_folder_and_the_oldest_are_pruned(job):
    folder = job["folder"] / "sharded"
    assert sorted(p.name for p in folder.iterdir()) == ["ep1-ba12", "ep1-ba8", "latest"]
    assert (folder / "latest").resolve() == (folder / "ep1-ba12").resolve()
    files = sorted(p.name for p in (folder / "ep1-ba12").iterdir())
    assert files == [".metadata", "__0_0.distcp", "__1_0.distcp", "composer.pt"]
    checkpoint = read_checkpoint(folder / "ep1-ba12")  # composer.pt read with weights_only; the shards' checksums
    assert checkpoint["metadata"]["sharded"] and checkpoint["metadata"]["world_size"] == 2
    assert set(checkpoint["files"]) == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert "model" not in checkpoint["state"] and len(checkpoint["state"]["rank_states"]) == 2
    assert not any(isinstance(v, torch.Tensor) for v in checkpoint["state"]["optimizers"][0]["state"][0].values())
    assert int(checkpoint["state"]["timer"]["batch"]) == 12


@pytest.mark.dist
def test_sharded_training_ends_where_one_rank_does(job, one_rank):
    assert_close(job[0]["plain"], one_rank["final"])
    assert job[1]["plain"] == {}


@pytest.mark.dist
def test_autoresume_passes_over_partial_folders_and_resumes_bitwise(job):
    for rank in (0, 1):
        assert Path(job[rank]["auto_loaded"]).name == "ep1-ba8" and job[rank]["auto_at"] == 8
    assert any("ep2-ba16: an incomplete sharded checkpoint (no composer.pt)" in w for w in job[0]["auto_warnings"])
    assert not (job["folder"] / "auto" / ".ep1-ba12.tmp-999999999").exists()  # removed at the next run's start
    assert_equal(job[0]["auto"], job[0]["plain"])  # bit for bit the uninterrupted run


@pytest.mark.dist
def test_a_one_rank_checkpoint_resumes_on_two_ranks(job, one_rank):
    assert job[0]["from_one_rank_at"] == job[1]["from_one_rank_at"] == 4 * 2 * worker.PER_RANK_BATCH
    assert_close(job[0]["from_one_rank"], one_rank["final"])


@pytest.mark.dist
def test_a_two_rank_checkpoint_resumes_on_one_rank(job, one_rank, tmp_path):
    _, resumed_at, final = resume_on_one_rank(tmp_path, load_path=job["folder"] / "sharded" / "ep1-ba8")
    assert resumed_at == 8
    assert_close(final, job[0]["plain"])
    assert_close(final, one_rank["final"])


@pytest.mark.dist
def test_a_converted_checkpoint_loads_into_an_unsharded_run_with_the_same_weights(job, tmp_path, capsys):
    source = job["folder"] / "sharded" / "ep1-ba12"
    converted = convert_sharded_to_full(source, tmp_path / "full.pt")
    full = read_checkpoint(converted)
    assert not full["metadata"]["sharded"] and full["metadata"]["converted_from"] == str(source)
    assert_equal(full["state"]["model"], job[0]["plain"])
    # The momentum buffers as an unsharded run numbers them, whole.
    shapes = [tuple(p.shape) for p in worker.make_model(seed=0).parameters()]
    momentum = full["state"]["optimizers"][0]["state"]
    assert [tuple(momentum[i]["momentum_buffer"].shape) for i in range(4)] == shapes
    model = worker.make_model(seed=3)
    trainer = make_trainer(model, one_rank_loader(), load_path=converted)
    assert int(trainer.state.timer.batch) == 12
    assert_equal(plain_weights(model), job[0]["plain"])
    # The same through the command line.
    assert composer_main(["checkpoint", "convert", str(source), str(tmp_path / "cli.pt")]) == 0
    assert f"wrote {tmp_path / 'cli.pt'}" in capsys.readouterr().out
    assert_equal(read_checkpoint(tmp_path / "cli.pt")["state"]["model"], job[0]["plain"])


def upload_sharded(server, source: Path, tmp_path: Path) -> str:
    """Uploads the sharded checkpoint folder ``source`` to a new bucket as ``run/<its name>`` as a run would (each
    file with its SHA-256, composer.pt last); returns the bucket."""
    from composer.utils.checkpoint import RemoteCheckpointFolder
    from composer.utils.object_store import ObjectStoreURL

    bucket = server.create_bucket("sharded")
    options = {"endpoint_url": server.endpoint_url, "local_folder": str(tmp_path / "upload")}
    store = RemoteCheckpointFolder.open(ObjectStoreURL(bucket, "run"), options, "save_folder", write=True)
    files = sorted(p.name for p in source.iterdir())
    store.upload_files(source, source.name, [f for f in files if f != "composer.pt"] + ["composer.pt"])
    return bucket


@pytest.mark.dist
def test_a_sharded_load_path_in_an_object_store_resumes_like_the_local_folder(job, one_rank, tmp_path, s3_env):
    bucket = upload_sharded(s3_env, job["folder"] / "sharded" / "ep1-ba8", tmp_path)
    trainer, resumed_at, final = resume_on_one_rank(
        tmp_path,
        load_path=f"s3://{bucket}/run/ep1-ba8",
        storage_options={"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "download")},
    )
    assert resumed_at == 8
    assert trainer.checkpointing.loaded_path == tmp_path / "download" / "ep1-ba8"
    assert_close(final, one_rank["final"])  # as from the local folder (the test above)


@pytest.mark.dist
def test_a_sharded_checkpoint_in_an_object_store_converts_from_its_url(job, tmp_path, s3_env, capsys):
    bucket = upload_sharded(s3_env, job["folder"] / "sharded" / "ep1-ba12", tmp_path)
    url = f"s3://{bucket}/run/ep1-ba12"
    out = tmp_path / "from-store.pt"
    argv = ["checkpoint", "convert", url, str(out), "--endpoint-url", s3_env.endpoint_url]
    assert composer_main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_equal(read_checkpoint(out)["state"]["model"], job[0]["plain"])
    # A folder whose upload never finished (no composer.pt) is refused by name, with exit status 2.
    s3_env.client().delete_object(Bucket=bucket, Key="run/ep1-ba12/composer.pt")
    assert composer_main(argv) == 2
    assert "its upload never finished" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("s3://ckpt-bucket", "names a bucket, not a checkpoint folder; give the folder, e.g. s3://ckpt-bucket/run/"),
        ("gs://ckpt-bucket/run/ep1-ba6", "uses the scheme 'gs://', which is not supported"),
    ],
)
def test_convert_refuses_a_source_url_it_cannot_read_naming_it(src, message, tmp_path, capsys):
    assert composer_main(["checkpoint", "convert", src, str(tmp_path / "out.pt")]) == 2
    err = capsys.readouterr().err
    assert "checkpoint convert SRC" in err and message in err
    assert not (tmp_path / "out.pt").exists()


# ---- damaged and misused checkpoints ----------------------------------------------------------------------------------


@pytest.mark.dist
def test_a_sharded_checkpoint_without_fsdp_says_how_to_convert_it(job):
    with pytest.raises(CheckpointError, match=r"is a sharded checkpoint .* `composer checkpoint convert .*ep1-ba12"):
        make_trainer(worker.make_model(seed=0), one_rank_loader(), load_path=job["folder"] / "sharded" / "ep1-ba12")
    with pytest.raises(CheckpointError, match=r"src must be a sharded checkpoint's folder .* already a full"):
        convert_sharded_to_full(job["folder"] / "rank0.pt", job["folder"] / "x.pt")
    assert composer_main(["checkpoint", "convert", str(job["folder"] / "nowhere"), "x.pt"]) == 2


@pytest.mark.dist
def test_damaged_shards_are_refused(job, tmp_path):
    copy = tmp_path / "ep1-ba12"
    shutil.copytree(job["folder"] / "sharded" / "ep1-ba12", copy)
    shard = copy / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"__1_0.distcp failed its checksum"):
        read_checkpoint(copy)
    shard.unlink()
    with pytest.raises(CheckpointError, match=r"missing its shard file __1_0.distcp"):
        read_checkpoint(copy)
    (copy / "composer.pt").unlink()
    with pytest.raises(CheckpointError, match=r"an incomplete sharded checkpoint"):
        read_checkpoint(copy)
    # Crafted folders (a pickle in the index, bytes items, names out of the folder): test_sharded_index.py


if __name__ == "__main__":
    main()
