"""A corpus of crafted checkpoints, generated here: each is refused with a clear error, and none runs code.

The attacker can write the checkpoint (or the bucket) and nothing else: every file of a sharded folder, and
``composer.pt``'s checksums, which :func:`reseal` recomputes as an attacker would (a checksum is no signature). The
payloads unpickle into ``Path.touch(marker)``: a stand-in for any code, which the tests check never ran
(:func:`test_the_payloads_are_real` shows that each does run when unpickled without the guards).

Sources: one sharded checkpoint per module, written by a 1-rank FSDP run over a process group of one; one-file
checkpoints built here. Entry points, all public: ``composer checkpoint convert`` (through the command's ``main``:
its exit status and standard error), the Trainer's ``load_path`` and its ``autoresume``, each from a local folder and
from an S3-compatible store (moto on loopback). Every case failed before the checks in
composer/utils/checkpoint/sharded_index.py (a bytes item ran its payload in all six ways in), except the one-file
payloads, which were already refused.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import pickle
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystemReader, _StorageInfo
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, MetadataIndex

from composer.cli.__main__ import main as composer_main
from composer.utils.checkpoint import CheckpointError
from composer.utils.checkpoint.local_io import atomic_write, write_torch
from composer.utils.checkpoint.remote_folder import SHA256_METADATA_KEY
from tests.distributed.test_fsdp_trainer import make_trainer, one_rank_loader
from tests.trainer import dist_worker as worker
from tests.utils.checkpoint.test_sharded import SHARDED

NAME = "ep0-ba2"  # the sharded checkpoint's folder (the default name of batch 2)
WEIGHT = "model/module.0.weight"  # a tensor of the layout: (16, 8), float32, in __0_0.distcp
SHARD = "__0_0.distcp"
OUTSIDE = "outside.distcp"  # a copy of the shard beside the folder: valid tensors, outside the checkpoint
ESCAPE = "escape.distcp"  # the same two levels up


class RunsCode:
    """Unpickles into ``Path.touch(marker)``: what an attacker's code would do, made visible."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


def payload(marker: Path) -> bytes:
    buffer = io.BytesIO()
    torch.save(RunsCode(marker), buffer)
    return buffer.getvalue()


# ---- crafting a sharded folder -------------------------------------------------------------------------------------


def read_index(folder: Path) -> Any:
    return pickle.loads((folder / ".metadata").read_bytes())  # the test's own folder: trusted


def write_index(folder: Path, index: Any) -> None:
    (folder / ".metadata").write_bytes(pickle.dumps(index))


def reseal(folder: Path, files: list[str] | None = None) -> None:
    """Rewrites composer.pt listing ``files`` (default: the ones it lists) with their SHA-256 and its own checksum."""
    state_file = folder / "composer.pt"
    checkpoint = torch.load(state_file, weights_only=True)
    names = list(checkpoint["files"]) if files is None else files
    checkpoint["files"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}
    atomic_write(state_file, lambda tmp: write_torch(checkpoint, tmp))


def as_bytes_item(folder: Path, name: str, data: bytes, file: str) -> None:
    """Declares the item ``name`` a bytes item (a pickle DCP unpickles), its bytes appended to ``file``."""
    with open(folder / file, "ab") as f:
        offset = f.tell()
        f.write(data)
    index = read_index(folder)
    index.state_dict_metadata[name] = BytesStorageMetadata()
    index.storage_data = {k: v for k, v in index.storage_data.items() if k.fqn != name}
    index.storage_data[MetadataIndex(name)] = _StorageInfo(file, offset, len(data))
    write_index(folder, index)


def point_weight_at(folder: Path, relative_path: str) -> None:
    """The weight's storage entry names ``relative_path`` (same offsets: a copy of the shard holds valid bytes)."""
    index = read_index(folder)
    for key, info in index.storage_data.items():
        if key.fqn == WEIGHT:
            info.relative_path = relative_path
    write_index(folder, index)


def bytes_weight(folder: Path, marker: Path) -> None:
    as_bytes_item(folder, WEIGHT, payload(marker), SHARD)
    reseal(folder)


def bytes_extra(folder: Path, marker: Path) -> None:
    as_bytes_item(folder, "model/extra", payload(marker), "extra.distcp")
    reseal(folder, [".metadata", SHARD, "extra.distcp"])


def pickle_index(folder: Path, marker: Path) -> None:
    (folder / ".metadata").write_bytes(pickle.dumps(RunsCode(marker)))
    reseal(folder)


def index_not_dcp(folder: Path, marker: Path) -> None:
    (folder / ".metadata").write_bytes(pickle.dumps({"state_dict_metadata": {}}))
    reseal(folder)


def pickle_shard(folder: Path, marker: Path) -> None:
    (folder / SHARD).write_bytes(payload(marker))
    reseal(folder)


def traversal_in_index(folder: Path, marker: Path) -> None:
    point_weight_at(folder, f"../{OUTSIDE}")
    reseal(folder)


def absolute_in_index(folder: Path, marker: Path) -> None:
    point_weight_at(folder, str((folder.parent / OUTSIDE).resolve()))
    reseal(folder)


def unlisted_in_index(folder: Path, marker: Path) -> None:
    shutil.copy(folder / SHARD, folder / "unlisted.distcp")
    point_weight_at(folder, "unlisted.distcp")
    reseal(folder)


def symlinked_shard(folder: Path, marker: Path) -> None:
    (folder / SHARD).unlink()
    (folder / SHARD).symlink_to(folder.parent / OUTSIDE)  # same bytes: the checksums still match
    reseal(folder)


def traversal_in_files(folder: Path, marker: Path) -> None:
    reseal(folder, [".metadata", SHARD, f"../{OUTSIDE}"])


def absolute_in_files(folder: Path, marker: Path) -> None:
    reseal(folder, [".metadata", SHARD, str((folder.parent / OUTSIDE).resolve())])


def escape_from_folder(folder: Path, marker: Path) -> None:
    """Lists a file two levels up: a download from the store would write it outside its local folder."""
    shutil.copy(folder / SHARD, folder.parent.parent / ESCAPE)
    reseal(folder, [".metadata", SHARD, f"../../{ESCAPE}"])


def other_dtype(folder: Path, marker: Path) -> None:
    index = read_index(folder)
    index.state_dict_metadata[WEIGHT].properties.dtype = torch.float64
    write_index(folder, index)
    reseal(folder)


def other_shape(folder: Path, marker: Path) -> None:
    index = read_index(folder)
    index.state_dict_metadata[WEIGHT].size = torch.Size([8, 16])
    write_index(folder, index)
    reseal(folder)


def no_index(folder: Path, marker: Path) -> None:
    (folder / ".metadata").unlink()
    reseal(folder, [SHARD])


def stream_transform(folder: Path, marker: Path) -> None:
    index = read_index(folder)
    for key, info in index.storage_data.items():
        if key.fqn == WEIGHT:
            info.transform_descriptors = ["zstandard"]
    write_index(folder, index)
    reseal(folder)


# Each case: how the folder is crafted, and what the error says (in the message, and in autoresume's list).
SHARDED_CASES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "bytes item for a weight": (bytes_weight, r"'model/module\.0\.weight' (as )?(is )?a bytes item"),
    "bytes item not in the layout": (bytes_extra, r"'model/extra' (as )?(is )?a bytes item"),
    "pickle in .metadata": (pickle_index, r"\.metadata refers to objects DCP never writes|refers to pathlib\.Path"),
    "not DCP's index": (index_not_dcp, r"\.metadata not DCP's|holds a dict, not DCP's index"),
    "shard replaced by a pickle": (pickle_shard, r"shard file __0_0\.distcp (does not )?hold"),
    "traversal in .metadata": (
        traversal_in_index,
        r"names '\.\./outside\.distcp'|'\.\./outside\.distcp' of \.metadata",
    ),
    "absolute path in .metadata": (absolute_in_index, r"outside\.distcp'.*(absolute path|not a file inside)"),
    "unlisted file in .metadata": (unlisted_in_index, r"(names the file 'unlisted\.distcp'|names an unlisted file)"),
    "shard symlinked out": (symlinked_shard, r"'__0_0\.distcp'.*(outside|not a file inside)"),
    "traversal in composer.pt": (traversal_in_files, r"'\.\./outside\.distcp'.*(not a plain file name|not a file)"),
    "escape in composer.pt": (escape_from_folder, r"'\.\./\.\./escape\.distcp'.*(not a plain file name|not a file)"),
    "absolute path in composer.pt": (absolute_in_files, r"outside\.distcp'.*(absolute path|not a file inside)"),
    "another dtype": (other_dtype, r"'model/module\.0\.weight' (as a torch\.float64 tensor|differs from the layout)"),
    "another shape": (other_shape, r"'model/module\.0\.weight' (as a torch\.float32 tensor of shape \(8, 16\)|differ)"),
    "no .metadata": (no_index, r"does not list DCP's index|\.metadata not listed"),
    "stream transform": (stream_transform, r"storage entry for 'model/module\.0\.weight'.*(transforms|entry)"),
}


LOCAL_CASES = list(SHARDED_CASES)
# Through the store: the payloads, and the names a download would write (a symlink does not survive an upload).
REMOTE_CASES = [
    "bytes item for a weight",
    "bytes item not in the layout",
    "pickle in .metadata",
    "shard replaced by a pickle",
    "traversal in .metadata",
    "traversal in composer.pt",
    "escape in composer.pt",
    "absolute path in composer.pt",
    "no .metadata",
]
# Each Trainer over the store costs about half a second: the code-running payload and the names a download writes.
REMOTE_TRAINER_CASES = ["bytes item for a weight", "traversal in composer.pt", "escape in composer.pt", "no .metadata"]


# ---- sources and entry points ---------------------------------------------------------------------------------------


def init_group_of_one(folder: Path) -> None:
    store = torch_dist.FileStore(str(folder / "process-group"), 1)
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A sharded checkpoint of 2 batches, by a 1-rank FSDP run."""
    folder = tmp_path_factory.mktemp("crafted_source")
    init_group_of_one(folder)
    try:
        model = worker.make_model(seed=0)
        make_trainer(
            model,
            one_rank_loader(),
            fsdp_config=SHARDED,
            save_folder=str(folder),
            save_interval="2ba",
            max_duration="2ba",
        ).fit()
    finally:
        torch_dist.destroy_process_group()
    return folder / NAME


@pytest.fixture
def group_of_one(tmp_path) -> Iterator[None]:
    init_group_of_one(tmp_path)
    yield
    torch_dist.destroy_process_group()


@pytest.fixture
def marker(tmp_path) -> Iterator[Path]:
    """The file a payload would create; no test may leave it."""
    marker = tmp_path / "pwned"
    yield marker
    assert not marker.exists(), "a crafted checkpoint ran code"


def craft(source: Path, tmp_path: Path, case: str, marker: Path) -> Path:
    """A crafted copy of ``source`` as ``tmp_path/crafted/ep0-ba2``, with a copy of its shard beside it."""
    folder = tmp_path / "crafted" / NAME
    shutil.copytree(source, folder)
    shutil.copy(source / SHARD, folder.parent / OUTSIDE)
    SHARDED_CASES[case][0](folder, marker)
    return folder


def assert_refused(message: str, case: str) -> None:
    __tracebackhide__ = True
    assert re.search(SHARDED_CASES[case][1], message), message


def convert(src: str, dst: Path, capsys: Any, *extra: str) -> str:
    """``composer checkpoint convert``: asserts exit status 2, one line of error and no file written; returns it."""
    assert composer_main(["checkpoint", "convert", src, str(dst), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("composer checkpoint: error:") and "\n" not in err and "Traceback" not in err, err
    assert not dst.is_file()
    return err


def sharded_trainer(**kwargs: Any) -> Any:
    return make_trainer(worker.make_model(seed=1), one_rank_loader(), fsdp_config=SHARDED, **kwargs)


@pytest.fixture(scope="module")
def client(s3_server) -> Any:
    """One client of the session's S3 server for the module's uploads (each client costs a few tenths of a second)."""
    return s3_server.client()


def upload(client: Any, files: dict[str, Path]) -> str:
    """Puts each file into a new bucket under its key, with its SHA-256 as a run uploads it; returns the bucket."""
    bucket = f"crafted-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    for key, path in files.items():
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        client.put_object(Bucket=bucket, Key=key, Body=data, Metadata={SHA256_METADATA_KEY: digest})
    return bucket


def upload_sharded(client: Any, folder: Path) -> str:
    """The folder as ``run/ep0-ba2``: every file its composer.pt lists, then composer.pt."""
    names = [*torch.load(folder / "composer.pt", weights_only=True)["files"], "composer.pt"]
    return upload(client, {f"run/{NAME}/{name}": folder / name for name in names})


def written_outside(root: Path) -> list[Path]:
    """Files under ``root`` (a machine's local folders) that are not inside a checkpoint's folder."""
    return [p for p in root.rglob("*") if p.is_file() and NAME not in p.relative_to(root).parts[:-1]]


# ---- the payloads are real ----------------------------------------------------------------------------------------


def test_the_payloads_are_real(tmp_path):
    marker = tmp_path / "pwned"
    torch.load(io.BytesIO(payload(marker)), weights_only=False)
    assert marker.exists()


# ---- sharded, local ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", LOCAL_CASES)
def test_convert_refuses_a_crafted_folder(case, source, tmp_path, marker, capsys):
    folder = craft(source, tmp_path, case, marker)
    err = convert(str(folder), tmp_path / "out.pt", capsys)
    assert "checkpoint convert SRC: " in err
    assert_refused(err, case)


@pytest.mark.parametrize("case", LOCAL_CASES)
def test_load_path_refuses_a_crafted_folder(case, source, tmp_path, marker, group_of_one):
    folder = craft(source, tmp_path, case, marker)
    with pytest.raises(CheckpointError) as caught:
        sharded_trainer(load_path=str(folder))
    assert_refused(str(caught.value), case)


@pytest.mark.parametrize("case", LOCAL_CASES)
def test_autoresume_refuses_a_crafted_folder(case, source, tmp_path, marker, group_of_one):
    folder = craft(source, tmp_path, case, marker)
    with pytest.raises(CheckpointError) as caught:  # passed over (none can be resumed), or refused when loaded
        sharded_trainer(save_folder=str(folder.parent), autoresume=True, run_name="crafted")
    assert_refused(str(caught.value), case)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_the_planner_unpickles_bytes_items_with_weights_only(source, tmp_path, marker):
    """Defense in depth: DCP's own reader, past every check, through SafeLoadPlanner runs nothing either."""
    from torch.distributed.checkpoint.state_dict_loader import load

    from composer.utils.checkpoint.sharded_reader import SafeLoadPlanner

    folder = craft(source, tmp_path, "bytes item for a weight", marker)
    with pytest.raises(CheckpointException) as caught:
        load({WEIGHT: torch.empty(16, 8)}, storage_reader=FileSystemReader(folder), planner=SafeLoadPlanner())
    error = caught.value.failures[0][0]
    assert isinstance(error, CheckpointError)
    assert re.search(r"bytes item 'model/module\.0\.weight' .* could run code", str(error)), error


# ---- sharded, in a store -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", REMOTE_CASES)
def test_convert_refuses_a_crafted_folder_in_a_store(
    case, source, tmp_path, marker, s3_env, client, capsys, monkeypatch
):
    bucket = upload_sharded(client, craft(source, tmp_path, case, marker))
    scratch = tmp_path / "machine"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # convert downloads into a temporary folder in it
    err = convert(f"s3://{bucket}/run/{NAME}", tmp_path / "out.pt", capsys, "--endpoint-url", s3_env.endpoint_url)
    assert_refused(err, case)
    assert written_outside(scratch) == []


@pytest.mark.parametrize("case", REMOTE_TRAINER_CASES)
def test_load_path_refuses_a_crafted_folder_in_a_store(case, source, tmp_path, marker, s3_env, client, group_of_one):
    bucket = upload_sharded(client, craft(source, tmp_path, case, marker))
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "machine" / "local")}
    with pytest.raises(CheckpointError) as caught:
        sharded_trainer(load_path=f"s3://{bucket}/run/{NAME}", storage_options=options)
    assert_refused(str(caught.value), case)
    assert written_outside(tmp_path / "machine") == []


@pytest.mark.parametrize("case", REMOTE_TRAINER_CASES)
def test_autoresume_refuses_a_crafted_folder_in_a_store(case, source, tmp_path, marker, s3_env, client, group_of_one):
    bucket = upload_sharded(client, craft(source, tmp_path, case, marker))
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "machine" / "local")}
    with pytest.raises(CheckpointError) as caught:
        sharded_trainer(save_folder=f"s3://{bucket}/run", autoresume=True, run_name="crafted", storage_options=options)
    assert_refused(str(caught.value), case)
    assert written_outside(tmp_path / "machine") == []


@pytest.mark.parametrize("case", REMOTE_TRAINER_CASES)
def test_autoresume_from_a_store_refuses_a_crafted_local_copy_and_uploads_nothing(
    case, source, tmp_path, marker, s3_env, group_of_one
):
    """A run whose uploads failed leaves its newest checkpoints in the store's local folder: crafted there, it is
    passed over, neither uploaded nor loaded."""
    folder = craft(source, tmp_path, case, marker)
    bucket = s3_env.create_bucket()
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(folder.parent)}
    with pytest.raises(CheckpointError) as caught:
        sharded_trainer(save_folder=f"s3://{bucket}/run", autoresume=True, run_name="crafted", storage_options=options)
    assert_refused(str(caught.value), case)
    assert s3_env.keys(bucket) == []


def test_a_download_does_not_follow_a_symlink_out_of_the_local_folder(source, tmp_path, s3_env, client, group_of_one):
    bucket = upload_sharded(client, source)
    local, elsewhere = tmp_path / "local", tmp_path / "elsewhere"
    local.mkdir()
    elsewhere.mkdir()
    (local / NAME).symlink_to(elsewhere)
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(local)}
    with pytest.raises(CheckpointError, match=r"'ep0-ba2/composer\.pt' of the store folder .* outside"):
        sharded_trainer(load_path=f"s3://{bucket}/run/{NAME}", storage_options=options)
    assert list(elsewhere.iterdir()) == []


# ---- one file ------------------------------------------------------------------------------------------------------


def one_file(path: Path, marker: Path, writer: str) -> Path:
    """A one-file checkpoint whose state unpickles into the payload: with composer's checksum, or a plain pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = {"format_version": 1, "metadata": {}, "state": {"model": {}, "timer": RunsCode(marker)}}
    if writer == "torch.save":
        atomic_write(path, lambda tmp: write_torch(checkpoint, tmp))
    else:
        path.write_bytes(pickle.dumps(checkpoint, protocol=2))
    return path


@pytest.mark.parametrize("writer", ["torch.save", "pickle"])
@pytest.mark.parametrize("where", ["local", "store"])
def test_a_one_file_payload_is_refused_by_load_path_and_autoresume(writer, where, tmp_path, marker, request):
    path = one_file(tmp_path / "crafted" / "ep0-ba2-rank0.pt", marker, writer)
    if where == "local":
        load_path, save_folder, options = str(path), str(path.parent), None
    else:
        server = request.getfixturevalue("s3_env")
        bucket = upload(request.getfixturevalue("client"), {f"run/{path.name}": path})
        load_path, save_folder = f"s3://{bucket}/run/{path.name}", f"s3://{bucket}/run"
        options = {"endpoint_url": server.endpoint_url, "local_folder": str(tmp_path / "local")}
    model = worker.make_model(seed=1)
    with pytest.raises(CheckpointError, match=r"Refusing to load .*ep0-ba2-rank0\.pt.*could run code"):
        make_trainer(model, one_rank_loader(), load_path=load_path, storage_options=options)
    with pytest.raises(CheckpointError, match=r"none can be resumed: ep0-ba2-rank0\.pt: .*could run code"):
        make_trainer(model, one_rank_loader(), save_folder=save_folder, autoresume=True, storage_options=options)


# ---- convert's other refusals ------------------------------------------------------------------------------------


def test_convert_refuses_an_existing_folder_as_destination(source, tmp_path, capsys):
    err = convert(str(source), tmp_path, capsys)
    assert f"checkpoint convert DST: {tmp_path} is an existing folder" in err and f"{tmp_path / NAME}.pt" in err


def test_convert_names_a_destination_it_cannot_write(source, tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    err = convert(str(source), tmp_path / "a-file" / "out.pt", capsys)
    assert (
        f"into {tmp_path / 'a-file' / 'out.pt'} failed (FileExistsError: " in err and "check that DST's folder" in err
    )


def test_convert_refuses_a_store_folder_without_its_index(source, tmp_path, s3_env, client, capsys):
    bucket = upload_sharded(client, source)
    client.delete_object(Bucket=bucket, Key=f"run/{NAME}/.metadata")
    err = convert(f"s3://{bucket}/run/{NAME}", tmp_path / "out.pt", capsys, "--endpoint-url", s3_env.endpoint_url)
    assert f"s3://{bucket}/run/{NAME}/.metadata is missing in the store" in err
