"""The built-in text corpus (pinned, split, reproducible) and the byte-level datasets and loaders."""

from __future__ import annotations

import gzip
import hashlib
import math
import pathlib
import sys
import sysconfig

import pytest
import torch

import composer.datasets.text as text
from composer.config.datasets import PythonDocsHparams
from composer.datasets import (
    ByteTextDataset,
    byte_unigram_entropy,
    load_python_docs,
    python_docs_dataloaders,
    text_file_dataloader,
)

DATA_FILE = pathlib.Path(text.__file__).parent / "data" / "python_docs.txt.gz"


def _documents() -> list[bytes]:
    return gzip.decompress(DATA_FILE.read_bytes()).split(b"\x1e")


def test_shipped_corpus_matches_its_pinned_hash_and_size():
    raw = gzip.decompress(DATA_FILE.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == text.PYTHON_DOCS_SHA256
    assert 1_500_000 < len(raw) < 4_000_000  # a few MB of text
    assert DATA_FILE.stat().st_size < 1_000_000  # well under a MB in the repository
    raw.decode("utf-8")  # valid UTF-8 text


def test_splits_are_every_tenth_document_and_cover_the_corpus():
    documents = _documents()
    validation = [d for i, d in enumerate(documents) if i % 10 == 9]
    train = [d for i, d in enumerate(documents) if i % 10 != 9]
    assert bytes(load_python_docs("validation").tolist()) == b"\n\n".join(validation)
    assert bytes(load_python_docs("train").tolist()) == b"\n\n".join(train)
    assert len(validation) == 58 and len(train) == 525


def test_tuning_fold_is_disjoint_from_validation_and_splits_train():
    documents = _documents()
    tuning = [d for i, d in enumerate(documents) if i % 10 == 8]
    tuning_train = [d for i, d in enumerate(documents) if i % 10 not in (8, 9)]
    assert bytes(load_python_docs("tuning").tolist()) == b"\n\n".join(tuning)
    assert bytes(load_python_docs("tuning_train").tolist()) == b"\n\n".join(tuning_train)
    assert len(tuning) == 58 and len(tuning_train) == 467


def test_tuning_recipe_key_trains_and_evaluates_on_the_tuning_fold():
    train = PythonDocsHparams(seq_len=64, tuning=True).initialize_object(batch_size=4, train=True)
    evaluation = PythonDocsHparams(seq_len=64, tuning=True).initialize_object(batch_size=4, train=False)
    assert len(train.dataloader.dataset) == len(load_python_docs("tuning_train")) // 64
    first = next(iter(evaluation.dataloader))["input_ids"][0]
    assert bytes(first.tolist()) == bytes(load_python_docs("tuning")[:64].tolist())


def test_corpus_is_english_prose():
    data = load_python_docs("train")
    sample = bytes(data[:100_000].tolist()).decode("utf-8", errors="replace")
    words = sample.split()
    assert sum(w.strip(".,;:()").lower() in {"the", "a", "is", "of", "to"} for w in words) > 0.08 * len(words)


def test_a_changed_corpus_is_detected(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(text, "PYTHON_DOCS_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="was changed or damaged"):
        load_python_docs()


def test_unknown_split_is_refused():
    with pytest.raises(
        ValueError, match=r"split must be one of \['train', 'validation', 'tuning_train', 'tuning'\], got 'test'"
    ):
        load_python_docs("test")


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7), reason="the corpus was built from CPython 3.11.7's files")
def test_recipe_rebuilds_the_shipped_corpus_from_cpython_3_11_7():
    rebuilt = text._build_python_docs(pathlib.Path(sysconfig.get_paths()["stdlib"]))
    assert hashlib.sha256(rebuilt.encode()).hexdigest() == text.PYTHON_DOCS_SHA256


def test_unigram_entropy_matches_the_formula():
    data = torch.tensor([0, 0, 0, 1, 2, 2], dtype=torch.uint8)
    p = [3 / 6, 1 / 6, 2 / 6]
    assert byte_unigram_entropy(data) == pytest.approx(-sum(q * math.log(q) for q in p))


def test_dataset_cuts_consecutive_windows_and_labels_equal_inputs():
    data = bytes(range(100))
    dataset = ByteTextDataset(data, seq_len=30)
    assert len(dataset) == 3  # the last 10 bytes make no full window
    for index in range(3):
        sample = dataset[index]
        assert sample["input_ids"].tolist() == list(range(30 * index, 30 * index + 30))
        assert sample["input_ids"].dtype == torch.int64
        assert torch.equal(sample["labels"], sample["input_ids"])
    assert dataset[-1]["input_ids"][0].item() == 60
    with pytest.raises(IndexError):
        dataset[3]


def test_dataset_refuses_bad_input():
    with pytest.raises(ValueError, match="seq_len must be a positive int, got 0"):
        ByteTextDataset(b"abc", seq_len=0)
    with pytest.raises(ValueError, match="fewer than seq_len=8"):
        ByteTextDataset(b"abc", seq_len=8)
    with pytest.raises(ValueError, match="1-D uint8 tensor"):
        ByteTextDataset(torch.zeros(10, dtype=torch.int64), seq_len=2)


def test_loaders_are_seeded_and_batches_are_dicts():
    train_dl, eval_dl = python_docs_dataloaders(seq_len=32, batch_size=4, eval_seq_len=64, eval_batch_size=2, seed=3)
    first = next(iter(train_dl))
    assert first["input_ids"].shape == (4, 32) and first["labels"].shape == (4, 32)
    again, _ = python_docs_dataloaders(seq_len=32, batch_size=4, seed=3)
    other, _ = python_docs_dataloaders(seq_len=32, batch_size=4, seed=4)
    assert torch.equal(next(iter(again))["input_ids"], first["input_ids"])
    assert not torch.equal(next(iter(other))["input_ids"], first["input_ids"])
    eval_batch = next(iter(eval_dl))
    assert eval_batch["input_ids"].shape == (2, 64)
    assert bytes(eval_batch["input_ids"][0].tolist()) == bytes(load_python_docs("validation")[:64].tolist())


def test_text_file_loader_reads_files_in_order(tmp_path: pathlib.Path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"x" * 10)
    second.write_bytes(b"y" * 10)
    loader = text_file_dataloader([first, second], seq_len=11, batch_size=2, shuffle=False)
    batch = next(iter(loader))
    assert bytes(batch["input_ids"].flatten().tolist()) == b"x" * 10 + b"\n\n" + b"y" * 10
    with pytest.raises(ValueError, match="not a file"):
        text_file_dataloader([tmp_path / "missing.txt"])
    with pytest.raises(ValueError, match="non-empty list"):
        text_file_dataloader([])
    with pytest.raises(ValueError, match="non-empty list"):
        text_file_dataloader(str(first))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        text_file_dataloader([first], seq_len=4, batch_size=0)
