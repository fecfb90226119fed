"""MosaicML Composer v0.32.1's scheduler classes: its signatures, and values against the formulas of its docstrings.

The references below are written out from v0.32.1's documented formulas, in batches, with its rule for the scale
schedule ratio: every time but ``'dur'`` stretches by ``ssr``, except a warmup with ``scale_warmup=False``.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch

from composer.core.state import State
from composer.optim import (
    ConstantScheduler,
    ConstantWithWarmupScheduler,
    CosineAnnealingScheduler,
    CosineAnnealingWarmRestartsScheduler,
    CosineAnnealingWithWarmupScheduler,
    ExponentialScheduler,
    LinearScheduler,
    LinearWithWarmupScheduler,
    MultiStepScheduler,
    MultiStepWithWarmupScheduler,
    PolynomialScheduler,
    PolynomialWithWarmupScheduler,
    StepScheduler,
    compile_composer_scheduler,
    cosine_annealing_with_warmup_scheduler,
)

EMPTY = inspect.Parameter.empty
# v0.32.1's constructors: argument names, in order, with their defaults.
SIGNATURES = {
    StepScheduler: [("step_size", EMPTY), ("gamma", 0.1)],
    MultiStepScheduler: [("milestones", EMPTY), ("gamma", 0.1)],
    ConstantScheduler: [("alpha", 1.0), ("t_max", "1dur")],
    LinearScheduler: [("alpha_i", 1.0), ("alpha_f", 0.0), ("t_max", "1dur")],
    ExponentialScheduler: [("gamma", EMPTY), ("decay_period", "1ep")],
    CosineAnnealingScheduler: [("t_max", "1dur"), ("alpha_f", 0.0)],
    CosineAnnealingWarmRestartsScheduler: [("t_0", EMPTY), ("t_mult", 1.0), ("alpha_f", 0.0)],
    PolynomialScheduler: [("power", EMPTY), ("t_max", "1dur"), ("alpha_f", 0.0)],
    MultiStepWithWarmupScheduler: [("t_warmup", EMPTY), ("milestones", EMPTY), ("gamma", 0.1), ("scale_warmup", False)],
    ConstantWithWarmupScheduler: [("t_warmup", EMPTY), ("alpha", 1.0), ("t_max", "1dur"), ("scale_warmup", False)],
    LinearWithWarmupScheduler: [
        ("t_warmup", EMPTY),
        ("alpha_i", 1.0),
        ("alpha_f", 0.0),
        ("t_max", "1dur"),
        ("scale_warmup", False),
    ],
    CosineAnnealingWithWarmupScheduler: [
        ("t_warmup", EMPTY),
        ("t_max", "1dur"),
        ("alpha_f", 0.0),
        ("scale_warmup", False),
    ],
    PolynomialWithWarmupScheduler: [
        ("t_warmup", EMPTY),
        ("power", 2.0),
        ("t_max", "1dur"),
        ("alpha_f", 0.0),
        ("scale_warmup", False),
    ],
}


@pytest.mark.parametrize("cls", list(SIGNATURES), ids=lambda cls: cls.__name__)
def test_the_signature_is_v0_32_1s(cls):
    parameters = inspect.signature(cls).parameters.values()
    assert [(p.name, p.default) for p in parameters] == SIGNATURES[cls]


def _at(batches: int, ssr: float) -> State:
    state = State(torch.nn.Linear(1, 1), max_duration="100ba", scale_schedule_ratio=ssr)
    for _ in range(batches):
        state.timer.on_batch_complete()
    return state


def _cos(tau: float, alpha_f: float) -> float:
    return alpha_f + (1 - alpha_f) * (1 + math.cos(math.pi * min(1.0, tau))) / 2


def _warmup_then(t, warmup, peak, after):
    return peak * t / warmup if t < warmup else after(t - warmup)


# (scheduler, reference(t, s, w) with t in batches, s the ratio, w the warmup length in batches)
CASES = [
    (StepScheduler("10ba", gamma=0.5), lambda t, s, w: 0.5 ** math.floor(t / (10 * s))),
    (MultiStepScheduler(["20ba", "50ba"], gamma=0.1), lambda t, s, w: 0.1 ** ((t >= 20 * s) + (t >= 50 * s))),
    (ConstantScheduler(alpha=0.3, t_max="40ba"), lambda t, s, w: 0.3 if t < 40 * s else 1.0),
    (LinearScheduler(alpha_i=1.0, alpha_f=0.2), lambda t, s, w: 1.0 + (0.2 - 1.0) * min(1.0, t / (100 * s))),
    (ExponentialScheduler(gamma=0.9, decay_period="10ba"), lambda t, s, w: 0.9 ** (t / (10 * s))),
    (CosineAnnealingScheduler(alpha_f=0.1), lambda t, s, w: _cos(t / (100 * s), 0.1)),
    (
        CosineAnnealingWarmRestartsScheduler("30ba", alpha_f=0.0),
        lambda t, s, w: _cos((t % (30 * s)) / (30 * s), 0.0),
    ),
    (PolynomialScheduler(power=2.0, alpha_f=0.1), lambda t, s, w: 0.1 + 0.9 * (1 - min(1.0, t / (100 * s))) ** 2),
    (
        LinearWithWarmupScheduler("10ba", alpha_i=0.8, alpha_f=0.1),
        lambda t, s, w: _warmup_then(t, w, 0.8, lambda u: 0.8 + (0.1 - 0.8) * min(1.0, u / (100 * s - w))),
    ),
    (ConstantWithWarmupScheduler("10ba", alpha=0.6), lambda t, s, w: _warmup_then(t, w, 0.6, lambda u: 0.6)),
    (
        CosineAnnealingWithWarmupScheduler("10ba", alpha_f=0.05),
        lambda t, s, w: _warmup_then(t, w, 1.0, lambda u: _cos(u / (100 * s - w), 0.05)),
    ),
    (
        PolynomialWithWarmupScheduler("10ba", power=3.0, alpha_f=0.1),
        lambda t, s, w: _warmup_then(t, w, 1.0, lambda u: 0.1 + 0.9 * (1 - min(1.0, u / (100 * s - w))) ** 3),
    ),
    (
        MultiStepWithWarmupScheduler("10ba", milestones=["5ba", "60ba"], gamma=0.5),  # a milestone inside the warmup
        lambda t, s, w: _warmup_then(t, w, 1.0, lambda u: 0.5 ** ((t >= 5 * s) + (t >= 60 * s))),
    ),
]


@pytest.mark.parametrize(("scheduler", "reference"), CASES, ids=lambda x: type(x).__name__)
def test_values_follow_v0_32_1s_formulas(scheduler, reference):
    for ssr in (1.0, 2.0):
        for scale_warmup in (False, True):
            if hasattr(scheduler, "scale_warmup"):
                scheduler.scale_warmup = scale_warmup
            warmup = 10 * ssr if scale_warmup else 10.0
            for t in (0, 3, 5, 9, 10, 15, 25, 50, 99, 100, 150, 199, 200, 250):
                expected = reference(t, ssr, warmup)
                assert scheduler(_at(t, ssr), ssr) == pytest.approx(expected, abs=1e-12), (t, ssr, scale_warmup)


def test_an_unscaled_warmup_is_the_difference_from_the_scheduler_functions():
    state = _at(5, 2.0)  # the run is 200 batches at ssr=2
    unscaled = CosineAnnealingWithWarmupScheduler(t_warmup="10ba")
    scaled = CosineAnnealingWithWarmupScheduler(t_warmup="10ba", scale_warmup=True)
    assert unscaled(state, 2.0) == 0.5  # 5 of an unscaled 10-batch warmup
    assert scaled(state, 2.0) == 0.25  # 5 of 20
    assert scaled(state, 2.0) == cosine_annealing_with_warmup_scheduler(state, ssr=2.0, warmup_time="10ba")
    at_one = _at(5, 1.0)
    assert unscaled(at_one) == scaled(at_one) == cosine_annealing_with_warmup_scheduler(at_one, warmup_time="10ba")
    assert "not scaled by ``ssr``" in (inspect.getdoc(CosineAnnealingWithWarmupScheduler) or "")  # documented


def test_compile_composer_scheduler_drives_the_optimizer():
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    state = State(model, max_duration="100ba", optimizers=optimizer)
    lr_scheduler = compile_composer_scheduler(LinearScheduler(alpha_i=1.0, alpha_f=0.0), state)
    for _ in range(25):
        optimizer.step()
        state.timer.on_batch_complete()
    lr_scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.75)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="t_warmup='ten batches' is not a valid time"):
        CosineAnnealingWithWarmupScheduler(t_warmup="ten batches")
    with pytest.raises(ValueError, match="alpha_f=-1 must be a finite number >= 0"):
        CosineAnnealingScheduler(alpha_f=-1)
    state = State(torch.nn.Linear(1, 1), max_duration="3ep")  # epochs, with no known epoch length
    with pytest.raises(ValueError, match="give them in one unit"):
        LinearWithWarmupScheduler(t_warmup="10ba")(_past_the_warmup(state))


def _past_the_warmup(state: State) -> State:
    for _ in range(11):
        state.timer.on_batch_complete()
    return state
