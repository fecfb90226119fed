"""Bad input through a recipe: each case stops the run before it trains (or, mid-epoch, at the batch that fails),
with an error that names the file or shard and the recipe key."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from litdata.streaming.writer import BinaryWriter

from composer.config import ConfigError, TrainerHparams
from composer.core import Callback
from composer.datasets.streaming import StreamError
from composer.utils.object_store import S3ObjectStore
from tests.common.store_proxy import StoreProxy

GPT = {"gpt": {"n_layer": 1, "n_embd": 16, "n_head": 2, "max_sequence_length": 8}}


def build(train_dataset, **extra):
    recipe = {"model": GPT, "train_dataset": train_dataset, "train_batch_size": 2, "max_duration": "1ba"}
    return TrainerHparams.from_dict({**recipe, "progress_bar": False, **extra}).initialize_object()


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """Parquet files: good rows (text, and an integer id), no rows, and only empty texts; a tokenizer that does not
    load."""
    folder = tmp_path_factory.mktemp("rows")
    pq.write_table(pa.table({"text": ["some words here"] * 8, "id": list(range(8))}), folder / "rows.parquet")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), folder / "no_rows.parquet")
    pq.write_table(pa.table({"text": [""] * 40}), folder / "blank.parquet")
    (folder / "tokenizer.json").write_text('{"model": {"type": "nonsense"}}')
    return folder


@pytest.mark.parametrize(
    ("file", "fields", "message"),
    [
        ("rows.parquet", {"text_column": "body"}, r"text_column='body' is not a column of {path}"),
        ("rows.parquet", {"text_column": "id"}, r"text_column='id' of {path} \(split 'train'\) holds Value\('int64'\)"),
        ("rows.parquet", {"image_column": "text", "label_column": "id"}, r"image_column='text' of {path} .*not images"),
        ("no_rows.parquet", {"text_column": "text"}, r"path: {path} holds no rows \(split empty\)"),
        ("blank.parquet", {"text_column": "text"}, r"text_column='text' of {path} \(split 'train'\) holds only empty"),
        ("rows.parquet", {"text_column": "text", "tokenizer": "T"}, r"tokenizer: T does not load"),
    ],
    ids=["missing-column", "text-of-another-type", "images-of-another-type", "empty-split", "empty-texts", "tokenizer"],
)
def test_hf_dataset_refuses_bad_data_naming_the_file_and_the_key(rows, tmp_path, file, fields, message):
    path = str(rows / file)
    fields = {key: str(rows / "tokenizer.json") if value == "T" else value for key, value in fields.items()}
    pattern = message.format(path=re.escape(path)).replace("T does", f"{re.escape(str(rows / 'tokenizer.json'))} does")
    with pytest.raises(ConfigError, match=rf"^train_dataset.hf_dataset: {pattern}"):
        build({"hf_dataset": {"path": path, "cache_dir": str(tmp_path), **fields}})


def test_convert_names_the_option_and_the_file(rows, tmp_path, capsys):
    from composer.cli.__main__ import main

    path, out = str(rows / "rows.parquet"), str(tmp_path / "shards")
    assert main(["data", "convert", path, out, "--text-column", "body", "--cache-dir", str(tmp_path)]) == 2
    assert f"data convert --text-column: text_column='body' is not a column of {path}" in capsys.readouterr().err
    tokenizer = ["--tokenizer", str(rows / "tokenizer.json")]
    assert main(["data", "convert", path, out, "--text-column", "text", *tokenizer]) == 2
    assert f"data convert --tokenizer: tokenizer: {rows / 'tokenizer.json'} does not load" in capsys.readouterr().err


def write_shards(folder, count=160, chunk_size=2):
    """Token windows of 8 ids, ``chunk_size`` a shard: 80 shards, more than LitData downloads ahead (32 at most)."""
    writer = BinaryWriter(str(folder), chunk_size=chunk_size)
    for i in range(count):
        ids = torch.arange(i, i + 8) % 256
        writer[i] = {"input_ids": ids, "labels": ids}
    writer.done()
    writer.merge()
    return folder


class AtBatch(Callback):
    """Runs ``action`` at the end of batch ``batch``."""

    def __init__(self, batch, action):
        self.batch, self.action = batch, action

    def batch_end(self, state, logger):
        if int(state.timestamp.batch) == self.batch:
            self.action()


@pytest.mark.parametrize("failure", ["store-down", "store-hangs"])
def test_a_store_that_fails_mid_epoch_stops_the_run_naming_the_shard_and_the_key(s3_env, tmp_path, failure):
    bucket = s3_env.create_bucket()
    store = S3ObjectStore(bucket, {"endpoint_url": s3_env.endpoint_url})
    shards = write_shards(tmp_path / "shards")
    for file in shards.iterdir():
        store.upload(str(file), f"data/{file.name}")
    proxy = StoreProxy(s3_env.endpoint_url).start()  # the store as the run reaches it: it can go down, or hang
    try:
        # A hung store waits out every timeout: a budget of 40 s lets the requests' timeouts be more than the 1-s floor,
        # so that the bound below counts boto3's 5 download attempts of a chunk (without sharing the budget among
        # them, a chunk took 5 x 2 x 5 s = 50 s).
        budget = 40 if failure == "store-hangs" else 4
        options = {"endpoint_url": proxy.endpoint_url, "retry_budget": budget, "local_folder": str(tmp_path / "cache")}
        streaming = {"path": f"s3://{bucket}/data", "storage_options": options, "num_workers": 1}
        trainer = build({"streaming": streaming}, max_duration="1ep", train_batch_size=4)
        actions = {
            "store-down": proxy.stop,
            "store-hangs": lambda: setattr(proxy, "mode", "hang"),
        }
        trainer.state.callbacks.append(AtBatch(1, actions[failure]))
        start = time.monotonic()
        with pytest.raises(StreamError) as error:
            trainer.fit()
        proxy.stop()  # closes the hung connections too, so that the loader's worker ends at once
        assert re.match(
            rf"train_dataset.streaming.path: reading shard chunk-0-\d+.bin of s3://{bucket}/data failed",
            str(error.value),
        )
        assert 1 <= int(trainer.state.timestamp.batch) < 40  # stopped mid-epoch (40 batches), where a shard was missing
        assert time.monotonic() - start < max(budget, 30)  # bounded by retry_budget: no hang
        trainer.close()
    finally:
        proxy.stop()


def test_a_store_that_is_down_at_start_fails_within_the_retry_budget_naming_the_key(s3_env, tmp_path):
    options = {"endpoint_url": "http://127.0.0.1:9", "retry_budget": 1, "local_folder": str(tmp_path / "cache")}
    with pytest.raises(ConfigError, match=r"^train_dataset.streaming: .*ObjectStoreError.*127\.0\.0\.1:9"):
        build({"streaming": {"path": "s3://bucket/data", "storage_options": options}})


def test_an_image_that_cannot_be_decoded_stops_the_run_naming_the_row_the_file_and_the_key(tmp_path):
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    png = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(png, format="PNG")
    rows = [{"image": {"bytes": png.getvalue(), "path": None}, "label": i % 2} for i in range(8)]
    rows[5]["image"]["bytes"] = b"no image"  # decoded only when the row is read, mid-epoch
    path = str(tmp_path / "images")
    datasets.Dataset.from_list(rows).cast_column("image", datasets.Image()).save_to_disk(path)
    fields = {"path": path, "image_column": "image", "label_column": "label"}
    trainer = build({"hf_dataset": fields}, model={"mlp": {"in_features": 48, "num_classes": 2}}, max_duration="1ep")
    with pytest.raises(ValueError) as error:
        trainer.fit()
    expected = f"train_dataset.hf_dataset: image_column='image' of {path} (split 'train'): the image of row 5 cannot"
    assert str(error.value).startswith(expected)
    assert int(trainer.state.timestamp.batch) < 4  # stopped at the batch of row 5: nothing trained on it
    trainer.close()
