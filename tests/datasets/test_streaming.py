"""streaming: LitData shards from a folder or the loopback S3 store, checked when built, resumed mid-epoch without
reading the epoch's data again, bitwise."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from litdata.streaming.writer import BinaryWriter

from composer import Callback, Trainer
from composer.config import ConfigError, TrainerHparams
from composer.core import DataSpec
from composer.datasets.streaming import StreamError, StreamingShards
from composer.distributed.data import distribute_train_data
from composer.models import ComposerClassifier
from composer.utils.object_store import S3ObjectStore

NUM_SAMPLES = 60
REPO = Path(__file__).resolve().parents[2]


def write_shards(folder, chunk_size=8):
    """Seeded (vector, label) samples, ``chunk_size`` a shard; the label is the sample's number mod 3."""
    generator = np.random.default_rng(0)
    writer = BinaryWriter(str(folder), chunk_size=chunk_size)
    for i in range(NUM_SAMPLES):
        writer[i] = (torch.from_numpy(generator.standard_normal(8).astype(np.float32)), i % 3)
    writer.done()
    writer.merge()
    return folder


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp("shards") / "shards")


def labels(loader):
    return [label for _, batch_labels in loader for label in batch_labels.tolist()]


def test_the_evaluation_stream_is_every_sample_in_order_and_training_a_seeded_permutation(shards):
    data = StreamingShards(str(shards), num_workers=0)
    assert len(data) == NUM_SAMPLES
    assert labels(data.dataloader(batch_size=7, train=False)) == [i % 3 for i in range(NUM_SAMPLES)]
    inputs = [x for x, _ in data.dataloader(batch_size=6, train=True, seed=4)]
    again = [x for x, _ in data.dataloader(batch_size=6, train=True, seed=4)]
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))
    ordered = torch.cat([x for x, _ in data.dataloader(batch_size=6, train=False)])
    shuffled = torch.cat(inputs)
    assert not torch.equal(shuffled, ordered)
    assert sorted(map(tuple, shuffled.tolist())) == sorted(map(tuple, ordered.tolist()))


def test_shards_stream_from_the_store_with_the_checkpoints_storage_options(shards, s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    store = S3ObjectStore(bucket, {"endpoint_url": s3_env.endpoint_url})
    for file in sorted(shards.iterdir()):
        store.upload(str(file), f"data/{file.name}")
    options = {"endpoint_url": s3_env.endpoint_url, "retry_budget": 8, "local_folder": str(tmp_path / "cache")}
    data = StreamingShards(f"s3://{bucket}/data", storage_options=options, num_workers=2)
    assert sorted(labels(data.dataloader(batch_size=5, train=True, seed=1))) == sorted(i % 3 for i in range(60))
    fresh = {**options, "local_folder": str(tmp_path / "fresh")}  # nothing downloaded yet
    batches = iter(StreamingShards(f"s3://{bucket}/data", storage_options=fresh).dataloader(4, train=False))
    next(batches)  # from shard 0
    for shard in range(1, 8):
        store.delete(f"data/chunk-0-{shard}.bin")
    missing = (
        rf"^path: reading shard chunk-0-\d\.bin of s3://{bucket}/data failed \(.*An error occurred \((404|NoSuchKey)\)"
    )
    with pytest.raises(StreamError, match=missing):
        list(batches)  # gone mid-epoch: the worker's error names the shard, after at most retry_budget
    with pytest.raises(ValueError, match=rf"shard chunk-0-1.bin of s3://{bucket}/data is missing"):
        StreamingShards(f"s3://{bucket}/data", storage_options=options)


def test_missing_damaged_and_unindexed_shards_are_refused_naming_the_shard_and_the_key(tmp_path):
    folder = write_shards(tmp_path / "shards")
    recipe = {
        "model": {"mlp": {"in_features": 8, "hidden": [8], "num_classes": 3}},
        "train_dataset": {"streaming": {"path": str(folder)}},
        "train_batch_size": 4,
        "max_duration": "2ba",
        "progress_bar": False,
    }
    trainer = TrainerHparams.from_dict(recipe).initialize_object()
    trainer.fit()
    assert trainer.state.timestamp.batch.value == 2
    trainer.close()
    with open(folder / "chunk-0-3.bin", "ab") as shard:
        shard.write(b"garbage")
    with pytest.raises(
        ConfigError,
        match=r"train_dataset.streaming: path: shard chunk-0-3.bin of .* holds 431 bytes, but index.json says 424",
    ):
        TrainerHparams.from_dict(recipe).initialize_object()
    (folder / "chunk-0-3.bin").unlink()
    with pytest.raises(ConfigError, match=r"train_dataset.streaming: path: shard chunk-0-3.bin of .* is missing"):
        TrainerHparams.from_dict(recipe).initialize_object()
    (folder / "index.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(ValueError, match="is not a LitData index"):
        StreamingShards(str(folder))


def test_a_run_resumed_mid_epoch_with_workers_ends_bitwise_equal_without_reading_the_epoch_again(shards, tmp_path):
    data = StreamingShards(str(shards), num_workers=2)

    def trainer(**kwargs):
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 3)
        )
        model = ComposerClassifier(net, num_classes=3)
        loader = data.dataloader(batch_size=4, train=True, seed=3)
        return Trainer(model=model, train_dataloader=loader, max_duration="2ep", progress_bar=False, seed=11, **kwargs)

    with trainer(save_folder=str(tmp_path / "run"), save_interval="5ba", save_filename="ba{batch}.pt") as whole:
        per_epoch = len(whole.state.train_dataloader)
        whole.fit()
        expected = [p.detach().clone() for p in whole.state.model.parameters()]
    saved = {int(p.stem[2:]): p for p in (tmp_path / "run").glob("ba*.pt")}
    in_second_epoch = min(batch for batch in saved if batch > per_epoch and batch % per_epoch)
    with trainer(load_path=str(saved[in_second_epoch])) as resumed:
        done = resumed.state.timestamp.batch_in_epoch.value
        assert 0 < done < per_epoch
        resumed.fit()
        assert all(torch.equal(a, b) for a, b in zip(resumed.state.model.parameters(), expected, strict=True))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_started_mid_epoch_gives_the_rest_of_that_epoch_reading_only_those_samples(shards, num_workers):
    data = StreamingShards(str(shards), num_workers=num_workers)
    loader = data.dataloader(batch_size=4, train=True, seed=3)
    loader.start_epoch(0, 0)
    next(iter(loader))  # the first epoch, left early
    loader.start_epoch(1, 0)
    second = [x for x, _ in loader]
    loader.start_epoch(1, 5)
    read = []
    original = type(loader.dataset).__getitem__

    def counting(dataset, index):
        read.append(index)
        return original(dataset, index)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(loader.dataset), "__getitem__", counting)  # the workers fork after this: they count too
        rest = [x for x, _ in loader]
    assert len(rest) == len(second) - 5
    assert all(torch.equal(a, b) for a, b in zip(rest, second[5:], strict=True))
    if num_workers == 0:  # in this process: the samples read are those of the batches given, none before
        assert len(read) == sum(len(x) for x in rest)


def stream_samples(path, **kwargs):
    data = StreamingShards(path, **kwargs)
    return [sample for batch in data.dataloader(batch_size=4, train=False) for sample in unbatch(batch)]


def unbatch(batch):
    if isinstance(batch, dict):
        return [dict(zip(batch, values)) for values in zip(*batch.values())]
    return list(zip(*batch))


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return torch.equal(torch.as_tensor(a), torch.as_tensor(b))


def test_convert_writes_text_files_and_image_folders_as_the_recipe_datasets_read_them(tmp_path, capsys):
    from PIL import Image

    from composer.cli.__main__ import main
    from composer.datasets import image_folder_dataloader, text_file_dataloader

    (tmp_path / "notes.txt").write_text("Streaming shards, byte by byte. " * 30)
    assert main(["data", "convert", str(tmp_path / "notes.txt"), str(tmp_path / "text"), "--seq-len", "16"]) == 0
    assert "wrote 60 samples" in capsys.readouterr().out
    reference = text_file_dataloader([tmp_path / "notes.txt"], 16, shuffle=False).dataset
    assert same(stream_samples(str(tmp_path / "text")), [reference[i] for i in range(len(reference))])

    generator = np.random.default_rng(1)
    for label in ("cat", "dog"):
        (tmp_path / "images" / label).mkdir(parents=True)
        for i in range(3):
            pixels = generator.integers(0, 256, (10, 12, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "images" / label / f"{i}.png")
    argv = ["data", "convert", str(tmp_path / "images"), str(tmp_path / "image-shards"), "--crop-size", "8"]
    assert main([*argv, "--resize-size", "8"]) == 0
    images = image_folder_dataloader(tmp_path / "images", 1, train=False, crop_size=8, resize_size=8, num_workers=0)
    dataset = images.dataloader.dataset
    assert same(stream_samples(str(tmp_path / "image-shards")), [dataset[i] for i in range(len(dataset))])
    assert main(argv) == 2
    assert "data convert DST: DST" in capsys.readouterr().err

    shard = next((tmp_path / "image-shards").glob("chunk-*.bin"))
    damaged = bytearray(shard.read_bytes())
    damaged[-1] ^= 1  # the same size: only the checksum tells
    shard.write_bytes(bytes(damaged))
    assert len(StreamingShards(str(tmp_path / "image-shards"))) == 6
    recipe = {"path": str(tmp_path / "image-shards"), "verify_checksums": True}
    with pytest.raises(ConfigError, match=rf"train_dataset.streaming: path: shard {shard.name} of .* does not match"):
        TrainerHparams.from_dict(
            {
                "model": {"mlp": {"in_features": 192, "num_classes": 2}},
                "train_dataset": {"streaming": recipe},
                "train_batch_size": 2,
                "max_duration": "1ba",
            }
        ).initialize_object()


def test_convert_refuses_storage_options_that_are_not_json_naming_the_option(tmp_path, capsys):
    from composer.cli.__main__ import main

    (tmp_path / "notes.txt").write_text("Some text to shard. " * 10)
    argv = ["data", "convert", str(tmp_path / "notes.txt"), str(tmp_path / "out"), "--storage-options", "{endpoint"]
    assert main(argv) == 2
    message = capsys.readouterr().err
    assert "--storage-options" in message and "'{endpoint'" in message and "endpoint_url" in message
    assert not (tmp_path / "out").exists()  # nothing written


def test_convert_uploads_an_hf_dataset_source_to_the_store(tmp_path, s3_env):
    from composer.cli.__main__ import main
    from composer.datasets import HFDataset

    rows = "".join(json.dumps({"text": f"Row {i} of the table, some words."}) + "\n" for i in range(30))
    (tmp_path / "rows.jsonl").write_text(rows)
    bucket = s3_env.create_bucket()
    options = {"endpoint_url": s3_env.endpoint_url, "local_folder": str(tmp_path / "cache")}
    argv = ["data", "convert", str(tmp_path / "rows.jsonl"), f"s3://{bucket}/rows", "--text-column", "text"]
    argv += ["--seq-len", "32", "--cache-dir", str(tmp_path / "hf"), "--storage-options", json.dumps(options)]
    assert main(argv) == 0
    source = HFDataset(str(tmp_path / "rows.jsonl"), text_column="text", seq_len=32, cache_dir=str(tmp_path / "hf"))
    reference = source.torch_dataset(train=True)
    streamed = stream_samples(f"s3://{bucket}/rows", storage_options=options, verify_checksums=True)
    assert same(streamed, [reference[i] for i in range(len(reference))])


def test_each_rank_streams_its_own_part_of_every_epoch(shards, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    parts = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        loader = StreamingShards(str(shards), num_workers=0).dataloader(batch_size=5, train=True, seed=2)
        loader.start_epoch(0, 0)
        parts.append([tuple(x.tolist()) for inputs, _ in loader for x in inputs])
    assert len(parts[0]) == len(parts[1]) == NUM_SAMPLES // 2
    assert not set(parts[0]) & set(parts[1])  # disjoint: together, every sample once
    monkeypatch.setattr("composer.distributed.data.is_launched", lambda: True)
    spec = DataSpec(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "every rank sees the same data": the stream shards itself
        assert distribute_train_data(spec, seed=0) is spec


def epoch_samples(shards, world_size, workers, epoch, batches, layout=None, samples_done=None, monkeypatch=None):
    """Each rank's samples (as tuples) of ``epoch`` from batch ``batches`` on (a stream started as the Trainer does),
    with every rank of ``world_size`` in this process; and the layout the epoch started with."""
    parts = []
    for rank in range(world_size):
        monkeypatch.setenv("WORLD_SIZE", str(world_size))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world_size))
        monkeypatch.setenv("RANK", str(rank))
        loader = StreamingShards(str(shards), num_workers=workers).dataloader(batch_size=4, train=True, seed=3)
        loader.start_epoch(epoch, batches, samples_done, layout)
        parts.append([[tuple(x.tolist()) for x in inputs] for inputs, _ in loader])
    return parts, loader.resume_state()


@pytest.mark.parametrize(("before", "after"), [((2, 2), (1, 0)), ((1, 0), (2, 2))])
def test_an_epoch_resumed_on_another_number_of_ranks_trains_each_of_its_samples_once(
    shards, monkeypatch, before, after
):
    (ranks, workers), (new_ranks, new_workers) = before, after
    whole, layout = epoch_samples(shards, ranks, workers, 1, 0, monkeypatch=monkeypatch)
    assert layout == {"world_size": ranks, "num_nodes": 1, "num_workers": max(workers, 1), "batch_size": 4}
    epoch = [sample for part in whole for batch in part for sample in batch]
    assert len(set(epoch)) == len(epoch) >= NUM_SAMPLES - 4 * ranks * max(workers, 1)  # drop_last under 2 ranks
    done = 4  # batches each rank trained before the checkpoint: the steps' samples, rank after rank
    trained = [sample for step in range(done) for part in whole for sample in part[step]]
    rest, new_layout = epoch_samples(shards, new_ranks, new_workers, 1, done, layout, len(trained), monkeypatch)
    assert new_layout == layout  # a checkpoint of the resumed epoch records the layout it started with
    assert len({len(part) for part in rest}) == 1  # every rank as many batches: none waits for a batch in vain
    resumed = trained + [sample for part in rest for batch in part for sample in batch]
    assert len(set(resumed)) == len(resumed)  # no sample twice in the epoch
    if new_ranks < ranks:  # the rest of the epoch's own samples, all of them
        assert sorted(resumed) == sorted(epoch)
    else:  # 2 ranks deal out the rest with drop_last: at most a batch of each rank and worker left out
        assert set(resumed) <= set(epoch) and len(resumed) > len(epoch) - 4 * new_ranks * new_workers


def test_an_epoch_resumed_twice_from_2_ranks_on_1_and_back_on_2_trains_each_sample_at_most_once(shards, monkeypatch):
    whole, layout = epoch_samples(shards, 2, 0, 1, 0, monkeypatch=monkeypatch)
    epoch = [sample for part in whole for batch in part for sample in batch]
    first = [sample for step in range(2) for part in whole for sample in part[step]]  # 2 batches on each of 2 ranks
    middle, saved = epoch_samples(shards, 1, 0, 1, 2, layout, len(first), monkeypatch)
    assert saved == layout  # the 1-rank run's checkpoints record the layout the epoch started with
    second = [sample for batch in middle[0][:2] for sample in batch]  # 2 batches on 1 rank, then killed
    # back on 2 ranks: 4 batches done by the timer's count, but 24 samples, not 4 x 4 on each of 2 ranks
    rest, _ = epoch_samples(shards, 2, 0, 1, 4, saved, len(first) + len(second), monkeypatch)
    resumed = first + second + [sample for part in rest for batch in part for sample in batch]
    assert len(set(resumed)) == len(resumed) and sorted(resumed) == sorted(epoch)


def test_a_run_resumed_with_other_workers_through_the_trainer_trains_each_sample_of_the_epoch_once(shards, tmp_path):
    class Seen(Callback):
        def __init__(self):
            self.samples = []

        def after_dataloader(self, state, logger):
            self.samples += [(state.timestamp.epoch.value, tuple(x.tolist())) for x in state.batch[0]]

    def fit(workers, **kwargs):
        torch.manual_seed(0)
        model = ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3)
        loader = StreamingShards(str(shards), num_workers=workers).dataloader(batch_size=4, train=True, seed=3)
        seen = Seen()
        with Trainer(model=model, train_dataloader=loader, callbacks=[seen], progress_bar=False, **kwargs) as trainer:
            trainer.fit()
        return seen.samples

    whole = fit(2, max_duration="2ep", save_folder=str(tmp_path), save_interval="20ba", save_filename="ba{batch}.pt")
    saved = torch.load(tmp_path / "ba20.pt", weights_only=True)["state"]  # 5 batches into the second epoch
    assert saved["train_data"] == {"world_size": 1, "num_nodes": 1, "num_workers": 2, "batch_size": 4}
    resumed = [s for s in whole[:80]] + fit(0, max_duration="2ep", load_path=str(tmp_path / "ba20.pt"))
    second = [sample for epoch, sample in resumed if epoch == 1]
    assert len(second) == len(set(second)) == NUM_SAMPLES
    assert [s for s in resumed if s[0] == 0] == [s for s in whole if s[0] == 0]


STREAM_RECIPE = """
model: {{mlp: {{in_features: 8, hidden: [16], num_classes: 3}}}}
train_dataset: {{streaming: {{path: {shards}, num_workers: 2}}}}
train_batch_size: 4
max_duration: 2ep
optimizer: {{sgd: {{lr: 0.1}}}}
progress_bar: false
seed: 3
save_folder: {folder}
save_interval: 4ba
autoresume: true
run_name: stream
callbacks: {{kill_or_save: {{}}}}
"""


def test_a_training_process_killed_mid_epoch_and_run_again_ends_bitwise_equal(shards, tmp_path):
    def run(name, kill_at=None):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(STREAM_RECIPE.format(shards=shards, folder=tmp_path / name))
        env = {**os.environ, "PYTHONPATH": str(REPO), "FINAL_WEIGHTS": str(tmp_path / f"{name}.pt")}
        env.pop("KILL_AT", None)
        env.update({"KILL_AT": str(kill_at)} if kill_at else {})
        command = [sys.executable, "-m", "composer.cli", "--import", "tests.datasets.kill_resume_hooks", "train"]
        return subprocess.run([*command, "-f", str(recipe)], cwd=REPO, env=env, capture_output=True, text=True)

    whole = run("whole")
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed = run("killed", kill_at=22)  # in the second epoch (15 batches each), two batches after the save at 20
    assert killed.returncode == -signal.SIGKILL and not (tmp_path / "killed.pt").exists()
    resumed = run("killed")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    expected, got = (torch.load(tmp_path / f"{name}.pt")["weights"] for name in ("whole", "killed"))
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)
