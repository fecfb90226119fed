"""mask_tokens and MaskingCollator against BERT's 80/10/10 rule, and the masked text loaders."""

from __future__ import annotations

import pytest
import torch

from composer.datasets import (
    BYTE_MASK_TOKEN_ID,
    ByteTextDataset,
    MaskingCollator,
    load_python_docs,
    mask_token_id_of,
    mask_tokens,
    python_docs_dataloaders,
    text_file_dataloader,
)

MASK = 999
VOCAB = 500
# Ids in [1, 500): never equal to MASK, so a masked position is recognisable.
IDS = torch.randint(1, VOCAB, (64, 512), generator=torch.Generator().manual_seed(0))


def _mask(ids: torch.Tensor = IDS, seed: int = 0, **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
    return mask_tokens(ids, MASK, VOCAB, generator=torch.Generator().manual_seed(seed), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_chosen_fraction_is_the_probability(probability: float):
    _, labels = _mask(mlm_probability=probability)
    chosen = (labels != -100).float().mean().item()
    # 32,768 draws: the standard error is under 0.003.
    assert chosen == pytest.approx(probability, abs=0.01)


def test_chosen_tokens_split_80_10_10():
    masked, labels = _mask(mlm_probability=0.3)
    chosen = labels != -100
    n = chosen.sum().item()
    to_mask = (masked[chosen] == MASK).float().sum().item() / n
    kept = (masked[chosen] == IDS[chosen]).float().sum().item() / n
    changed = 1.0 - to_mask - kept
    assert to_mask == pytest.approx(0.8, abs=0.015)
    # A random replacement equals the original with probability 1/499, so "kept" is 10% plus that sliver.
    assert kept == pytest.approx(0.1 + 0.1 / VOCAB, abs=0.01)
    assert changed == pytest.approx(0.1 - 0.1 / VOCAB, abs=0.01)
    replacements = masked[chosen & (masked != MASK) & (masked != IDS)]
    assert replacements.min() >= 0 and replacements.max() < VOCAB


def test_labels_are_minus_100_exactly_where_not_chosen():
    masked, labels = _mask()
    chosen = labels != -100
    assert torch.equal(labels[chosen], IDS[chosen])
    assert torch.equal(masked[~chosen], IDS[~chosen])  # unchosen tokens are never changed
    # Every changed position is a chosen one.
    assert not bool(((masked != IDS) & ~chosen).any())
    assert not torch.equal(IDS, labels) and IDS.dtype == masked.dtype == labels.dtype


def test_same_generator_seed_gives_the_same_masks_and_another_seed_others():
    first, second, other = _mask(seed=3), _mask(seed=3), _mask(seed=4)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not torch.equal(first[1], other[1])
    before = IDS.clone()
    _mask()
    assert torch.equal(IDS, before)  # the input is not changed


def test_special_and_padding_tokens_are_never_chosen():
    ids = IDS.clone()
    ids[:, :4] = 0  # padding
    ids[:, 4] = 7  # a [CLS]-like token
    attention_mask = torch.ones_like(ids)
    attention_mask[:, -10:] = 0
    masked, labels = _mask(ids, mlm_probability=0.5, special_token_ids=[0, 7], maskable=attention_mask != 0)
    assert bool((labels[:, :5] == -100).all()) and bool((labels[:, -10:] == -100).all())
    assert torch.equal(masked[:, :5], ids[:, :5]) and torch.equal(masked[:, -10:], ids[:, -10:])
    assert (labels[:, 5:-10] != -100).float().mean().item() == pytest.approx(0.5, abs=0.02)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"mlm_probability": 1.5}, r"mlm_probability must be in \(0, 1\), got 1.5; BERT uses 0.15"),
        ({"mlm_probability": 0.0}, r"mlm_probability must be in \(0, 1\), got 0.0"),
        ({"mask_token_id": -1}, "mask_token_id must be a non-negative token id, got -1"),
        ({"vocab_size": 0}, "vocab_size must be a positive int"),
        ({"input_ids": IDS.float()}, "input_ids must be an integer tensor of token ids, got a torch.float32 tensor"),
        ({"maskable": torch.ones(2, 2, dtype=torch.bool)}, r"maskable must have the shape of input_ids \(64, 512\)"),
    ],
)
def test_bad_arguments_are_explained(kwargs: dict[str, object], match: str):
    arguments: dict[str, object] = {"input_ids": IDS, "mask_token_id": MASK, "vocab_size": VOCAB, **kwargs}
    with pytest.raises(ValueError, match=match):
        mask_tokens(**arguments)  # type: ignore[arg-type]


def test_mask_token_comes_from_the_config_or_the_byte_vocabulary():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=300)
    assert mask_token_id_of(config) == BYTE_MASK_TOKEN_ID == 256
    config.mask_token_id = 103
    assert mask_token_id_of(config) == 103


def test_collator_masks_batches_and_a_seeded_one_repeats_them():
    dataset = ByteTextDataset(load_python_docs("validation")[:40_000], seq_len=100)
    samples = [dataset[i] for i in range(32)]
    seeded = MaskingCollator(BYTE_MASK_TOKEN_ID, seed=5)
    batch = seeded(samples)
    assert batch["input_ids"].shape == batch["labels"].shape == (32, 100)
    chosen = batch["labels"] != -100
    original = torch.stack([s["input_ids"] for s in samples])
    assert torch.equal(batch["labels"][chosen], original[chosen])
    assert (batch["input_ids"][chosen] == BYTE_MASK_TOKEN_ID).float().mean().item() == pytest.approx(0.8, abs=0.06)
    assert torch.equal(seeded(samples)["input_ids"], batch["input_ids"])  # the same batch, the same masks
    assert not torch.equal(MaskingCollator(BYTE_MASK_TOKEN_ID, seed=6)(samples)["labels"], batch["labels"])
    torch.manual_seed(0)
    unseeded = MaskingCollator(BYTE_MASK_TOKEN_ID)
    assert not torch.equal(unseeded(samples)["labels"], unseeded(samples)["labels"])  # training: new masks each time
    with pytest.raises(ValueError, match="expects samples that are dicts with an 'input_ids' entry, got Tensor"):
        seeded([torch.zeros(3)])  # type: ignore[list-item]


def test_collator_never_masks_padding_marked_by_the_attention_mask():
    attention_mask = torch.ones(100, dtype=torch.long)
    attention_mask[80:] = 0
    samples = [{"input_ids": IDS[i, :100], "attention_mask": attention_mask} for i in range(16)]
    batch = MaskingCollator(MASK, vocab_size=VOCAB, mlm_probability=0.5, seed=0)(samples)
    assert bool((batch["labels"][:, 80:] == -100).all())
    assert torch.equal(batch["input_ids"][:, 80:], IDS[:16, 80:100])


def test_python_docs_loaders_mask_when_asked_and_evaluation_masks_repeat():
    train_dl, eval_dl = python_docs_dataloaders(seq_len=64, batch_size=16, mlm_probability=0.15, mask_token_id=300)
    for loader in (train_dl, eval_dl):
        batch = next(iter(loader))
        chosen = batch["labels"] != -100
        assert 0.05 < chosen.float().mean().item() < 0.3
        assert bool((batch["input_ids"][chosen] == 300).any()) and not bool((batch["input_ids"][~chosen] == 300).any())
    assert torch.equal(next(iter(eval_dl))["input_ids"], next(iter(eval_dl))["input_ids"])
    plain, _ = python_docs_dataloaders(seq_len=64, batch_size=16)
    batch = next(iter(plain))
    assert torch.equal(batch["input_ids"], batch["labels"])  # causal language modelling is unchanged


def test_text_file_loader_masks_when_asked(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("All work and no play makes Jack a dull boy. " * 50)
    loader = text_file_dataloader([path], seq_len=32, batch_size=8, mlm_probability=0.3, shuffle=False)
    batch = next(iter(loader))
    chosen = batch["labels"] != -100
    assert bool(chosen.any()) and bool((~chosen).any())
    assert bool((batch["input_ids"][chosen] == BYTE_MASK_TOKEN_ID).any())
    with pytest.raises(ValueError, match=r"mlm_probability must be in \(0, 1\)"):
        text_file_dataloader([path], seq_len=32, batch_size=8, mlm_probability=2.0)
