"""The data benchmarks' sources: the built-in Python-docs corpus as each recipe text source, with one BPE tokenizer.

Imported by the benchmark scripts next to it (``python benchmarks/<name>.py`` puts this folder on ``sys.path``).
:func:`write_sources` writes, in a scratch folder, the corpus as a text file, a BPE tokenizer trained on it
(``train_bpe_tokenizer``, the command ``composer tokenizer train`` runs), the corpus as a parquet file of documents,
and its ``seq_len`` windows as LitData shards (``write_shards``, what ``composer data convert`` writes), locally and,
given a store's endpoint, uploaded to ``s3://bench/shards``. :func:`training_loader` builds the training loader of
each source over them, and :func:`tiny_gpt` a small GPT for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from composer.datasets import HFDataset, load_python_docs, python_docs_dataloaders, text_file_dataloader
from composer.datasets.shards import source_dataset, write_shards
from composer.datasets.streaming import StreamingShards
from composer.datasets.tokenizer import load_tokenizer, train_bpe_tokenizer
from composer.models import GPT, GPTConfig

__all__ = ["SOURCES", "Sources", "tiny_gpt", "training_loader", "write_sources"]

SOURCES = ("hf_dataset", "streaming", "streaming_store", "text_files", "python_docs")


@dataclass
class Sources:
    """Where :func:`write_sources` put each source, and the loaders' settings."""

    folder: Path
    seq_len: int
    vocab_size: int
    endpoint: str | None

    @property
    def tokenizer(self) -> str:
        return str(self.folder / "tok")


def write_sources(folder: Path, seq_len: int, vocab_size: int = 2000, endpoint: str | None = None) -> Sources:
    """Writes the corpus, its tokenizer, its parquet file and its shards under ``folder`` (see the module)."""
    import datasets

    text = bytes(load_python_docs("train").numpy()).decode("utf-8")
    (folder / "corpus.txt").write_text(text, encoding="utf-8")
    train_bpe_tokenizer([folder / "corpus.txt"], vocab_size, folder / "tok")
    documents = [d for d in text.split("\n\n") if d.strip()]
    datasets.Dataset.from_dict({"text": documents}).to_parquet(str(folder / "docs.parquet"))
    windows = source_dataset(str(folder / "corpus.txt"), seq_len=seq_len, tokenizer=str(folder / "tok"))
    write_shards(windows, str(folder / "shards"), chunk_bytes="8MB")
    if endpoint is not None:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        write_shards(windows, "s3://bench/shards", chunk_bytes="8MB", storage_options={"endpoint_url": endpoint})
    return Sources(folder, seq_len, load_tokenizer(str(folder / "tok")).vocab_size, endpoint)


def training_loader(source: str, sources: Sources, batch_size: int, workers: int, run: int = 0) -> Any:
    """The shuffled training loader of ``source`` (one of :data:`SOURCES`); from the store, each ``run`` into its own
    empty download folder."""
    folder, seq_len, tok = sources.folder, sources.seq_len, sources.tokenizer
    if source == "hf_dataset":
        hf = HFDataset(
            str(folder / "docs.parquet"),
            text_column="text",
            tokenizer=tok,
            seq_len=seq_len,
            num_workers=workers,
            cache_dir=str(folder / "cache"),
        )
        return hf.dataloader(batch_size, train=True)
    if source == "streaming":
        return StreamingShards(str(folder / "shards"), num_workers=workers).dataloader(batch_size, train=True)
    if source == "streaming_store":
        options = {"endpoint_url": str(sources.endpoint), "local_folder": str(folder / f"downloaded-{run}")}
        return StreamingShards("s3://bench/shards", options, num_workers=workers).dataloader(batch_size, train=True)
    if source == "text_files":
        return text_file_dataloader([folder / "corpus.txt"], seq_len, batch_size, num_workers=workers, tokenizer=tok)
    if source == "python_docs":
        return python_docs_dataloaders(seq_len, batch_size, num_workers=workers, tokenizer=tok)[0]
    raise ValueError(f"source={source!r}; expected one of {SOURCES}.")


def tiny_gpt(sources: Sources) -> GPT:
    """A 2-layer GPT (width 64) over the tokenizer's vocabulary, seeded."""
    torch.manual_seed(0)
    return GPT(GPTConfig(sources.vocab_size, sources.seq_len, n_layer=2, n_head=2, n_embd=64))
