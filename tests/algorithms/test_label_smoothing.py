"""smooth_labels against the formula (1 - a) * one_hot + a / C, and LabelSmoothing's swap and restore in the Trainer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import LabelSmoothing, LabelSmoothingHparams
from composer.core import Callback, Event
from composer.functional import smooth_labels
from composer.models import soft_cross_entropy
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def reference(targets: torch.Tensor, num_classes: int, alpha: float) -> torch.Tensor:
    """(1 - alpha) * one_hot(targets) + alpha / C, with the class dimension moved to dim 1."""
    one_hot = F.one_hot(targets, num_classes).double()
    one_hot = one_hot.movedim(-1, 1)
    return ((1 - alpha) * one_hot + alpha / num_classes).float()


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 1.0])
def test_index_targets_match_formula(alpha: float):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=g)
    targets = torch.randint(0, 5, (6,), generator=g)
    smoothed = smooth_labels(logits, targets, alpha)
    torch.testing.assert_close(smoothed, reference(targets, 5, alpha))
    torch.testing.assert_close(smoothed.sum(dim=1), torch.ones(6))


def test_extra_dimensions_match_formula():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4, 3, 3, generator=g)  # a segmentation-like output (N, C, H, W)
    targets = torch.randint(0, 4, (2, 3, 3), generator=g)
    torch.testing.assert_close(smooth_labels(logits, targets, 0.3), reference(targets, 4, 0.3))


def test_dense_targets_match_formula():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(5, 3, generator=g)
    dense = torch.softmax(torch.randn(5, 3, generator=g), dim=1)
    torch.testing.assert_close(smooth_labels(logits, dense, 0.2), 0.8 * dense + 0.2 / 3)


def test_dense_one_hot_equals_index_targets():
    targets = torch.tensor([2, 0, 1])
    logits = torch.zeros(3, 3)
    one_hot = F.one_hot(targets, 3).float()
    torch.testing.assert_close(smooth_labels(logits, one_hot, 0.4), smooth_labels(logits, targets, 0.4))


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), True, "0.1"])
def test_alpha_out_of_range_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        smooth_labels(torch.zeros(2, 3), torch.tensor([0, 1]), alpha)
    with pytest.raises(ValueError, match="alpha"):
        LabelSmoothing(alpha)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="logits"):
        smooth_labels(torch.zeros(3), torch.tensor([0, 1, 2]), 0.1)
    with pytest.raises(ValueError, match="shape"):
        smooth_labels(torch.zeros(3, 4), torch.tensor([0, 1]), 0.1)
    with pytest.raises(ValueError, match="dense"):
        smooth_labels(torch.zeros(3, 4), torch.zeros(3, 5), 0.1)


def test_hparams_validate_alpha():
    assert LabelSmoothingHparams(alpha=0.1).initialize_object().alpha == 0.1
    with pytest.raises(ValueError, match="alpha"):
        LabelSmoothingHparams(alpha=2.0)


class TargetRecorder(Callback):
    """Records the targets and loss the loop holds at BEFORE_LOSS and AFTER_LOSS (callbacks run after algorithms)."""

    def __init__(self) -> None:
        self.before: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.after: list[tuple[torch.Tensor, torch.Tensor]] = []

    def before_loss(self, state, logger) -> None:
        self.before.append((state.batch_pair[1].clone(), state.outputs.detach().clone()))

    def after_loss(self, state, logger) -> None:
        self.after.append((state.batch_pair[1].clone(), state.loss.detach().clone()))


def test_trainer_smooths_before_loss_and_restores_after():
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(12, 3, 8, 8, generator=g), torch.randint(0, 4, (12,), generator=g))
    loader = DataLoader(data, batch_size=4)
    recorder = TargetRecorder()
    trainer = Trainer(
        model=cifar_resnet(depth=8, num_classes=4),
        train_dataloader=loader,
        max_duration="3ba",
        algorithms=[LabelSmoothing(alpha=0.2)],
        callbacks=[recorder],
        device="cpu",
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    assert len(recorder.before) == len(recorder.after) == 3
    for (_, labels), (smoothed, outputs), (restored, loss) in zip(loader, recorder.before, recorder.after):
        torch.testing.assert_close(smoothed, reference(labels, 4, 0.2))  # the loss saw smoothed targets...
        torch.testing.assert_close(loss, soft_cross_entropy(outputs, reference(labels, 4, 0.2)))
        assert restored.dtype == torch.int64 and torch.equal(restored, labels)  # ...and the batch got its labels back


def test_event_pair_on_a_bare_state():
    from composer.core import Logger, State

    model = torch.nn.Linear(2, 3)
    state = State(model=model, max_duration="1ep")
    labels = torch.tensor([0, 2])
    state.batch = (torch.randn(2, 2), labels)
    state.outputs = torch.zeros(2, 3)
    algorithm = LabelSmoothing(alpha=0.3)
    assert algorithm.match(Event.BEFORE_LOSS, state) and algorithm.match(Event.AFTER_LOSS, state)
    assert not algorithm.match(Event.AFTER_DATALOADER, state)
    algorithm.apply(Event.BEFORE_LOSS, state, Logger(state))
    torch.testing.assert_close(state.batch[1], reference(labels, 3, 0.3))
    algorithm.apply(Event.AFTER_LOSS, state, Logger(state))
    assert state.batch[1] is labels
