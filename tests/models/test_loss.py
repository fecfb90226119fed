"""soft_cross_entropy against F.cross_entropy and a hand computation."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from composer.models.loss import soft_cross_entropy


def _logits(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_index_targets_match_cross_entropy(reduction):
    logits = _logits(6, 4)
    targets = torch.tensor([0, 3, 1, 1, 2, -100])
    weight = torch.tensor([1.0, 2.0, 0.5, 1.0])
    expected = F.cross_entropy(logits, targets, weight=weight, reduction=reduction)
    assert torch.allclose(soft_cross_entropy(logits, targets, weight=weight, reduction=reduction), expected)


def test_index_targets_with_extra_dimensions():
    logits = _logits(2, 5, 7)  # (N, C, L), as for a language model
    targets = torch.randint(0, 5, (2, 7), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(soft_cross_entropy(logits, targets), F.cross_entropy(logits, targets))


def test_soft_targets_match_hand_computation():
    logits = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    targets = torch.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    hand = []
    for row, target in zip(logits.tolist(), targets.tolist()):
        log_norm = math.log(sum(math.exp(v) for v in row))
        hand.append(-sum(t * (v - log_norm) for v, t in zip(row, target)))
    assert torch.allclose(soft_cross_entropy(logits, targets, reduction="none"), torch.tensor(hand))
    assert torch.allclose(soft_cross_entropy(logits, targets), torch.tensor(sum(hand) / 2))
    assert torch.allclose(soft_cross_entropy(logits, targets, reduction="sum"), torch.tensor(sum(hand)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_one_hot_equals_index_targets(reduction):
    logits = _logits(8, 5)
    indices = torch.randint(0, 5, (8,), generator=torch.Generator().manual_seed(2))
    one_hot = F.one_hot(indices, 5)  # int64: converted to the logits' dtype
    assert torch.allclose(
        soft_cross_entropy(logits, one_hot, reduction=reduction),
        soft_cross_entropy(logits, indices, reduction=reduction),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_targets_with_weight_match_torch_probability_targets(reduction):
    logits = _logits(4, 3, 2)
    targets = torch.softmax(_logits(4, 3, 2, seed=5), dim=1)
    weight = torch.tensor([0.5, 1.0, 2.0])
    expected = F.cross_entropy(logits, targets, weight=weight, reduction=reduction)
    assert torch.allclose(soft_cross_entropy(logits, targets, weight=weight, reduction=reduction), expected)


def test_gradient_flows():
    logits = _logits(3, 4).requires_grad_()
    soft_cross_entropy(logits, torch.full((3, 4), 0.25)).backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_unknown_reduction_lists_choices():
    with pytest.raises(ValueError, match=r"'avg'.*\['mean', 'sum', 'none'\]"):
        soft_cross_entropy(_logits(2, 3), torch.tensor([0, 1]), reduction="avg")


@pytest.mark.parametrize(
    "target",
    [torch.zeros(4, dtype=torch.long), torch.zeros(2, 4), torch.zeros(2, 3, 1), torch.tensor([0.0, 1.0])],
)
def test_bad_shapes_name_both(target):
    expected = re.escape(f"input of shape (2, 3) and target of shape {tuple(target.shape)}")
    with pytest.raises(ValueError, match=expected):
        soft_cross_entropy(_logits(2, 3), target)


def test_input_without_batch_dimension():
    with pytest.raises(ValueError, match="unsqueeze"):
        soft_cross_entropy(_logits(3), torch.tensor(1))
