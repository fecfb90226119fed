"""Low-precision LayerNorm: nn.LayerNorm without autocast; under bf16/fp16 autocast a half-precision output close to
float32 layer norm within a stated tolerance; the surgery keeps the parameters; the algorithm in the Trainer."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import LowPrecisionLayerNorm
from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNormModule
from composer.datasets import ByteTextDataset
from composer.functional import apply_low_precision_layernorm
from composer.models import GPT, GPTConfig
from tests.algorithms.low_precision_norm_helpers import (
    HALF_DTYPES,
    assert_half_and_close_under_autocast,
    assert_same_without_autocast,
    fit_bf16_without_warnings_and_warn_in_fp32,
    randomize_affine,
)


def _norm(shape: tuple[int, ...], seed: int) -> nn.LayerNorm:
    return randomize_affine(nn.LayerNorm(shape), seed)


def test_without_autocast_it_is_layernorm_exactly():
    norm = _norm((16,), seed=0)
    x = torch.randn(4, 7, 16, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert_same_without_autocast(LowPrecisionLayerNormModule.from_layernorm(norm), norm, x)


@HALF_DTYPES
def test_under_autocast_the_output_is_half_precision_and_close_to_float32(dtype: torch.dtype, tol: float):
    norm = _norm((32,), seed=0)
    x = torch.randn(8, 5, 32, generator=torch.Generator().manual_seed(2)) * 3 + 1
    assert_half_and_close_under_autocast(LowPrecisionLayerNormModule.from_layernorm(norm), norm, x, dtype, tol)


def test_gradients_reach_the_float32_parameters_under_autocast():
    low = LowPrecisionLayerNormModule.from_layernorm(_norm((8,), seed=0))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = low(x)
    out.float().square().sum().backward()
    assert low.weight.dtype == torch.float32 and low.weight.grad is not None and low.weight.grad.dtype == torch.float32


def test_surgery_keeps_the_parameters_and_the_state_dict_keys():
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Sequential(nn.LayerNorm(8, elementwise_affine=False)))
    keys, weight = list(model.state_dict()), model[1].weight
    apply_low_precision_layernorm(model)
    assert isinstance(model[1], LowPrecisionLayerNormModule) and isinstance(model[2][0], LowPrecisionLayerNormModule)
    assert model[1].weight is weight and model[2][0].weight is None
    assert list(model.state_dict()) == keys
    with pytest.warns(UserWarning, match="replaced nothing"):
        apply_low_precision_layernorm(nn.Sequential(nn.Linear(2, 2)))


def _gpt_run(precision: str) -> tuple[GPT, Trainer]:
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=16))
    data = DataLoader(ByteTextDataset(b"The quick brown fox jumps over the lazy dog. " * 2, seq_len=16), batch_size=4)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        max_duration="2ba",
        precision=precision,
        algorithms=[LowPrecisionLayerNorm()],
        progress_bar=False,
        seed=0,
    )
    return model, trainer


def test_the_algorithm_trains_a_gpt_in_bf16_and_warns_in_fp32():
    model, _ = fit_bf16_without_warnings_and_warn_in_fp32(_gpt_run)
    assert sum(isinstance(m, LowPrecisionLayerNormModule) for m in model.modules()) == 3  # ln_1, ln_2, ln_f
