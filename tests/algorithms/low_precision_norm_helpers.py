"""Checks shared by the low-precision norm tests (tests/algorithms/test_low_precision_{layernorm,groupnorm}.py).

Tolerances: a half-precision norm rounds the input, the weight, the bias and the output, each to a relative error of
at most the unit roundoff u (2^-8 for bfloat16, 2^-11 for float16); the statistics are accumulated in float32. On
outputs of order 1 the error therefore stays within a few u: we allow 4u, relative and absolute.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

BF16_TOL = 4 * 2**-8  # 0.0156
FP16_TOL = 4 * 2**-11  # 0.00195
HALF_DTYPES = pytest.mark.parametrize(("dtype", "tol"), [(torch.bfloat16, BF16_TOL), (torch.float16, FP16_TOL)])


def randomize_affine(norm: nn.Module, seed: int) -> nn.Module:
    """Sets ``norm``'s weight to U[0.5, 1.5) and bias to N(0, 0.25) from a generator seeded ``seed``; returns it."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(norm.weight.shape, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(norm.bias.shape, generator=g) * 0.5)
    return norm


def assert_same_without_autocast(low: nn.Module, norm: nn.Module, x: torch.Tensor) -> None:
    """``low(x)`` and its input gradient equal ``norm``'s bit for bit (no autocast); ``x`` requires grad."""
    out, ref = low(x), norm(x)
    assert torch.equal(out, ref)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    (grad_ref,) = torch.autograd.grad(ref.square().sum(), x)
    assert torch.equal(grad, grad_ref)


def assert_half_and_close_under_autocast(
    low: nn.Module, norm: nn.Module, x: torch.Tensor, dtype: torch.dtype, tol: float
) -> None:
    """Under CPU autocast in ``dtype``, ``low(x)`` has ``dtype`` and is within ``tol`` of ``norm``'s float32 output,
    while ``norm`` itself keeps float32."""
    reference = norm(x)  # float32, no autocast
    with torch.autocast("cpu", dtype=dtype):
        out = low(x)
        original = norm(x)
    assert out.dtype == dtype
    assert original.dtype == torch.float32  # the original norm keeps a float32 input in float32
    torch.testing.assert_close(out.float(), reference, rtol=tol, atol=tol)


def fit_bf16_without_warnings_and_warn_in_fp32(run: Callable[[str], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``run(precision)`` builds ``(model, trainer)``: fits the bf16 one with warnings as errors (finite loss), checks
    that building the fp32 one warns that the algorithm has no effect; returns the bf16 ``(model, trainer)``."""
    model, trainer = run("bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        trainer.fit()
    assert torch.isfinite(torch.as_tensor(trainer.state.loss)).all()
    with pytest.warns(UserWarning, match="no effect with precision='fp32'"):
        run("fp32")
    return model, trainer
