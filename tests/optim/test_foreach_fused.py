"""foreach and fused optimizer steps against the for-loop step, on a tiny model over several steps."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

from composer.optim import OPTIMIZERS
from composer.optim.decoupled_weight_decay import DecoupledAdamW, DecoupledSGDW


def _model() -> torch.nn.Module:
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    return model


def _train(
    make: Callable[[Any], torch.optim.Optimizer], steps: int = 6, lagging: bool = True
) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """Steps an optimizer on fixed batches with a schedule on the learning rate (so the decoupled decay changes).

    With ``lagging``, the last layer has no gradient on steps 0 and 3, so its state starts late and lags.
    """
    model = _model()
    optimizer = make(model.parameters())
    base_lr = optimizer.param_groups[0]["lr"]
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        x = torch.randn(8, 5, generator=generator)
        loss = model(x).square().mean() if step % 3 or not lagging else model[:3](x).square().mean()
        loss.backward()
        optimizer.param_groups[0]["lr"] = base_lr * (1.0 - 0.1 * step)
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()], copy.deepcopy(optimizer.state_dict())


def _assert_same(loop: tuple[list[torch.Tensor], dict[str, Any]], other: tuple[list[torch.Tensor], dict[str, Any]]):
    for a, b in zip(loop[0], other[0], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    states_a, states_b = loop[1]["state"], other[1]["state"]
    assert states_a.keys() == states_b.keys()
    for key in states_a:
        assert states_a[key].keys() == states_b[key].keys()
        for name, value in states_a[key].items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(states_b[key][name], value, rtol=1e-5, atol=1e-6)
            else:
                assert states_b[key][name] == value  # the step count stays an int in every kind


SGDW = [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True},
    {"lr": 0.1, "momentum": 0.8, "dampening": 0.3},
]
ADAMW = [{"lr": 0.01}, {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.05, "amsgrad": True}]


@pytest.mark.parametrize("kind", ["foreach", "fused"])
@pytest.mark.parametrize(
    "optimizer_class, kwargs",
    [(DecoupledSGDW, kwargs) for kwargs in SGDW] + [(DecoupledAdamW, kwargs) for kwargs in ADAMW],
)
def test_decoupled_foreach_and_fused_equal_the_loop(optimizer_class, kwargs, kind):
    loop = _train(lambda params: optimizer_class(params, **kwargs, foreach=False))
    _assert_same(loop, _train(lambda params: optimizer_class(params, **kwargs, **{kind: True})))


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw", "rmsprop", "decoupled_sgdw", "decoupled_adamw"])
def test_registry_optimizers_take_foreach_and_fused_and_step_as_the_loop(name):
    fields = {"lr": 0.01, "momentum": 0.9} if name in ("sgd", "decoupled_sgdw", "rmsprop") else {"lr": 0.01}
    # torch 2.14's SGD(fused=True) with momentum fails on a parameter whose first gradient comes after the first step
    # (DecoupledSGDW's fused step handles it, above), so every parameter has a gradient on every step here.
    loop = _train(
        lambda params: OPTIMIZERS[name].from_dict({**fields, "foreach": False}).initialize_object(params), lagging=False
    )
    kinds = ["foreach"] if name == "rmsprop" else ["foreach", "fused"]
    for kind in kinds:
        config = OPTIMIZERS[name].from_dict({**fields, kind: True})
        assert config.initialize_object(_model().parameters()).defaults[kind] is True
        _assert_same(loop, _train(lambda params, config=config: config.initialize_object(params), lagging=False))


def test_a_checkpoint_moves_between_step_kinds():
    model = _model()
    loop = DecoupledAdamW(model.parameters(), lr=0.01, foreach=False)
    model(torch.ones(1, 5)).sum().backward()
    loop.step()
    fused = DecoupledAdamW(model.parameters(), lr=0.01, fused=True)
    fused.load_state_dict(loop.state_dict())
    fused.step()
    loop.step()
    assert [s["step"] for s in fused.state.values()] == [2] * 6


def test_bad_step_kinds_name_the_argument():
    params = list(_model().parameters())
    with pytest.raises(ValueError, match="foreach=True and fused=True"):
        DecoupledSGDW(params, lr=0.1, foreach=True, fused=True)
    with pytest.raises(ValueError, match=r"DecoupledAdamW\(fused=True\) needs floating-point parameters .* 'meta'"):
        DecoupledAdamW([torch.nn.Parameter(torch.zeros(2, device="meta"))], fused=True)
    with pytest.raises(ValueError, match="foreach=True and fused=True"):
        OPTIMIZERS["adamw"].from_dict({"foreach": True, "fused": True})
    with pytest.raises(ValueError, match="fused"):  # torch has no fused RMSprop: the key is unknown
        OPTIMIZERS["rmsprop"].from_dict({"lr": 0.1, "fused": True})
    with pytest.raises(TypeError, match="fused='yes'"):
        DecoupledSGDW(params, lr=0.1, fused="yes")  # type: ignore[arg-type]
