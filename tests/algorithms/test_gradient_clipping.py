"""GradientClipping: norm is torch's clip_grad_norm_, value is a clamp, adaptive follows the AGC formula."""

from __future__ import annotations

import copy

import pytest
import torch

from composer import Trainer
from composer.algorithms import GradientClipping, GradientClippingHparams
from composer.algorithms.gradient_clipping import apply_gradient_clipping
from composer.core import Callback, Logger, State
from tests.common import SimpleModel, make_dataloader


def _with_grads(seed: int = 0, scale: float = 10.0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    for p in model.parameters():
        p.grad = torch.randn_like(p) * scale
    return model


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]


@pytest.mark.parametrize("threshold", [0.5, 3.0, 1e6])
def test_norm_equals_torch_clip_grad_norm(threshold: float):
    ours, theirs = _with_grads(), _with_grads()
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in _grads(ours)]))
    apply_gradient_clipping(ours.parameters(), "norm", threshold)
    torch.nn.utils.clip_grad_norm_(theirs.parameters(), threshold)
    for a, b in zip(_grads(ours), _grads(theirs)):
        torch.testing.assert_close(a, b)
    # By hand: scaled by threshold / (norm + 1e-6) when the norm exceeds the threshold.
    factor = min(1.0, threshold / (float(norm) + 1e-6))
    for a, g in zip(_grads(ours), _grads(_with_grads())):
        torch.testing.assert_close(a, g * factor)


def test_value_is_a_clamp():
    model = _with_grads()
    before = _grads(model)
    apply_gradient_clipping(model, "value", 2.5)
    for a, g in zip(_grads(model), before):
        torch.testing.assert_close(a, g.clamp(-2.5, 2.5))


def test_adaptive_by_hand():
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[3.0, 4.0], [0.0, 1.0]]))  # row norms 5 and 1
        layer.bias.zero_()  # norm 0: measured against eps = 1e-3
    layer.weight.grad = torch.tensor([[0.6, 0.8], [3.0, 4.0]])  # row norms 1 and 5
    layer.bias.grad = torch.tensor([0.03, 0.04])  # norm 0.05
    apply_gradient_clipping(layer, "adaptive", 0.5)
    # Row 0: 1 <= 0.5 * 5, kept. Row 1: 5 > 0.5 * 1, scaled to norm 0.5.
    torch.testing.assert_close(layer.weight.grad, torch.tensor([[0.6, 0.8], [0.3, 0.4]]))
    # Bias: 0.05 > 0.5 * 1e-3, scaled to norm 5e-4.
    torch.testing.assert_close(layer.bias.grad, torch.tensor([3e-4, 4e-4]))


def test_adaptive_per_unit_for_conv_weights():
    conv = torch.nn.Conv2d(1, 2, 2, bias=False)
    with torch.no_grad():
        conv.weight.fill_(0.5)  # each of the 2 filters has norm 1
    conv.weight.grad = torch.stack([torch.full((1, 2, 2), 0.05), torch.full((1, 2, 2), 1.0)])  # norms 0.1 and 2
    apply_gradient_clipping(conv, "adaptive", 0.2)
    torch.testing.assert_close(conv.weight.grad[0], torch.full((1, 2, 2), 0.05))
    torch.testing.assert_close(conv.weight.grad[1], torch.full((1, 2, 2), 0.1))  # scaled to norm 0.2


def test_parameters_without_grad_are_skipped():
    layer = torch.nn.Linear(2, 2)
    layer.weight.grad = torch.full((2, 2), 10.0)
    for clipping_type in ("norm", "value", "adaptive"):
        apply_gradient_clipping(layer, clipping_type, 1.0)
    assert layer.bias.grad is None
    apply_gradient_clipping(torch.nn.Linear(1, 1), "norm", 1.0)  # no gradients at all: nothing to do


class GradNorms(Callback):
    def __init__(self) -> None:
        self.norms: list[float] = []

    def after_train_batch(self, state: State, logger: Logger) -> None:
        grads = [p.grad for p in state.model.parameters() if p.grad is not None]
        self.norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))


def _fit(algorithms, model, **kwargs) -> Trainer:
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration="2ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
        algorithms=algorithms,
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    return trainer


def test_algorithm_clips_before_the_step_and_matches_the_trainers_grad_clip_norm():
    torch.manual_seed(0)
    model = SimpleModel()
    twin = copy.deepcopy(model)
    norms = GradNorms()
    _fit([GradientClipping("norm", 0.05)], model, callbacks=[norms])
    assert max(norms.norms) <= 0.05 + 1e-6
    _fit([], twin, grad_clip_norm=0.05)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"clipping_type": "l2", "clipping_threshold": 1.0}, "clipping_type"),
        ({"clipping_type": "norm", "clipping_threshold": 0.0}, "clipping_threshold"),
        ({"clipping_type": "value", "clipping_threshold": -1.0}, "clipping_threshold"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GradientClipping(**kwargs)
    with pytest.raises(ValueError, match=name):
        GradientClippingHparams(**kwargs)
    with pytest.raises(ValueError, match=name):
        apply_gradient_clipping(torch.nn.Linear(1, 1), **kwargs)
