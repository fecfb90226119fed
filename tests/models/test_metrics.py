"""Accuracy and CrossEntropy against hand counts, across several batches."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from composer.models.metrics import Accuracy, CrossEntropy


def test_accuracy_hand_count_across_batches():
    metric = Accuracy()
    # batch 1: predicted classes 0, 1, 2 vs targets 0, 1, 1 -> 2 correct of 3
    metric.update(torch.tensor([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]]), torch.tensor([0, 1, 1]))
    # batch 2: predicted 2, 0 vs targets 2, 1 -> 1 correct of 2
    metric.update(torch.tensor([[0.0, 1.0, 2.0], [3.0, 1.0, 0.0]]), torch.tensor([2, 1]))
    assert metric.compute().item() == pytest.approx(3 / 5)
    assert (metric.correct.item(), metric.total.item()) == (3, 5)


def test_accuracy_dense_targets_use_their_argmax():
    metric = Accuracy()
    preds = torch.tensor([[2.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    metric.update(preds, torch.tensor([[0.9, 0.1], [0.3, 0.7], [0.4, 0.6]]))  # true classes 0, 1, 1
    assert metric.compute().item() == pytest.approx(2 / 3)


def test_accuracy_with_extra_dimensions():
    metric = Accuracy()
    preds = torch.zeros(2, 3, 4)
    preds[:, 1] = 1.0  # every position predicts class 1
    target = torch.tensor([[1, 1, 0, 2], [1, 1, 1, 1]])
    metric.update(preds, target)
    assert metric.compute().item() == pytest.approx(6 / 8)


def test_accuracy_reset():
    metric = Accuracy()
    metric.update(torch.tensor([[1.0, 0.0]]), torch.tensor([1]))
    metric.reset()
    metric.update(torch.tensor([[1.0, 0.0]]), torch.tensor([0]))
    assert metric.compute().item() == 1.0


def test_accuracy_shape_mismatch():
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(5,\)"):
        Accuracy().update(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long))


def test_cross_entropy_is_the_mean_over_samples_not_batches():
    g = torch.Generator().manual_seed(0)
    logits = [torch.randn(3, 4, generator=g), torch.randn(1, 4, generator=g)]
    targets = [torch.tensor([0, 1, 3]), torch.tensor([2])]
    metric = CrossEntropy()
    for preds, target in zip(logits, targets):
        metric.update(preds, target)
    expected = F.cross_entropy(torch.cat(logits), torch.cat(targets))
    assert metric.compute().item() == pytest.approx(expected.item(), rel=1e-6)


def test_cross_entropy_hand_value_with_dense_targets():
    metric = CrossEntropy()
    metric.update(torch.zeros(2, 4), torch.full((2, 4), 0.25))  # uniform logits: log(4) per sample
    metric.update(torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 0.0]]))  # log(2)
    assert metric.compute().item() == pytest.approx((2 * math.log(4) + math.log(2)) / 3, rel=1e-6)


def test_cross_entropy_leaves_out_ignored_targets():
    metric = CrossEntropy()
    metric.update(torch.zeros(3, 2), torch.tensor([0, -100, 1]))
    assert metric.total.item() == 2
    assert metric.compute().item() == pytest.approx(math.log(2), rel=1e-6)


def test_cross_entropy_does_not_keep_the_graph():
    logits = torch.zeros(2, 3, requires_grad=True)
    metric = CrossEntropy()
    metric.update(logits * 2, torch.tensor([0, 1]))
    assert not metric.sum_loss.requires_grad
