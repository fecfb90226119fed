"""Scheduler functions against their formulas, the scale-schedule-ratio rule, to_lambda_lr(), and the scheduler configs."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from composer.core.state import State
from composer.core.time import Time
from composer.optim import scheduler as sched
from composer.optim.scheduler import (
    SCHEDULERS,
    ConstantLRHparams,
    CosineAnnealingLRHparams,
    CosineAnnealingWarmRestartsHparams,
    CosineAnnealingWithWarmupLRHparams,
    ExponentialLRHparams,
    LinearLRHparams,
    LinearWithWarmupLRHparams,
    MultiStepLRHparams,
    MultiStepWithWarmupLRHparams,
    PolynomialLRHparams,
    SchedulerHparams,
    StepLRHparams,
    constant_scheduler,
    cosine_annealing_scheduler,
    cosine_annealing_warm_restarts_scheduler,
    cosine_annealing_with_warmup_scheduler,
    exponential_scheduler,
    linear_scheduler,
    linear_with_warmup_scheduler,
    multi_step_scheduler,
    multi_step_with_warmup_scheduler,
    polynomial_scheduler,
    step_scheduler,
    to_lambda_lr,
)


def make_state(max_duration: str = "10ep", steps_per_epoch: int | None = 100, **kwargs: Any) -> State:
    return State(torch.nn.Linear(1, 1), max_duration=max_duration, steps_per_epoch=steps_per_epoch, **kwargs)


def set_time(state: State, batches: int, steps_per_epoch: int | None = None, epochs: int | None = None) -> State:
    """Moves the state's timer to ``batches`` batches (and the matching epoch count) by loading a timer state dict."""
    spe = steps_per_epoch or state.steps_per_epoch
    epoch = epochs if epochs is not None else (batches // spe if spe else 0)
    in_epoch = batches - epoch * spe if spe else batches
    state.timer.load_state_dict(
        {
            "epoch": epoch,
            "batch": batches,
            "batch_in_epoch": in_epoch,
            "sample": 0,
            "sample_in_epoch": 0,
            "token": 0,
            "token_in_epoch": 0,
        }
    )
    return state


def cosine(tau: float, low: float = 0.0) -> float:
    return low + (1 - low) * 0.5 * (1 + math.cos(math.pi * tau))


# ----- formulas (max_duration 10ep, 100 batches per epoch: '1dur' = 1000 batches) --------------------------------

FORMULA_CASES: list[tuple[str, Callable[..., float], dict[str, Any], int, float]] = [
    ("constant default", constant_scheduler, {"factor": 0.5}, 999, 0.5),
    ("constant default end", constant_scheduler, {"factor": 0.5}, 1000, 1.0),
    ("constant 3ep before", constant_scheduler, {"factor": 0.5, "total_time": "3ep"}, 299, 0.5),
    ("constant 3ep after", constant_scheduler, {"factor": 0.5, "total_time": "3ep"}, 300, 1.0),
    ("linear start", linear_scheduler, {"start_factor": 1.0, "end_factor": 0.2}, 0, 1.0),
    ("linear quarter", linear_scheduler, {"start_factor": 1.0, "end_factor": 0.2}, 250, 1.0 - 0.8 * 0.25),
    ("linear end", linear_scheduler, {"start_factor": 1.0, "end_factor": 0.2}, 1000, 0.2),
    ("linear past", linear_scheduler, {"start_factor": 0.5, "end_factor": 2.0, "total_time": "50ba"}, 70, 2.0),
    ("exponential 0", exponential_scheduler, {"gamma": 0.5}, 0, 1.0),
    ("exponential 1.5ep", exponential_scheduler, {"gamma": 0.5}, 150, 0.5**1.5),
    ("exponential 10ep", exponential_scheduler, {"gamma": 0.9}, 1000, 0.9**10),
    ("step before", step_scheduler, {"step_size": "2ep", "gamma": 0.5}, 199, 1.0),
    ("step at", step_scheduler, {"step_size": "2ep", "gamma": 0.5}, 200, 0.5),
    ("step twice", step_scheduler, {"step_size": "2ep", "gamma": 0.5}, 450, 0.25),
    ("multistep none", multi_step_scheduler, {"milestones": ["2ep", "500ba"]}, 199, 1.0),
    ("multistep one", multi_step_scheduler, {"milestones": ["2ep", "500ba"]}, 200, 0.1),
    ("multistep both", multi_step_scheduler, {"milestones": ["2ep", "500ba"], "gamma": 0.5}, 500, 0.25),
    ("cosine 0", cosine_annealing_scheduler, {"min_factor": 0.1}, 0, 1.0),
    ("cosine 0.3", cosine_annealing_scheduler, {"min_factor": 0.1}, 300, cosine(0.3, 0.1)),
    ("cosine end", cosine_annealing_scheduler, {"min_factor": 0.1}, 1000, 0.1),
    ("cosine past t_max", cosine_annealing_scheduler, {"t_max": "4ep"}, 700, 0.0),
    ("restarts mid 1", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 2.0}, 100, cosine(0.5)),
    ("restarts start 2", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 2.0}, 200, 1.0),
    ("restarts mid 2", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 2.0}, 400, cosine(0.5)),
    ("restarts start 3", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 2.0}, 600, 1.0),
    ("restarts 3", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 2.0}, 800, cosine(0.25)),
    # t_mult 0.5: cycles [0, 200), [200, 300), [300, 350), ... which add up to 400 batches.
    ("shrinking mid 2", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 0.5}, 250, cosine(0.5)),
    ("shrinking start 4", cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 0.5}, 350, 1.0),
    (
        "shrinking past limit",
        cosine_annealing_warm_restarts_scheduler,
        {"t_0": "2ep", "t_mult": 0.5, "min_factor": 0.2},
        450,
        0.2,
    ),
    ("restarts min", cosine_annealing_warm_restarts_scheduler, {"t_0": "1dur", "min_factor": 0.5}, 500, 0.75),
    ("polynomial", polynomial_scheduler, {"power": 2.0, "t_max": "5ep", "min_factor": 0.5}, 100, 0.5 + 0.5 * 0.8**2),
    # The original did not clip tau: (1 - 1.4) ** 2 would rise again after t_max.
    ("polynomial clipped", polynomial_scheduler, {"power": 2.0, "t_max": "5ep", "min_factor": 0.5}, 700, 0.5),
    ("polynomial default", polynomial_scheduler, {"power": 0.5}, 750, 0.25**0.5),
    ("ms warmup mid", multi_step_with_warmup_scheduler, {"warmup_time": "1ep", "milestones": ["3ep", "6ep"]}, 50, 0.5),
    ("ms warmup end", multi_step_with_warmup_scheduler, {"warmup_time": "1ep", "milestones": ["3ep", "6ep"]}, 100, 1.0),
    ("ms warmup m1", multi_step_with_warmup_scheduler, {"warmup_time": "1ep", "milestones": ["3ep", "6ep"]}, 300, 0.1),
    ("ms warmup m2", multi_step_with_warmup_scheduler, {"warmup_time": "1ep", "milestones": ["3ep", "6ep"]}, 650, 0.01),
    # A milestone inside the warmup: the warmup climbs to the value at its end, so there is no jump.
    ("ms inside warmup", multi_step_with_warmup_scheduler, {"warmup_time": "2ep", "milestones": ["1ep"]}, 100, 0.05),
    ("ms after warmup", multi_step_with_warmup_scheduler, {"warmup_time": "2ep", "milestones": ["1ep"]}, 200, 0.1),
    ("lin warmup 0", linear_with_warmup_scheduler, {"warmup_time": "1ep", "start_factor": 2.0}, 0, 0.0),
    ("lin warmup mid", linear_with_warmup_scheduler, {"warmup_time": "1ep", "start_factor": 2.0}, 50, 1.0),
    ("lin warmup end", linear_with_warmup_scheduler, {"warmup_time": "1ep", "start_factor": 2.0}, 100, 2.0),
    (
        "lin decay",
        linear_with_warmup_scheduler,
        {"warmup_time": "1ep", "start_factor": 2.0, "end_factor": 0.5},
        550,
        2.0 + (0.5 - 2.0) * 450 / 900,
    ),
    ("lin done", linear_with_warmup_scheduler, {"warmup_time": "1ep", "end_factor": 0.5}, 1000, 0.5),
    ("cos warmup mid", cosine_annealing_with_warmup_scheduler, {"warmup_time": "1ep"}, 25, 0.25),
    ("cos warmup end", cosine_annealing_with_warmup_scheduler, {"warmup_time": "1ep"}, 100, 1.0),
    ("cos half", cosine_annealing_with_warmup_scheduler, {"warmup_time": "1ep"}, 550, 0.5),
    ("cos min", cosine_annealing_with_warmup_scheduler, {"warmup_time": "1ep", "min_factor": 0.2}, 1000, 0.2),
    (
        "cos t_max",
        cosine_annealing_with_warmup_scheduler,
        {"warmup_time": "0.1dur", "t_max": "5ep", "min_factor": 0.2},
        300,
        cosine(0.5, 0.2),
    ),
]


@pytest.mark.parametrize(
    ("function", "kwargs", "batches", "expected"),
    [case[1:] for case in FORMULA_CASES],
    ids=[case[0] for case in FORMULA_CASES],
)
def test_formula(function: Callable[..., float], kwargs: dict[str, Any], batches: int, expected: float) -> None:
    state = set_time(make_state(), batches)
    assert function(state, **kwargs) == pytest.approx(expected, abs=1e-12)


def test_times_may_be_time_objects() -> None:
    state = set_time(make_state(), 450)
    assert step_scheduler(state, step_size=Time(2, "ep"), gamma=0.5) == step_scheduler(
        state, step_size="2ep", gamma=0.5
    )
    assert linear_scheduler(state, total_time=Time(0.5, "dur")) == pytest.approx(0.1)


def test_exponential_without_steps_per_epoch_uses_whole_epochs() -> None:
    state = set_time(make_state(steps_per_epoch=None), 250, epochs=2)
    assert exponential_scheduler(state, gamma=0.5) == 0.25


def test_epoch_times_without_steps_per_epoch_compare_epochs() -> None:
    state = set_time(make_state(steps_per_epoch=None), 999, epochs=4)
    assert step_scheduler(state, step_size="2ep", gamma=0.5) == 0.25
    assert cosine_annealing_scheduler(state) == pytest.approx(cosine(0.4))


def test_sample_budget_resolves_dur_in_samples() -> None:
    state = make_state(max_duration="1000sp", steps_per_epoch=None)
    state.timer.on_batch_complete(samples=250)
    assert linear_scheduler(state) == pytest.approx(0.75)


def test_batch_warmup_with_epoch_budget_needs_steps_per_epoch() -> None:
    state = make_state(max_duration="10ep", steps_per_epoch=None)
    with pytest.raises(ValueError, match="warmup_time='10ba'.*steps_per_epoch"):
        cosine_annealing_with_warmup_scheduler(state, warmup_time="10ba")


# ----- reference values of the original's tests (max_duration 1000ep, 1000 batches per epoch) --------------------


def _reference_state() -> State:
    return make_state(max_duration="1000ep", steps_per_epoch=1000)


@pytest.mark.parametrize(("batches", "expected"), [(3, 1.0), (8, 0.5), (18, 0.125)])
def test_reference_step(batches: int, expected: float) -> None:
    state = set_time(_reference_state(), batches)
    assert step_scheduler(state, ssr=0.5, step_size="10ba", gamma=0.5) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("batches", "expected"), [(0, 0.0), (125_000, 1.5), (250_000, 3.0), (375_500, 2.5), (501_000, 2.0), (502_000, 2.0)]
)
def test_reference_linear_with_warmup_scaled_warmup(batches: int, expected: float) -> None:
    # The original left warmups unscaled (0, 250k, 500k, 500.5k, ... batches); by the seed's rule the warmup of
    # 500ep * 0.5 ends at 250k batches and the decay runs to 1002ep * 0.5 = 501k.
    state = set_time(_reference_state(), batches)
    kwargs: dict[str, Any] = {"warmup_time": "500ep", "start_factor": 3.0, "end_factor": 2.0, "total_time": "1002ep"}
    assert linear_with_warmup_scheduler(state, ssr=0.5, **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(("batches", "expected"), [(0, 1.0), (10, 0.75), (15, 0.5), (20, 0.25), (30, 1.0), (40, 0.75)])
def test_reference_warm_restarts(batches: int, expected: float) -> None:
    state = set_time(_reference_state(), batches)
    assert cosine_annealing_warm_restarts_scheduler(state, t_0="30ba") == pytest.approx(expected)


@pytest.mark.parametrize(("batches", "expected"), [(0, 1.0), (10, 0.905), (20, 0.82), (50, 0.625)])
def test_reference_polynomial(batches: int, expected: float) -> None:
    state = set_time(_reference_state(), batches)
    assert polynomial_scheduler(state, power=2.0, t_max="100ba", min_factor=0.5) == pytest.approx(expected)


# ----- the scale schedule ratio: value(t, ssr=1, budget M) == value(t * s, ssr=s, budget M * s) ----------------

SSR_CASES: list[tuple[Callable[..., float], dict[str, Any]]] = [
    (constant_scheduler, {"factor": 0.3}),
    (constant_scheduler, {"factor": 0.3, "total_time": "3ep"}),
    (linear_scheduler, {"start_factor": 1.5, "end_factor": 0.1}),
    (linear_scheduler, {"total_time": "400ba"}),
    (exponential_scheduler, {"gamma": 0.7}),
    (step_scheduler, {"step_size": "2ep", "gamma": 0.5}),
    (step_scheduler, {"step_size": "0.15dur", "gamma": 0.5}),
    (multi_step_scheduler, {"milestones": ["2ep", "550ba", "0.8dur"], "gamma": 0.3}),
    (cosine_annealing_scheduler, {"min_factor": 0.1}),
    (cosine_annealing_scheduler, {"t_max": "6ep"}),
    (cosine_annealing_warm_restarts_scheduler, {"t_0": "2ep", "t_mult": 1.5}),
    (cosine_annealing_warm_restarts_scheduler, {"t_0": "0.25dur"}),
    (cosine_annealing_warm_restarts_scheduler, {"t_0": "300ba", "t_mult": 0.5}),
    (polynomial_scheduler, {"power": 2.0}),
    (polynomial_scheduler, {"power": 0.5, "t_max": "700ba", "min_factor": 0.1}),
    (multi_step_with_warmup_scheduler, {"warmup_time": "1ep", "milestones": ["4ep", "0.7dur"]}),
    (multi_step_with_warmup_scheduler, {"warmup_time": "0.1dur", "milestones": ["50ba"]}),
    (linear_with_warmup_scheduler, {"warmup_time": "150ba", "start_factor": 2.0, "end_factor": 0.5}),
    (linear_with_warmup_scheduler, {"warmup_time": "0.2dur", "total_time": "8ep"}),
    (cosine_annealing_with_warmup_scheduler, {"warmup_time": "1ep", "min_factor": 0.05}),
    (cosine_annealing_with_warmup_scheduler, {"warmup_time": "0.1dur", "t_max": "0.9dur"}),
]
SSR_IDS = [f"{function.__name__}-{kwargs}" for function, kwargs in SSR_CASES]
SSR_POINTS = [0, 2, 50, 74, 100, 150, 200, 250, 300, 350, 400, 550, 600, 700, 800, 900, 998, 1000, 1100]


@pytest.mark.parametrize("budget", [("ep", 10, 100), ("ba", 1000, 100)], ids=["epochs", "batches"])
@pytest.mark.parametrize("s", [0.5, 2.0])
@pytest.mark.parametrize(("function", "kwargs"), SSR_CASES, ids=SSR_IDS)
def test_ssr_rule(
    function: Callable[..., float], kwargs: dict[str, Any], s: float, budget: tuple[str, int, int | None]
) -> None:
    unit, length, steps_per_epoch = budget
    base = make_state(f"{length}{unit}", steps_per_epoch=steps_per_epoch)
    scaled = make_state(f"{int(length * s)}{unit}", steps_per_epoch=steps_per_epoch)
    for t in SSR_POINTS:
        expected = function(set_time(base, t), ssr=1.0, **kwargs)
        actual = function(set_time(scaled, int(t * s)), ssr=s, **kwargs)
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-12), f"t={t}"


def test_ssr_scales_warmups() -> None:
    # The original left warmups unscaled; the seed's rule scales them too.
    state = set_time(make_state("5ep"), 50)
    assert cosine_annealing_with_warmup_scheduler(state, ssr=0.5, warmup_time="2ep") == pytest.approx(0.5)


# ----- bounds and shape ---------------------------------------------------------------------------------------------


def test_warmups_rise_monotonically_from_zero() -> None:
    state = make_state()
    warmups = [
        functools.partial(linear_with_warmup_scheduler, warmup_time="2ep"),
        functools.partial(cosine_annealing_with_warmup_scheduler, warmup_time="2ep"),
        functools.partial(multi_step_with_warmup_scheduler, warmup_time="2ep", milestones=["5ep"]),
    ]
    for warmup in warmups:
        values = [warmup(set_time(state, t)) for t in range(0, 201, 10)]
        assert values[0] == 0.0
        assert values == sorted(values)
        assert values[-1] == pytest.approx(1.0)


def test_cosine_schedules_stay_within_bounds() -> None:
    state = make_state()
    for t in range(0, 1200, 37):
        set_time(state, t)
        for value in (
            cosine_annealing_scheduler(state, min_factor=0.1),
            cosine_annealing_warm_restarts_scheduler(state, t_0="130ba", t_mult=1.3, min_factor=0.1),
            cosine_annealing_with_warmup_scheduler(state, warmup_time="50ba", min_factor=0.1),
        ):
            assert 0.0 <= value <= 1.0
            if t >= 50:
                assert value >= 0.1 - 1e-12


# ----- argument errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: constant_scheduler(s, total_time="10 batches"), r"total_time='10 batches' is not a valid time"),
        (lambda s: linear_scheduler(s, total_time="1.5ba"), r"total_time='1.5ba'"),
        (lambda s: step_scheduler(s, step_size="-2ep"), r"step_size='-2ep'"),
        (lambda s: step_scheduler(s, step_size="0ba"), r"step_size='0ba'.*longer than zero"),
        (lambda s: step_scheduler(s, step_size="2ep", gamma=-0.1), r"gamma=-0.1"),
        (lambda s: exponential_scheduler(s, gamma=-1.0), r"gamma=-1.0"),
        (lambda s: multi_step_scheduler(s, milestones=[]), r"milestones=\[\].*non-empty list"),
        (lambda s: multi_step_scheduler(s, milestones="2ep"), r"milestones='2ep'.*list"),
        (lambda s: multi_step_scheduler(s, milestones=["2ep", "x"]), r"milestones\[1\]='x'"),
        (lambda s: cosine_annealing_warm_restarts_scheduler(s, t_0="2ep", t_mult=0.0), r"t_mult=0.0"),
        (lambda s: cosine_annealing_warm_restarts_scheduler(s, t_0="0dur"), r"t_0='0dur'"),
        (lambda s: polynomial_scheduler(s, power=-1.0), r"power=-1.0"),
        (lambda s: cosine_annealing_scheduler(s, min_factor=-0.5), r"min_factor=-0.5"),
        (lambda s: linear_with_warmup_scheduler(s, warmup_time="2dur"), r"warmup_time='2dur'.*total_time"),
        (lambda s: cosine_annealing_with_warmup_scheduler(s, warmup_time="11ep"), r"warmup_time='11ep'.*t_max"),
        (lambda s: linear_scheduler(s, ssr=0.0), r"ssr=0.0"),
    ],
)
def test_bad_arguments_raise_value_error(call: Callable[[State], float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(make_state())


def test_non_time_argument_raises_type_error() -> None:
    with pytest.raises(TypeError, match="t_max=5"):
        cosine_annealing_scheduler(make_state(), t_max=5)  # type: ignore[arg-type]


# ----- to_lambda_lr -----------------------------------------------------------------------------------------------


def _optimizer(lrs: tuple[float, ...] = (0.1,)) -> torch.optim.SGD:
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in lrs]
    return torch.optim.SGD(groups)


def _advance(state: State, optimizer: torch.optim.Optimizer, batches: int) -> None:
    for _ in range(batches):
        optimizer.step()
        state.timer.on_batch_complete()


def test_compile_sets_lr_to_base_times_multiplier() -> None:
    optimizer = _optimizer((0.1, 1.0))
    state = make_state(optimizers=optimizer)
    lr_scheduler = to_lambda_lr(functools.partial(cosine_annealing_with_warmup_scheduler, warmup_time="1ep"), state)
    assert [group["lr"] for group in optimizer.param_groups] == [0.0, 0.0]  # set at construction, for t = 0
    _advance(state, optimizer, 550)
    lr_scheduler.step()
    assert [group["lr"] for group in optimizer.param_groups] == pytest.approx([0.05, 0.5])


def test_compile_multiplies_several_schedulers() -> None:
    optimizer = _optimizer((2.0,))
    state = make_state(optimizers=optimizer)
    lr_scheduler = to_lambda_lr(
        [
            functools.partial(step_scheduler, step_size="1ep", gamma=0.5),
            functools.partial(linear_scheduler, end_factor=0.0),
            lambda state: 0.5,
        ],
        state,
    )
    _advance(state, optimizer, 250)
    lr_scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2.0 * 0.25 * 0.75 * 0.5)


def test_compile_reads_the_live_timer_not_its_own_counter() -> None:
    optimizer = _optimizer()
    state = make_state(optimizers=optimizer)
    lr_scheduler = to_lambda_lr(functools.partial(step_scheduler, step_size="10ba", gamma=0.5), state)
    for _ in range(5):  # stepping without the timer moving changes nothing
        optimizer.step()
        lr_scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1)
    set_time(state, 25)
    lr_scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)


def test_compile_passes_ssr_by_keyword_or_position() -> None:
    seen: list[float] = []

    def keyword(state: State, *, ssr: float = 1.0) -> float:
        seen.append(ssr)
        return 1.0

    def positional(state: State, ssr: float) -> float:
        seen.append(ssr)
        return 1.0

    def unannotated(state, ssr):  # type: ignore[no-untyped-def]
        seen.append(ssr)
        return 1.0

    to_lambda_lr([keyword, positional, unannotated], make_state(optimizers=_optimizer()), 2.0)
    assert seen == [2.0, 2.0, 2.0]


def test_compile_state_only_callable() -> None:
    optimizer = _optimizer()
    state = make_state(optimizers=optimizer)
    to_lambda_lr(lambda state: 0.5, state)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="takes only the state.*ssr=0.5"):
        to_lambda_lr(lambda state: 0.5, state, ssr=0.5)


def test_compile_applies_ssr_to_bound_schedulers() -> None:
    optimizer = _optimizer((1.0,))
    state = make_state("5ep", optimizers=optimizer)
    lr_scheduler = to_lambda_lr(ConstantLRHparams(factor=0.5, total_time="2ep").initialize_object(), state, ssr=0.5)
    _advance(state, optimizer, 100)
    lr_scheduler.step()
    assert optimizer.param_groups[0]["lr"] == 1.0  # the 2ep phase lasts 1ep at ssr 0.5


def test_compile_optimizer_selection() -> None:
    first, second = _optimizer((0.1,)), _optimizer((0.2,))
    with pytest.raises(ValueError, match="state.optimizers is empty"):
        to_lambda_lr(lambda state: 0.5, make_state())
    with pytest.raises(ValueError, match="holds 2 optimizers"):
        to_lambda_lr(lambda state: 0.5, make_state(optimizers=[first, second]))
    to_lambda_lr(lambda state: 0.5, make_state(optimizers=[first, second]), optimizer=second)
    assert (first.param_groups[0]["lr"], second.param_groups[0]["lr"]) == (0.1, pytest.approx(0.1))


def test_compile_rejects_empty_and_non_callables() -> None:
    state = make_state(optimizers=_optimizer())
    with pytest.raises(ValueError, match="empty sequence"):
        to_lambda_lr([], state)
    with pytest.raises(TypeError, match="not callable"):
        to_lambda_lr([1.0], state)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="ssr=-1"):
        to_lambda_lr(lambda state: 1.0, state, ssr=-1)


# ----- configs ---------------------------------------------------------------------------------------------------

HPARAMS_EXAMPLES: dict[type[SchedulerHparams], dict[str, Any]] = {
    ConstantLRHparams: {"factor": 0.5, "total_time": "3ep"},
    LinearLRHparams: {"start_factor": 2.0, "end_factor": 0.5},
    ExponentialLRHparams: {"gamma": 0.9},
    StepLRHparams: {"step_size": "2ep"},
    MultiStepLRHparams: {"milestones": ["2ep", "5ep"], "gamma": 0.5},
    CosineAnnealingLRHparams: {"t_max": "8ep", "min_factor": 0.1},
    CosineAnnealingWarmRestartsHparams: {"t_0": "3ep", "t_mult": 2.0},
    PolynomialLRHparams: {"power": 2.0},
    MultiStepWithWarmupLRHparams: {"warmup_time": "1ep", "milestones": ["4ep"]},
    LinearWithWarmupLRHparams: {"warmup_time": "1ep", "end_factor": 0.1},
    CosineAnnealingWithWarmupLRHparams: {"warmup_time": "0.1dur"},
}


def test_registry_is_complete() -> None:
    assert set(SCHEDULERS) == {
        "constant",
        "linear",
        "exponential",
        "step",
        "multistep",
        "cosine_decay",
        "cosine_warmrestart",
        "polynomial",
        "multistep_with_warmup",
        "linear_decay_with_warmup",
        "cosine_decay_with_warmup",
    }
    assert set(SCHEDULERS.values()) == set(HPARAMS_EXAMPLES)
    public = [getattr(sched, name) for name in sched.__all__]
    subclasses = {value for value in public if isinstance(value, type) and issubclass(value, SchedulerHparams)}
    assert subclasses - {SchedulerHparams} == set(SCHEDULERS.values())


@pytest.mark.parametrize("config_class", list(HPARAMS_EXAMPLES), ids=lambda c: c.__name__)
def test_hparams_build_the_bound_function(config_class: type[SchedulerHparams]) -> None:
    kwargs = HPARAMS_EXAMPLES[config_class]
    config = config_class(**kwargs)
    function = config.initialize_object()
    state = set_time(make_state(), 350)
    for ssr in (1.0, 0.5):
        assert function(state, ssr=ssr) == config_class.scheduler_function(state, ssr=ssr, **config.to_dict())
    assert config_class.from_dict(config.to_dict()) == config


def test_hparams_fields_and_defaults_follow_the_seed() -> None:
    def fields(config_class: type[SchedulerHparams]) -> list[tuple[str, Any]]:
        return [(f.name, f.default) for f in dataclasses.fields(config_class)]  # type: ignore[arg-type]

    required = dataclasses.MISSING
    assert fields(ConstantLRHparams) == [("factor", 1.0), ("total_time", "1dur")]
    assert fields(LinearLRHparams) == [("start_factor", 1.0), ("end_factor", 0.0), ("total_time", "1dur")]
    assert fields(ExponentialLRHparams) == [("gamma", required)]
    assert fields(StepLRHparams) == [("step_size", required), ("gamma", 0.1)]
    assert fields(MultiStepLRHparams) == [("milestones", required), ("gamma", 0.1)]
    assert fields(CosineAnnealingLRHparams) == [("t_max", "1dur"), ("min_factor", 0.0)]
    assert fields(CosineAnnealingWarmRestartsHparams) == [("t_0", "1dur"), ("min_factor", 0.0), ("t_mult", 1.0)]
    assert fields(PolynomialLRHparams) == [("power", required), ("t_max", "1dur"), ("min_factor", 0.0)]
    assert fields(MultiStepWithWarmupLRHparams) == [("warmup_time", required), ("milestones", required), ("gamma", 0.1)]
    assert fields(LinearWithWarmupLRHparams) == [
        ("warmup_time", required),
        ("start_factor", 1.0),
        ("end_factor", 0.0),
        ("total_time", "1dur"),
    ]
    assert fields(CosineAnnealingWithWarmupLRHparams) == [
        ("warmup_time", required),
        ("t_max", "1dur"),
        ("min_factor", 0.0),
    ]


def test_hparams_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"StepLRHparams got unknown key\(s\) \['step'\].*'step_size', 'gamma'"):
        StepLRHparams.from_dict({"step": "2ep"})
    with pytest.raises(ValueError, match=r"ExponentialLRHparams.*'gamma' received 'fast' \(str\) but expects float"):
        ExponentialLRHparams.from_dict({"gamma": "fast"})
    with pytest.raises(ValueError, match=r"total_time='soon' is not a valid time"):
        LinearLRHparams(total_time="soon")
    with pytest.raises(ValueError, match=r"milestones=\[\]"):
        MultiStepLRHparams(milestones=[])
    with pytest.raises(ValueError, match=r"t_mult=-1.0"):
        CosineAnnealingWarmRestartsHparams(t_mult=-1.0)
    with pytest.raises(ValueError, match=r"gamma=-0.5"):
        StepLRHparams(step_size="1ep", gamma=-0.5)


def test_module_exposes_the_core_time_and_state_classes() -> None:
    # Seed 003 lists State, Time and TimeUnit among the classes of composer.optim.scheduler: they are the core
    # classes re-exported, so annotations and isinstance checks written against either path agree.
    import composer.core
    from composer.optim.scheduler import State as SchedulerState
    from composer.optim.scheduler import Time as SchedulerTime
    from composer.optim.scheduler import TimeUnit as SchedulerTimeUnit

    assert SchedulerState is composer.core.State
    assert SchedulerTime is composer.core.Time
    assert SchedulerTimeUnit is composer.core.TimeUnit
    assert {"State", "Time", "TimeUnit"} <= set(sched.__all__)
    # The re-exports do not leak into the optim package's own namespace, which lists optimizers and schedulers only.
    import composer.optim

    assert not {"State", "Time", "TimeUnit"} & set(composer.optim.__all__)
    assert constant_scheduler(make_state(), total_time=SchedulerTime(5, SchedulerTimeUnit.EPOCH)) == 1.0


def test_compile_is_the_seeds_name_for_to_lambda_lr():
    from composer.optim.scheduler import compile

    optimizer = _optimizer()
    compile(lambda state: 0.5, make_state(optimizers=optimizer))
    assert optimizer.param_groups[0]["lr"] == 0.5 * optimizer.param_groups[0]["initial_lr"]
