"""hf_dataset: your own files through Hugging Face ``datasets``, read offline, checked, tokenized with a cache, and
resumed mid-epoch bitwise."""

from __future__ import annotations

import csv
import json
import os

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torchvision
from PIL import Image
from tokenizers import Tokenizer as HFTokenizer

from composer import Trainer
from composer.algorithms.utils import add_vision_dataset_transform
from composer.config import ConfigError, TrainerHparams
from composer.datasets.hf_dataset import HFDataset, HFImageDataset
from composer.models import GPT, GPTConfig
from tests.datasets.text_corpus import documents, trained_tokenizer

TEXTS = documents(60, seed=5)


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory):
    return trained_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def write_text_files(folder):
    """The same rows (text, and an integer id) as parquet, JSON lines, CSV, arrow and a save_to_disk folder."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = list(range(len(TEXTS)))
    table = pa.table({"text": TEXTS, "id": ids})
    pq.write_table(table, folder / "rows.parquet")
    (folder / "rows.jsonl").write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in zip(ids, TEXTS)))
    with open(folder / "rows.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["text", "id"])
        writer.writerows(zip(TEXTS, ids))
    with pa.OSFile(str(folder / "rows.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    datasets.Dataset.from_dict({"text": TEXTS, "id": ids}).save_to_disk(str(folder / "saved"))
    return {name: folder / name for name in ("rows.parquet", "rows.jsonl", "rows.csv", "rows.arrow", "saved")}


def expected_tokens(tokenizer_folder, texts):
    reference = HFTokenizer.from_file(str(tokenizer_folder / "tokenizer.json"))
    eos = reference.token_to_id("<|endoftext|>")
    return [token for text in texts for token in (*reference.encode(text, add_special_tokens=False).ids, eos)]


def test_every_format_gives_the_documents_packed_with_the_end_of_text_token(tmp_path, tokenizer_folder):
    expected = expected_tokens(tokenizer_folder, TEXTS)
    for name, path in write_text_files(tmp_path / "data").items():
        data = HFDataset(
            str(path),
            text_column="text",
            tokenizer=str(tokenizer_folder),
            seq_len=16,
            cache_dir=str(tmp_path / "cache"),
        )
        windows = data.torch_dataset(train=False)
        assert len(windows) == len(expected) // 16, name
        stream = torch.cat([windows[i]["input_ids"] for i in range(len(windows))]).tolist()
        assert stream == expected[: len(stream)], name
        assert windows.vocab_size == 300


def test_tokenization_is_cached_by_datasets_and_keyed_by_the_tokenizer(tmp_path, tokenizer_folder, monkeypatch):
    path = str(write_text_files(tmp_path / "data")["rows.parquet"])
    cache = tmp_path / "cache"
    first = HFDataset(path, text_column="text", tokenizer=str(tokenizer_folder), cache_dir=str(cache), seq_len=8)
    tokens = first.torch_dataset(train=True).data
    tokenized = sorted((cache / "opencomposer-tokenized").glob("*.arrow"))
    assert len(tokenized) == 1
    again = HFDataset(path, text_column="text", tokenizer=str(tokenizer_folder), cache_dir=str(cache), seq_len=8)
    monkeypatch.setattr(again.tokenizer, "encode_batch", lambda texts: pytest.fail("tokenized again"))
    assert torch.equal(again.torch_dataset(train=True).data, tokens)  # read from the cache file
    monkeypatch.undo()
    as_bytes = HFDataset(path, text_column="text", cache_dir=str(cache), seq_len=8).torch_dataset(train=True).data
    assert len(sorted((cache / "opencomposer-tokenized").glob("*.arrow"))) == 2  # another tokenizer, another entry
    assert bytes(as_bytes[: len(TEXTS[0].encode())].tolist()) == TEXTS[0].encode()


@pytest.mark.parametrize("tokenized", [False, True])
def test_masked_batches_use_the_tokenizers_mask_token(tmp_path, tokenizer_folder, tokenized):
    path = str(write_text_files(tmp_path / "data")["rows.parquet"])
    tokenizer = str(tokenizer_folder) if tokenized else None
    data = HFDataset(
        path,
        text_column="text",
        tokenizer=tokenizer,
        seq_len=16,
        mlm_probability=0.3,
        cache_dir=str(tmp_path / "cache"),
    )
    batch = next(iter(data.dataloader(batch_size=32, train=False)))
    chosen = batch["labels"] != -100
    mask = data.tokenizer.mask_token_id
    assert mask == (1 if tokenized else 256)  # [MASK] of the trained tokenizer, else one past the bytes
    assert bool((batch["input_ids"][chosen] == mask).any()) and not bool((batch["input_ids"][~chosen] == mask).any())


def test_a_fraction_held_out_is_seeded_disjoint_and_complete(tmp_path):
    path = str(write_text_files(tmp_path / "data")["rows.parquet"])

    def ids(seed, train):
        data = HFDataset(path, text_column="text", holdout=0.25, holdout_seed=seed, cache_dir=str(tmp_path / "c"))
        return sorted(data.part(train)["id"])

    rest, held = ids(0, True), ids(0, False)
    assert len(held) == 15 and sorted(rest + held) == list(range(60))
    assert ids(0, False) == held and ids(1, False) != held  # the seed decides the draw


def write_images(folder, count=12):
    """A save_to_disk folder of RGB images whose every pixel is its row's label * 20, and the labels."""
    labels = [i % 3 for i in range(count)]
    images = [Image.new("RGB", (6, 5), (20 * y, 20 * y, 20 * y)) for y in labels]
    data = datasets.Dataset.from_dict({"img": images, "y": labels}).cast_column("img", datasets.Image())
    data.save_to_disk(str(folder))
    return labels


def test_images_and_labels_from_a_saved_folder(tmp_path):
    labels = write_images(tmp_path / "images")
    data = HFDataset(str(tmp_path / "images"), image_column="img", label_column="y")
    images, targets = next(iter(data.dataloader(batch_size=12, train=False)))
    assert images.shape == (12, 3, 5, 6) and images.dtype == torch.float32
    assert targets.tolist() == labels
    assert torch.allclose(images.amax(dim=(1, 2, 3)), torch.tensor(labels) * 20 / 255)
    pairs = data.torch_dataset(train=False)  # a batch read at once (__getitems__) equals its samples read one by one
    for (image, label), index in zip(pairs.__getitems__([5, 0, 7]), (5, 0, 7), strict=True):
        assert torch.equal(image, pairs[index][0]) and label == labels[index]
    rows = {"img": [Image.new("L", (6, 5), 10 * i) for i in range(3)], "y": [0, 1, 2]}
    grey = HFImageDataset(datasets.Dataset.from_dict(rows).cast_column("img", datasets.Image()), "img", "y")
    for (image, label), index in zip(grey.__getitems__([2, 0]), (2, 0), strict=True):
        assert image.shape == (1, 5, 6) and torch.equal(image, grey[index][0]) and label == index
    assert pairs.deterministic_samples
    add_vision_dataset_transform(pairs, torchvision.transforms.RandomHorizontalFlip())  # an augmentation: read again
    assert not pairs.deterministic_samples


def test_a_hub_name_without_a_local_copy_fails_and_leaves_the_switches_as_they_were(tmp_path):
    before = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    flag = datasets.config.HF_HUB_OFFLINE
    with pytest.raises(ValueError, match="not a local file or folder") as error:
        HFDataset("someone/their-corpus", text_column="text", cache_dir=str(tmp_path))
    assert "save_to_disk('data/someone_their-corpus')" in str(error.value)
    assert "path: data/someone_their-corpus" in str(error.value)
    assert {name: os.environ.get(name) for name in before} == before
    assert flag == datasets.config.HF_HUB_OFFLINE


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"text_column": "body"},
            r"text_column='body' is not a column of .*rows.parquet .*columns are \['text', 'id'\]",
        ),
        ({"text_column": "id"}, r"text_column='id' of .*rows.parquet .* holds Value\('int64'\), not text"),
        ({"image_column": "text", "label_column": "id"}, r"image_column='text' of .*rows.parquet .*not images"),
        ({"text_column": "text", "split": "test"}, r"split='test' is not a split of"),
    ],
)
def test_bad_columns_are_refused_naming_the_file_and_the_key(tmp_path, fields, message):
    path = str(write_text_files(tmp_path / "data")["rows.parquet"])
    if "split" in fields:
        path = str(tmp_path / "data" / "saved_dict")
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a"]})}).save_to_disk(path)
    with pytest.raises(ValueError, match=message):
        HFDataset(path, cache_dir=str(tmp_path / "cache"), **fields)


def test_empty_splits_unreadable_files_and_empty_values_are_refused(tmp_path):
    (tmp_path / "header_only.csv").write_text("text,id\n")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "no_rows.parquet")
    for name in ("header_only.csv", "no_rows.parquet"):
        with pytest.raises(ValueError, match=rf"path: .*{name} holds no rows \(split empty\)"):
            HFDataset(str(tmp_path / name), text_column="text", cache_dir=str(tmp_path / "cache"))
    (tmp_path / "cut.parquet").write_bytes(b"PAR1" + bytes(40))
    with pytest.raises(ValueError, match=r"path: .*cut.parquet cannot be read as parquet"):
        HFDataset(str(tmp_path / "cut.parquet"), text_column="text", cache_dir=str(tmp_path / "cache"))
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "holes.parquet")
    with pytest.raises(ValueError, match=r"text_column='text' of .*holes.parquet .* has empty \(null\) values"):
        HFDataset(str(tmp_path / "holes.parquet"), text_column="text", cache_dir=str(tmp_path / "cache"))


def test_a_recipe_trains_on_a_file_and_evaluates_on_its_held_out_part(tmp_path, tokenizer_folder):
    path = str(write_text_files(tmp_path / "data")["rows.jsonl"])
    source = {
        "path": path,
        "text_column": "text",
        "tokenizer": str(tokenizer_folder),
        "seq_len": 16,
        "holdout": 0.2,
        "cache_dir": str(tmp_path / "cache"),
    }
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_embd": 16, "n_head": 2, "vocab_size": 300, "max_sequence_length": 16}},
        "train_dataset": {"hf_dataset": source},
        "eval_dataset": {"hf_dataset": source},
        "train_batch_size": 4,
        "max_duration": "2ba",
        "progress_bar": False,
        "seed": 0,
    }
    trainer = TrainerHparams.from_dict(recipe).initialize_object()
    trainer.fit()
    assert trainer.state.timestamp.batch.value == 2
    trainer.close()
    recipe["train_dataset"] = {"hf_dataset": {**source, "text_column": "body"}}
    with pytest.raises(ConfigError, match=r"train_dataset.hf_dataset: text_column='body' is not a column of"):
        TrainerHparams.from_dict(recipe).initialize_object()


def test_a_run_resumed_mid_epoch_with_workers_ends_bitwise_equal(tmp_path, tokenizer_folder):
    path = str(write_text_files(tmp_path / "data")["rows.parquet"])
    data = HFDataset(
        path,
        text_column="text",
        tokenizer=str(tokenizer_folder),
        seq_len=8,
        num_workers=2,
        mlm_probability=None,
        cache_dir=str(tmp_path / "cache"),
    )

    def trainer(**kwargs):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=300, max_sequence_length=8, n_layer=1, n_head=2, n_embd=16, dropout=0.1))
        return Trainer(
            model=model,
            train_dataloader=data.dataloader(batch_size=16, train=True, seed=3),
            max_duration="2ep",
            progress_bar=False,
            seed=11,
            **kwargs,
        )

    with trainer(
        save_folder=str(tmp_path / "run"), save_interval="4ba", save_filename="ep{epoch}-ba{batch}-rank{rank}.pt"
    ) as uninterrupted:
        per_epoch = len(uninterrupted.state.train_dataloader)
        uninterrupted.fit()
        expected = [p.detach().clone() for p in uninterrupted.state.model.parameters()]
    saved = {int(p.name.split("-ba")[1].split("-")[0]): p for p in (tmp_path / "run").glob("ep*-ba*.pt")}
    in_second_epoch = min(batch for batch in saved if batch > per_epoch and batch % per_epoch)
    with trainer(load_path=str(saved[in_second_epoch])) as resumed:
        assert 0 < resumed.state.timestamp.batch_in_epoch.value < per_epoch
        resumed.fit()
        assert all(torch.equal(a, b) for a, b in zip(resumed.state.model.parameters(), expected, strict=True))
