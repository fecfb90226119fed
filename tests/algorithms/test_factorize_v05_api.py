"""Factorize's v0.5-era API: factorize_matrix, factorize_conv2d, the layers' original constructors and set_rank.

The cases follow MosaicML Composer v0.5.0's tests/algorithms/test_factorize_core.py, test_factorized_modules.py and
test_factorize_algorithm.py (shapes, edge cases of the requested rank, errors, logging). The fits are also checked
against an independent reference: plain alternating least squares run to convergence, which the closed form must
match and never lose to.
"""

from __future__ import annotations

import itertools
from unittest.mock import Mock

import pytest
import torch
from torch import nn

from composer.algorithms import Factorize
from composer.algorithms.factorize import (
    FactorizedConv2d,
    FactorizedLinear,
    LowRankSolution,
    factorize_conv2d,
    factorize_matrix,
)
from composer.algorithms.factorize.factorize import LOG_NUM_CONV2D_REPLACEMENTS_KEY, LOG_NUM_LINEAR_REPLACEMENTS_KEY
from composer.core import Event, State
from composer.models import ComposerClassifier
from composer.utils import count_module_instances


def _linear_task(c_in, c_latent_now, c_latent_new, c_out, factorized, n_iters=2, seed=123):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(100, c_in, generator=g)
    bias = torch.randn(c_out, generator=g)
    if factorized:
        Wa, Wb = torch.randn(c_in, c_latent_now, generator=g), torch.randn(c_latent_now, c_out, generator=g)
        Y = X @ Wa @ Wb + bias
    else:
        Wa, Wb = torch.randn(c_in, c_out, generator=g), None
        Y = X @ Wa + bias
    return factorize_matrix(X, Y, Wa, Wb, bias=bias, rank=c_latent_new, n_iters=n_iters)


def _conv_task(c_in, c_latent_now, c_latent_new, c_out, factorized, n_iters=2, seed=123):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(1, c_in, 4, 4, generator=g)
    if factorized:
        Wa, Wb = torch.randn(c_latent_now, c_in, 3, 3, generator=g), torch.randn(c_out, c_latent_now, 1, 1, generator=g)
        bias_a, bias_b = torch.randn(c_latent_now, generator=g), torch.randn(c_out, generator=g)
    else:
        Wa, Wb = torch.randn(c_out, c_in, 3, 3, generator=g), None
        bias_a, bias_b = torch.randn(c_out, generator=g), None
    return factorize_conv2d(X, Wa, Wb, biasA=bias_a, biasB=bias_b, rank=c_latent_new, n_iters=n_iters)


TASKS = {"linear": (_linear_task, 0, 1, (32, 16, 8, 64)), "conv2d": (_conv_task, 1, 0, (32, 16, 6, 24))}


def _check(solution: LowRankSolution, op: str, c_in, c_latent_now, k, c_out, previous=None) -> float:
    """The original's assertions on the shapes of the solution, its error, and that the error never grows."""
    _, in_dim, out_dim, _ = TASKS[op]
    Wa, Wb = solution.Wa, solution.Wb
    assert Wa is not None
    if k >= c_in or k >= c_out:  # factorizing cannot pay: the map comes back whole
        assert Wb is None and Wa.shape[in_dim] == c_in and Wa.shape[out_dim] == c_out
    elif k >= c_latent_now:  # a factorization never grows
        assert Wa.shape[in_dim] == c_in and Wa.shape[out_dim] == c_latent_now
    else:
        assert Wb is not None and solution.bias is not None and solution.bias.shape == (c_out,)
        assert Wa.shape[in_dim] == c_in and Wa.shape[out_dim] == k
        assert Wb.shape[in_dim] == k and Wb.shape[out_dim] == c_out
    assert solution.nmse < 1.0
    if previous is not None:
        assert solution.nmse <= previous + 1e-8
    return solution.nmse


@pytest.mark.parametrize("op", ["linear", "conv2d"])
@pytest.mark.parametrize("factorized", [False, True])
def test_edge_cases_of_the_requested_rank(op, factorized):
    task = TASKS[op][0]
    # (C_in, C_latent_now, C_latent_new, C_out): equal; already low rank; rank above the latent size, the input
    # size, the output size; underdetermined.
    for shapes in [(16, 16, 16, 16), (16, 8, 16, 16), (16, 16, 32, 16), (16, 16, 16, 8), (32, 16, 16, 16)]:
        _check(task(*shapes, factorized), op, *shapes)


@pytest.mark.parametrize("op", ["linear", "conv2d"])
@pytest.mark.parametrize("factorized", [False, True])
def test_more_latent_dimensions_never_do_worse(op, factorized):
    task, _, _, (c_in, now, _, c_out) = TASKS[op]
    previous = None
    for k in [1, 4, 16, 32]:
        previous = _check(task(c_in, now, k, c_out, factorized), op, c_in, now, k, c_out, previous)


@pytest.mark.parametrize("op", ["linear", "conv2d"])
@pytest.mark.parametrize("factorized", [False, True])
def test_more_iterations_never_do_worse(op, factorized):
    task, _, _, (c_in, now, k, c_out) = TASKS[op]
    previous = None
    for n_iters in [0, 1, 2, 4]:
        previous = _check(task(c_in, now, k, c_out, factorized, n_iters), op, c_in, now, k, c_out, previous)


def _als_nmse(X, Y, k, iterations=300):
    """Reference: alternating least squares with a free bias, from a random start, to convergence (float64)."""
    x, y = X.double() - X.double().mean(0), Y.double() - Y.double().mean(0)
    x_pinv_y = torch.linalg.pinv(x) @ y  # the Wa step is argmin ||y - x a b|| = pinv(x) y pinv(b)
    a = torch.randn(x.shape[1], k, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for _ in range(iterations):
        xa = x @ a
        b = torch.linalg.solve(xa.T @ xa, xa.T @ y)  # the Wb step: least squares of y on x a
        a = x_pinv_y @ torch.linalg.pinv(b)
    return float((y - x @ a @ b).pow(2).sum() / y.pow(2).sum())


@pytest.mark.parametrize("k", [1, 3, 6])
def test_the_closed_form_matches_alternating_least_squares_run_to_convergence(k):
    g = torch.Generator().manual_seed(7)
    X = torch.randn(60, 10, generator=g) @ torch.randn(10, 10, generator=g)  # correlated inputs
    W = torch.randn(10, 12, generator=g)
    Y = X @ W + 0.3 * torch.randn(60, 12, generator=g) + 2.0
    solution = factorize_matrix(X, Y, W, rank=k)
    reference = _als_nmse(X, Y, k)
    assert solution.nmse <= reference + 1e-9  # never worse than the reference's optimum
    assert solution.nmse == pytest.approx(reference, rel=1e-4, abs=1e-9)
    predicted = X @ solution.Wa @ solution.Wb + solution.bias
    residual = (Y - predicted).double()
    assert float(residual.pow(2).sum() / (Y - Y.mean(0)).double().pow(2).sum()) == pytest.approx(
        solution.nmse, rel=1e-4
    )


def test_bad_arguments_name_what_to_pass():
    X, W = torch.randn(5, 4), torch.randn(4, 3)
    with pytest.raises(ValueError, match="rank=0 must be positive"):
        factorize_matrix(X, X @ W, W, rank=0)
    with pytest.raises(ValueError, match="n_iters=-1 must be an int"):
        factorize_matrix(X, X @ W, W, rank=1, n_iters=-1)
    with pytest.raises(ValueError, match=r"Wa \(3, 4\) do not map X"):
        factorize_matrix(X, X @ W, W.T, rank=1)
    with pytest.raises(ValueError, match="biasB was given without Wb"):
        factorize_conv2d(torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3), biasB=torch.zeros(3))
    with pytest.raises(ValueError, match="groups=2"):
        factorize_conv2d(torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3), groups=2)


# ----- the layers ---------------------------------------------------------------------------------------------------


def test_factorized_conv2d_shapes():
    torch.manual_seed(0)
    kernels = [(1, 1), (2, 2), (3, 3), (1, 3), (3, 1), (5, 5)]
    for batch, c_in, c_out, kernel in itertools.product([1, 2], [4, 8], [4, 8], kernels):
        conv = FactorizedConv2d(in_channels=c_in, out_channels=c_out, kernel_size=kernel)  # latent 0.25 by default
        Y = conv(torch.randn(batch, c_in, 5, 6))
        assert Y.ndim == 4 and Y.shape[:2] == (batch, c_out)
        assert conv.latent_channels == max(1, int(0.25 * min(c_in, c_out)))


def test_factorized_linear_shapes():
    torch.manual_seed(0)
    for batch, d_in, d_out in itertools.product([1, 2], [7, 8, 11], [4, 6, 8]):
        module = FactorizedLinear(in_features=d_in, out_features=d_out)
        assert module(torch.randn(batch, d_in)).shape == (batch, d_out)
    positional = FactorizedLinear(16, 12, False, 3)  # the original order: (in, out, bias, latent_features)
    assert positional.module1.bias is None and positional.latent_features == 3


def test_set_rank_twice_rebuilds_the_conv_pair():
    torch.manual_seed(0)
    X = torch.randn(2, 36, 5, 6)
    module = FactorizedConv2d(in_channels=36, out_channels=40, latent_channels=16, kernel_size=(3, 3), padding=0)
    for rank in [12, 8]:
        module.set_rank(X, rank)
        assert module.latent_channels == rank
        assert (module.module0.in_channels, module.module0.out_channels) == (36, rank)
        assert module.module0.weight.shape[:2] == (rank, 36)
        assert (module.module1.in_channels, module.module1.out_channels) == (rank, 40)
        assert module.module1.weight.shape[:2] == (40, rank)
        assert module.conv0 is module.module0 and module(X).shape == (2, 40, 3, 4)


def test_set_rank_twice_rebuilds_the_linear_pair():
    torch.manual_seed(0)
    X = torch.randn(2, 36)
    module = FactorizedLinear(in_features=36, out_features=40, latent_features=16)
    for rank in [16, 12, 8]:
        module.set_rank(X, rank)
        assert module.latent_features == rank
        assert module.module0.weight.shape == (rank, 36) and module.module1.weight.shape == (40, rank)
        assert module.linear1 is module.module1 and module(X).shape == (2, 40)


def test_set_rank_keeps_the_outputs_when_the_layer_already_has_that_rank():
    # The layers at latent 6 hold maps of rank 3 (half their latent columns zeroed): lowering to 3 loses nothing.
    torch.manual_seed(0)
    linear = FactorizedLinear(20, 30, latent_features=6)
    conv = FactorizedConv2d(5, 12, 3, latent_channels=6, padding=1, padding_mode="reflect")
    with torch.no_grad():
        linear.module1.weight[:, 3:] = 0
        conv.module1.weight[:, 3:] = 0
    x, image = torch.randn(50, 20), torch.randn(3, 5, 7, 7)
    before_linear, before_conv = linear(x), conv(image)
    linear.set_rank(x, 3)
    conv.set_rank(image, 3)
    torch.testing.assert_close(linear(x), before_linear, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(conv(image), before_conv, atol=1e-4, rtol=1e-4)  # the reflect padding is fitted too
    no_bias = FactorizedLinear(20, 30, bias=False, latent_features=6)
    no_bias.set_rank(x, 2)
    assert no_bias.module1.bias is None


@pytest.mark.parametrize("sizes", [(8, 8, 4), (7, 5, 3), (10, 10, 0.5)])
def test_constructors_refuse_a_latent_size_that_saves_nothing(sizes):
    with pytest.raises(ValueError, match="the most that saves anything is"):
        FactorizedConv2d(in_channels=sizes[0], out_channels=sizes[1], latent_channels=sizes[2], kernel_size=(1, 1))
    with pytest.raises(ValueError, match="the most that saves anything is"):
        FactorizedLinear(in_features=sizes[0], out_features=sizes[1], latent_features=sizes[2])


@pytest.mark.parametrize("sizes", [(8, 8, 3, 4), (7, 5, 2, 4), (12, 13, 0.3, 5)])
def test_set_rank_refuses_to_raise_the_rank(sizes):
    conv = FactorizedConv2d(in_channels=sizes[0], out_channels=sizes[1], kernel_size=1, latent_channels=sizes[2])
    with pytest.raises(ValueError, match=f"rank={sizes[3]} exceeds the current latent size"):
        conv.set_rank(torch.randn(2, conv.in_channels, 8, 8), sizes[3])
    linear = FactorizedLinear(in_features=sizes[0], out_features=sizes[1], latent_features=sizes[2])
    with pytest.raises(ValueError, match=f"rank={sizes[3]} exceeds the current latent size"):
        linear.set_rank(torch.randn(2, linear.in_features), sizes[3])


# ----- the algorithm ------------------------------------------------------------------------------------------------


def _conv_model_state():
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.Conv2d(8, 4, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 16),
        nn.Linear(16, 100),
    )
    return State(model=ComposerClassifier(net, num_classes=100), max_duration="1ep", steps_per_epoch=1)


@pytest.mark.parametrize(("convs", "linears"), list(itertools.product((False, True), (False, True))))
def test_factorize_replaces_every_layer_keeps_the_output_shape_and_logs_once_per_kind(convs, linears):
    state = _conv_model_state()
    algorithm = Factorize(
        factorize_convs=convs,
        factorize_linears=linears,
        min_channels=1,
        latent_channels=2,
        min_features=1,
        latent_features=2,
    )
    n_convs = count_module_instances(state.model, nn.Conv2d)
    n_linears = count_module_instances(state.model, nn.Linear)
    batch = torch.randn(64, 3, 32, 32)
    before = state.model.module(batch).shape
    logger = Mock()
    algorithm.apply(Event.INIT, state, logger=logger)
    assert state.model.module(batch).shape == before
    if convs:
        assert count_module_instances(state.model, FactorizedConv2d) == n_convs > 0
        logger.metric_fit.assert_any_call({LOG_NUM_CONV2D_REPLACEMENTS_KEY: n_convs})
    if linears:
        assert count_module_instances(state.model, FactorizedLinear) == n_linears > 0
        logger.metric_fit.assert_any_call({LOG_NUM_LINEAR_REPLACEMENTS_KEY: n_linears})
    assert logger.metric_fit.call_count == int(convs) + int(linears)
