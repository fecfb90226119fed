"""DecoupledSGDW and DecoupledAdamW against hand-written updates, torch's optimizers, closures and state dicts."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from composer.optim.decoupled_weight_decay import DecoupledAdamW, DecoupledSGDW

W0 = [1.0, -2.0, 0.5]
GRADS = [[0.5, 1.0, -1.0], [0.25, -0.5, 2.0], [-1.0, 0.0, 0.5], [0.1, 0.2, 0.3]]


def _run(
    optimizer_class: Callable[..., torch.optim.Optimizer], lr_multipliers: list[float], **kwargs: Any
) -> list[float]:
    """Steps an optimizer over the fixed gradients, scaling the group's lr by a multiplier before each step."""
    w = torch.nn.Parameter(torch.tensor(W0, dtype=torch.float64))
    optimizer = optimizer_class([w], **kwargs)
    base_lr = optimizer.param_groups[0]["lr"]
    for grad, multiplier in zip(GRADS, lr_multipliers):
        optimizer.param_groups[0]["lr"] = base_lr * multiplier
        w.grad = torch.tensor(grad, dtype=torch.float64)
        optimizer.step()
    return w.detach().tolist()


def _sgdw_by_hand(
    lr: float, multipliers: list[float], momentum: float, dampening: float, weight_decay: float, nesterov: bool
) -> list[float]:
    w = list(W0)
    buffers: list[float] | None = None
    for grad, multiplier in zip(GRADS, multipliers):
        step_lr = lr * multiplier
        w = [x * (1 - multiplier * weight_decay) for x in w]  # lr / initial_lr == multiplier
        if momentum:
            if buffers is None:
                buffers = list(grad)
            else:
                buffers = [momentum * b + (1 - dampening) * g for b, g in zip(buffers, grad)]
            direction = [g + momentum * b for g, b in zip(grad, buffers)] if nesterov else buffers
        else:
            direction = grad
        w = [x - step_lr * d for x, d in zip(w, direction)]
    return w


def _adamw_by_hand(
    lr: float, multipliers: list[float], betas: tuple[float, float], eps: float, weight_decay: float, amsgrad: bool
) -> list[float]:
    w = list(W0)
    m = [0.0] * len(w)
    v = [0.0] * len(w)
    v_max = [0.0] * len(w)
    for k, (grad, multiplier) in enumerate(zip(GRADS, multipliers), start=1):
        w = [x * (1 - multiplier * weight_decay) for x in w]
        m = [betas[0] * a + (1 - betas[0]) * g for a, g in zip(m, grad)]
        v = [betas[1] * a + (1 - betas[1]) * g * g for a, g in zip(v, grad)]
        v_max = [max(a, b) for a, b in zip(v_max, v)]
        second = v_max if amsgrad else v
        m_hat = [a / (1 - betas[0] ** k) for a in m]
        v_hat = [a / (1 - betas[1] ** k) for a in second]
        w = [x - lr * multiplier * a / (math.sqrt(b) + eps) for x, a, b in zip(w, m_hat, v_hat)]
    return w


MULTIPLIERS = [1.0, 0.5, 0.25, 1.0]


@pytest.mark.parametrize(
    ("momentum", "dampening", "nesterov"), [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 0.3, False), (0.8, 0.0, True)]
)
@pytest.mark.parametrize("multipliers", [[1.0] * 4, MULTIPLIERS], ids=["constant_lr", "scheduled_lr"])
def test_sgdw_matches_hand_written_update(
    momentum: float, dampening: float, nesterov: bool, multipliers: list[float]
) -> None:
    kwargs = {"lr": 0.1, "momentum": momentum, "dampening": dampening, "weight_decay": 0.05, "nesterov": nesterov}
    expected = _sgdw_by_hand(0.1, multipliers, momentum, dampening, 0.05, nesterov)
    assert _run(DecoupledSGDW, multipliers, **kwargs) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("multipliers", [[1.0] * 4, MULTIPLIERS], ids=["constant_lr", "scheduled_lr"])
def test_adamw_matches_hand_written_update(amsgrad: bool, multipliers: list[float]) -> None:
    kwargs = {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.1, "amsgrad": amsgrad}
    expected = _adamw_by_hand(0.01, multipliers, (0.8, 0.9), 1e-6, 0.1, amsgrad)
    assert _run(DecoupledAdamW, multipliers, **kwargs) == pytest.approx(expected, rel=1e-12)


def test_without_decay_they_equal_torch_sgd_and_adam() -> None:
    sgd = {"lr": 0.1, "momentum": 0.9, "nesterov": True}
    assert _run(DecoupledSGDW, MULTIPLIERS, **sgd) == pytest.approx(_run(torch.optim.SGD, MULTIPLIERS, **sgd))
    adam = {"lr": 0.01, "amsgrad": True}
    assert _run(DecoupledAdamW, MULTIPLIERS, weight_decay=0.0, **adam) == pytest.approx(
        _run(torch.optim.Adam, MULTIPLIERS, **adam)
    )


def test_adamw_at_constant_lr_equals_torch_adamw_with_decay_divided_by_lr() -> None:
    # torch's AdamW decays by lr * wd, this one by wd: the same decay when torch's wd is ours / lr.
    ours = _run(DecoupledAdamW, [1.0] * 4, lr=0.01, weight_decay=1e-3)
    theirs = _run(torch.optim.AdamW, [1.0] * 4, lr=0.01, weight_decay=1e-3 / 0.01)
    assert ours == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize("optimizer_class", [DecoupledSGDW, DecoupledAdamW])
def test_closure_runs_before_the_decay(optimizer_class: Callable[..., torch.optim.Optimizer]) -> None:
    w = torch.nn.Parameter(torch.tensor([2.0, -1.0], dtype=torch.float64))
    optimizer = optimizer_class([w], lr=0.1, weight_decay=0.5)
    seen: list[list[float]] = []

    def closure() -> float:
        optimizer.zero_grad()
        seen.append(w.detach().tolist())
        loss = 0.5 * (w**2).sum()  # gradient = w
        loss.backward()
        return loss.item()

    loss = optimizer.step(closure)
    assert loss == pytest.approx(2.5)
    assert seen == [[2.0, -1.0]]
    if optimizer_class is DecoupledSGDW:
        # Gradient taken at the undecayed weights: w * (1 - 0.5) - 0.1 * w
        assert w.detach().tolist() == pytest.approx([2.0 * 0.5 - 0.2, -1.0 * 0.5 + 0.1])
    else:
        # First Adam step moves each weight by lr * sign(grad) after the decay.
        assert w.detach().tolist() == pytest.approx([2.0 * 0.5 - 0.1, -1.0 * 0.5 + 0.1], rel=1e-6)


@pytest.mark.parametrize("optimizer_class", [DecoupledSGDW, DecoupledAdamW])
def test_parameters_without_gradients_are_untouched(optimizer_class: Callable[..., torch.optim.Optimizer]) -> None:
    frozen = torch.nn.Parameter(torch.ones(3))
    trained = torch.nn.Parameter(torch.ones(3))
    optimizer = optimizer_class([frozen, trained], lr=0.1, weight_decay=0.5)
    trained.grad = torch.zeros(3)
    optimizer.step()
    assert torch.equal(frozen, torch.ones(3))
    assert torch.allclose(trained, torch.full((3,), 0.5))


@pytest.mark.parametrize(
    ("optimizer_class", "kwargs"),
    [(DecoupledSGDW, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}), (DecoupledAdamW, {"lr": 0.01})],
)
def test_state_dict_round_trip(optimizer_class: Callable[..., torch.optim.Optimizer], kwargs: dict[str, Any]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    inputs = torch.randn(8, 4)

    def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()

    train_step(model, optimizer)
    optimizer.param_groups[0]["lr"] *= 0.5  # as a schedule would
    train_step(model, optimizer)

    resumed_model = copy.deepcopy(model)
    resumed = optimizer_class(resumed_model.parameters(), lr=123.0)
    # deepcopy stands in for a checkpoint on disk: a live state dict shares its tensors with the optimizer.
    resumed.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    assert resumed.param_groups[0]["initial_lr"] == kwargs["lr"]  # the construction lr, not 123 nor the halved lr
    assert resumed.param_groups[0]["lr"] == kwargs["lr"] * 0.5

    for _ in range(2):
        train_step(model, optimizer)
        train_step(resumed_model, resumed)
    for a, b in zip(model.parameters(), resumed_model.parameters()):
        assert torch.equal(a, b)


def test_initial_lr_recorded_per_group_and_kept_by_torch_schedulers() -> None:
    a, b, c = (torch.nn.Parameter(torch.ones(1)) for _ in range(3))
    groups: list[dict[str, Any]] = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    optimizer = DecoupledSGDW(groups, lr=0.1)
    optimizer.add_param_group({"params": [c], "lr": 0.2})
    assert [group["initial_lr"] for group in optimizer.param_groups] == [0.1, 0.5, 0.2]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5)
    del scheduler
    assert [group["initial_lr"] for group in optimizer.param_groups] == [0.1, 0.5, 0.2]
    assert [group["lr"] for group in optimizer.param_groups] == pytest.approx([0.05, 0.25, 0.1])


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda p: DecoupledSGDW(p, lr=-0.1), "lr=-0.1"),
        (lambda p: DecoupledSGDW(p, lr=0.1, weight_decay=-1.0), "weight_decay=-1.0"),
        (lambda p: DecoupledSGDW(p, lr=0.1, nesterov=True), "nesterov=True needs momentum > 0"),
        (lambda p: DecoupledSGDW(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "dampening == 0"),
        (lambda p: DecoupledAdamW(p, betas=(0.9, 1.0)), r"betas=\(0.9, 1.0\)"),
        (lambda p: DecoupledAdamW(p, eps=-1.0), "eps=-1.0"),
    ],
)
def test_invalid_arguments(build: Callable[[list[torch.nn.Parameter]], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build([torch.nn.Parameter(torch.ones(1))])


def test_sparse_gradients_are_rejected() -> None:
    w = torch.nn.Parameter(torch.ones(3))
    optimizer = DecoupledAdamW([w])
    w.grad = torch.ones(3).to_sparse()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        optimizer.step()
