"""Synthetic datasets: shapes, determinism per seed, learnability, token counts."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from composer.core.data_spec import num_tokens_in_batch
from composer.datasets import SyntheticClassificationDataset, SyntheticTokenDataset


def test_classification_shapes_and_dtypes():
    dataset = SyntheticClassificationDataset(num_samples=50, shape=(3, 4, 4), num_classes=5)
    x, y = dataset[7]
    assert len(dataset) == 50
    assert x.shape == (3, 4, 4) and x.dtype == torch.float32
    assert y.shape == () and y.dtype == torch.int64
    assert dataset.targets.min() >= 0 and dataset.targets.max() < 5
    assert SyntheticClassificationDataset(10, 6, 2)[0][0].shape == (6,)  # an int shape


def test_classification_stores_8_bit_images_and_converts_them_per_sample():
    dataset = SyntheticClassificationDataset(num_samples=2000, shape=(1, 4, 4), num_classes=3, seed=0)
    assert dataset.images.dtype == torch.uint8 and dataset.images.shape == (2000, 1, 4, 4)
    # The default transform gives back x = (pixel - 128) / 32, which is what the labels were computed from.
    assert torch.equal(dataset.inputs, (dataset.images.double() - 128).div(32).float())
    assert all(torch.equal(dataset[i][0], dataset.inputs[i]) for i in (0, 7, 1999))
    assert torch.equal(dataset.targets, dataset.labels)
    # Still a standard normal, to within the quantization (steps of 1/32) and the clipping at about 4 std.
    assert abs(dataset.inputs.mean().item()) < 0.03 and abs(dataset.inputs.std().item() - 1.0) < 0.03
    dataset.transform = None
    assert dataset[0][0].dtype == torch.uint8


def test_classification_is_deterministic_per_seed_and_ignores_global_rng():
    torch.manual_seed(123)
    a = SyntheticClassificationDataset(64, (8,), 4, seed=3)
    torch.manual_seed(456)
    b = SyntheticClassificationDataset(64, (8,), 4, seed=3)
    c = SyntheticClassificationDataset(64, (8,), 4, seed=4)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


def test_classification_sets_with_one_label_seed_share_the_rule():
    small = SyntheticClassificationDataset(10, (8,), 4, seed=0)
    large = SyntheticClassificationDataset(100, (8,), 4, seed=0)
    other_rule = SyntheticClassificationDataset(100, (8,), 4, seed=0, label_seed=1)
    assert torch.equal(small.targets, large.targets[:10])
    assert not torch.equal(large.targets, other_rule.targets)


def test_classification_uses_every_class():
    dataset = SyntheticClassificationDataset(500, (16,), 5, seed=0)
    assert set(dataset.targets.tolist()) == set(range(5))


def test_logistic_regression_fits_and_generalizes():
    train = SyntheticClassificationDataset(1000, (8,), 4, seed=0)
    held_out = SyntheticClassificationDataset(500, (8,), 4, seed=1)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(200):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(train.inputs), train.targets).backward()
        optimizer.step()
    with torch.no_grad():
        train_accuracy = (model(train.inputs).argmax(1) == train.targets).float().mean().item()
        held_out_accuracy = (model(held_out.inputs).argmax(1) == held_out.targets).float().mean().item()
    assert train_accuracy > 0.95
    assert held_out_accuracy > 0.9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_samples": 0, "shape": (2,), "num_classes": 2}, "num_samples"),
        ({"num_samples": 4, "shape": (2, 0), "num_classes": 2}, "shape"),
        ({"num_samples": 4, "shape": (2,), "num_classes": 1}, "num_classes"),
    ],
)
def test_classification_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticClassificationDataset(**kwargs)


def test_token_samples():
    dataset = SyntheticTokenDataset(num_samples=32, seq_len=16, vocab_size=50, seed=0)
    sample = dataset[3]
    assert sorted(sample) == ["attention_mask", "input_ids", "labels"]
    assert all(v.shape == (16,) and v.dtype == torch.int64 for v in sample.values())
    mask = dataset.attention_mask.bool()
    assert (dataset.input_ids[mask] >= 1).all() and (dataset.input_ids[mask] < 50).all()
    assert (dataset.input_ids[~mask] == 0).all() and (dataset.labels[~mask] == -100).all()
    assert torch.equal(dataset.labels[mask], dataset.input_ids[mask])
    # padding only at the end, and every sequence has at least one token
    assert torch.equal(mask, mask.cummin(dim=1).values) and mask[:, 0].all()
    assert not mask.all()  # with 32 random lengths in [1, 16], some sequences are padded


def test_token_dataset_is_deterministic_per_seed():
    a = SyntheticTokenDataset(8, 10, 20, seed=1)
    b = SyntheticTokenDataset(8, 10, 20, seed=1)
    c = SyntheticTokenDataset(8, 10, 20, seed=2)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.attention_mask, b.attention_mask)
    assert not torch.equal(a.input_ids, c.input_ids)


def test_token_counting_through_a_dataloader():
    dataset = SyntheticTokenDataset(num_samples=10, seq_len=12, vocab_size=30, seed=0)
    counted = sum(num_tokens_in_batch(batch) for batch in DataLoader(dataset, batch_size=4))
    assert counted == dataset.num_tokens == int(dataset.attention_mask.sum())
    assert dataset.num_tokens < 10 * 12


def test_token_validation():
    with pytest.raises(ValueError, match="vocab_size"):
        SyntheticTokenDataset(4, 8, vocab_size=1)
    with pytest.raises(ValueError, match="seq_len"):
        SyntheticTokenDataset(4, 0, vocab_size=10)
