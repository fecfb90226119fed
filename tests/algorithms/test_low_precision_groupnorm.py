"""Low-precision GroupNorm: nn.GroupNorm without autocast; under bf16/fp16 autocast a half-precision output close to
float32 group norm within a stated tolerance; the surgery keeps the parameters; the algorithm in the Trainer."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import LowPrecisionGroupNorm
from composer.algorithms.low_precision_groupnorm import LowPrecisionGroupNormModule
from composer.functional import apply_low_precision_groupnorm
from composer.models import ComposerClassifier
from tests.algorithms.low_precision_norm_helpers import (
    HALF_DTYPES,
    assert_half_and_close_under_autocast,
    assert_same_without_autocast,
    fit_bf16_without_warnings_and_warn_in_fp32,
    randomize_affine,
)


def _norm(groups: int, channels: int, seed: int) -> nn.GroupNorm:
    return randomize_affine(nn.GroupNorm(groups, channels), seed)


def test_without_autocast_it_is_groupnorm_exactly():
    norm = _norm(2, 8, seed=0)
    x = torch.randn(3, 8, 5, 5, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert_same_without_autocast(LowPrecisionGroupNormModule.from_groupnorm(norm), norm, x)


@HALF_DTYPES
def test_under_autocast_the_output_is_half_precision_and_close_to_float32(dtype: torch.dtype, tol: float):
    norm = _norm(4, 16, seed=0)
    x = torch.randn(4, 16, 6, 6, generator=torch.Generator().manual_seed(2)) * 3 + 1
    assert_half_and_close_under_autocast(LowPrecisionGroupNormModule.from_groupnorm(norm), norm, x, dtype, tol)


def test_surgery_keeps_the_parameters_and_the_state_dict_keys():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(4, 8), nn.GroupNorm(2, 8, affine=False))
    keys, weight = list(model.state_dict()), model[1].weight
    apply_low_precision_groupnorm(model)
    assert isinstance(model[1], LowPrecisionGroupNormModule) and isinstance(model[2], LowPrecisionGroupNormModule)
    assert model[1].weight is weight and model[2].weight is None and model[1].num_groups == 4
    assert list(model.state_dict()) == keys


def test_the_algorithm_trains_in_bf16_and_warns_in_fp32():
    def run(precision: str) -> tuple[nn.Module, Trainer]:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 36, 3))
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g))
        trainer = Trainer(
            model=ComposerClassifier(net, num_classes=3),
            train_dataloader=DataLoader(data, batch_size=4),
            max_duration="2ba",
            precision=precision,
            algorithms=[LowPrecisionGroupNorm()],
            progress_bar=False,
            seed=0,
        )
        return net, trainer

    net, _ = fit_bf16_without_warnings_and_warn_in_fp32(run)
    assert isinstance(net[1], LowPrecisionGroupNormModule)
