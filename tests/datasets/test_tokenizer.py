"""Real tokenizers for the text datasets: trained by the command line, loaded from a file or a folder, packed."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer

from composer.cli.__main__ import main
from composer.config import ConfigError, TrainerHparams
from composer.datasets import load_tokenizer, pack_documents, text_file_dataloader
from composer.datasets.text import load_python_docs, python_docs_dataset
from tests.datasets.text_corpus import documents, trained_tokenizer


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory):
    return trained_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def test_the_command_writes_a_tokenizer_folder_that_round_trips_text(tokenizer_folder, capsys):
    assert sorted(p.name for p in tokenizer_folder.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    reference = HFTokenizer.from_file(str(tokenizer_folder / "tokenizer.json"))
    assert reference.get_vocab_size() == 300
    config = json.loads((tokenizer_folder / "tokenizer_config.json").read_text())
    assert (config["eos_token"], config["mask_token"]) == ("<|endoftext|>", "[MASK]")
    for source in (tokenizer_folder, tokenizer_folder / "tokenizer.json"):
        tokenizer = load_tokenizer(source)
        assert tokenizer.vocab_size == 300
        assert tokenizer.separator == (reference.token_to_id("<|endoftext|>"),)
        assert tokenizer.mask_token_id == reference.token_to_id("[MASK]")
        text = documents(3, seed=7)
        ids = tokenizer.encode_batch(text)
        assert [reference.decode(i) for i in ids] == text  # byte-level BPE: every text comes back exactly
        assert sum(map(len, ids)) < sum(len(t.encode()) for t in text) / 2  # merges learnt: fewer tokens than bytes
    assert (
        load_tokenizer(tokenizer_folder).fingerprint == load_tokenizer(tokenizer_folder / "tokenizer.json").fingerprint
    )


def test_the_command_refuses_a_vocabulary_below_the_bytes_and_missing_files(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("text")
    assert main(["tokenizer", "train", str(tmp_path / "a.txt"), "--vocab-size", "100", "--out", str(tmp_path)]) == 2
    assert "vocab_size must be an int of at least 259" in capsys.readouterr().err
    assert main(["tokenizer", "train", str(tmp_path / "b.txt"), "--vocab-size", "300", "--out", str(tmp_path)]) == 2
    assert "b.txt" in capsys.readouterr().err


def test_packing_joins_documents_with_the_end_of_text_token():
    packed = pack_documents([[1, 2, 3], [], [4]], separator=[0])
    assert packed.tolist() == [1, 2, 3, 0, 0, 4, 0] and packed.dtype == torch.int32


def test_python_docs_with_a_tokenizer_packs_its_documents(tokenizer_folder):
    reference = HFTokenizer.from_file(str(tokenizer_folder / "tokenizer.json"))
    eos = reference.token_to_id("<|endoftext|>")
    dataset = python_docs_dataset("validation", 32, load_tokenizer(tokenizer_folder))
    text = bytes(load_python_docs("validation").tolist()).decode()
    first_document = text.split("\n\n")[0]  # documents are joined by a blank line in the byte corpus
    expected = reference.encode(first_document, add_special_tokens=False).ids
    stream = torch.cat([dataset[i]["input_ids"] for i in range(len(dataset))])
    assert stream[: len(expected)].tolist() == expected
    documents_in_stream = int((stream == eos).sum())
    assert 40 < documents_in_stream <= 58  # one end-of-text token per validation document (the tail is cut)
    assert int(stream.max()) < 300


def test_masked_text_uses_the_tokenizers_mask_token_and_never_masks_the_end_of_text(tmp_path, tokenizer_folder):
    tokenizer = load_tokenizer(tokenizer_folder)
    (mask,), (eos,) = [tokenizer.mask_token_id], tokenizer.separator
    files = []
    for i, text in enumerate(documents(40, seed=3)):
        files.append(tmp_path / f"{i}.txt")
        files[-1].write_text(text)
    loader = text_file_dataloader(
        files, seq_len=16, batch_size=64, tokenizer=str(tokenizer_folder), seed=0, mlm_probability=0.3, shuffle=False
    )
    batch = next(iter(loader))
    unmasked = text_file_dataloader(files, seq_len=16, batch_size=64, tokenizer=str(tokenizer_folder), shuffle=False)
    original = next(iter(unmasked))["input_ids"]
    chosen = batch["labels"] != -100
    assert torch.equal(batch["labels"][chosen], original[chosen])
    assert bool((batch["input_ids"][chosen] == mask).any()) and not bool((batch["input_ids"][~chosen] == mask).any())
    assert not bool(chosen[original == eos].any())  # the documents' ends are never masked
    assert 0.15 < chosen[original != eos].float().mean().item() < 0.45


def test_a_tokenizer_that_does_not_load_is_refused_naming_the_file_and_the_key(tmp_path):
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"model": {"type": "nonsense"}}')
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_embd": 32, "n_head": 2}},
        "train_dataset": {"python_docs": {"seq_len": 16, "tokenizer": str(broken)}},
        "train_batch_size": 2,
        "max_duration": "1ba",
    }
    with pytest.raises(ConfigError, match=rf"train_dataset.python_docs: tokenizer: {broken} does not load"):
        TrainerHparams.from_dict(recipe).initialize_object()


def test_the_models_vocabulary_must_cover_the_tokenizers_naming_both_keys(tmp_path, tokenizer_folder):
    (tmp_path / "a.txt").write_text("\n".join(documents(30)))
    recipe = {
        "model": {"gpt": {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 256}},
        "train_dataset": {
            "text_files": {"paths": [str(tmp_path / "a.txt")], "seq_len": 16, "tokenizer": str(tokenizer_folder)}
        },
        "train_batch_size": 2,
        "max_duration": "1ba",
        "progress_bar": False,
    }
    with pytest.raises(ConfigError) as error:
        TrainerHparams.from_dict(recipe).initialize_object()
    assert "model.gpt.vocab_size and train_dataset.text_files.tokenizer" in str(error.value)
    assert "Set model.gpt.vocab_size: 300" in str(error.value)
    recipe["model"]["gpt"]["vocab_size"] = 300
    trainer = TrainerHparams.from_dict(recipe).initialize_object()
    trainer.fit()
    assert trainer.state.timestamp.batch.value == 1
    trainer.close()


def test_a_transformers_folder_without_tokenizer_json_is_read_offline_by_transformers(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "on", "mat", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')
    tokenizer = load_tokenizer(tmp_path)
    assert (tokenizer.vocab_size, tokenizer.separator, tokenizer.mask_token_id) == (12, (3,), 4)  # [SEP], [MASK]
    words = ["the", "cat", "##s", "sat", "on", "the", "mat", "."]
    assert tokenizer.encode_batch(["The cats sat on the mat."]) == [[vocab.index(w) for w in words]]
