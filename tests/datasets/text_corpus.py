"""A tiny seeded corpus and a BPE tokenizer trained on it in the test (a fraction of a second)."""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["WORDS", "documents", "trained_tokenizer"]

WORDS = ("alpha", "beta", "gamma", "delta", "loss", "model", "token", "train", "epoch", "batch", "naïve", "über")


def documents(count: int, seed: int = 0) -> list[str]:
    """``count`` documents of a few seeded sentences over :data:`WORDS`."""
    rng = random.Random(seed)
    return [
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(rng.randint(1, 4)))
        for _ in range(count)
    ]


def trained_tokenizer(folder: Path, vocab_size: int = 300) -> Path:
    """The folder of a BPE tokenizer trained by ``composer tokenizer train`` on a seeded corpus written in ``folder``."""
    from composer.cli.__main__ import main

    corpus = folder / "corpus.txt"
    corpus.write_text("\n\n".join(documents(200, seed=1)), encoding="utf-8")
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", str(vocab_size), "--out", str(folder / "tok")]) == 0
    return folder / "tok"
