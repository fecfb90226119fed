"""Low-precision GroupNorm: nn.GroupNorm without autocast; under bf16/fp16 autocast a half-precision output close to
float32 group norm within a stated tolerance; the surgery keeps the parameters; the algorithm in the Trainer."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import LowPrecisionGroupNorm
from composer.algorithms.low_precision_groupnorm import LowPrecisionGroupNormModule
from composer.functional import apply_low_precision_groupnorm
from composer.models import ComposerClassifier

# As for LayerNorm (tests/algorithms/test_low_precision_layernorm.py): the input, weight, bias and output are each
# rounded to a relative error of at most the unit roundoff u (2^-8 bf16, 2^-11 fp16), the statistics accumulate in
# float32, so on outputs of order 1 we allow 4u, relative and absolute.
BF16_TOL = 4 * 2**-8
FP16_TOL = 4 * 2**-11


def _norm(groups: int, channels: int, seed: int) -> nn.GroupNorm:
    norm = nn.GroupNorm(groups, channels)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(channels, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(channels, generator=g) * 0.5)
    return norm


def test_without_autocast_it_is_groupnorm_exactly():
    norm = _norm(2, 8, seed=0)
    low = LowPrecisionGroupNormModule.from_groupnorm(norm)
    x = torch.randn(3, 8, 5, 5, generator=torch.Generator().manual_seed(1), requires_grad=True)
    out, ref = low(x), norm(x)
    assert torch.equal(out, ref)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    (grad_ref,) = torch.autograd.grad(ref.square().sum(), x)
    assert torch.equal(grad, grad_ref)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.bfloat16, BF16_TOL), (torch.float16, FP16_TOL)])
def test_under_autocast_the_output_is_half_precision_and_close_to_float32(dtype: torch.dtype, tol: float):
    norm = _norm(4, 16, seed=0)
    low = LowPrecisionGroupNormModule.from_groupnorm(norm)
    x = torch.randn(4, 16, 6, 6, generator=torch.Generator().manual_seed(2)) * 3 + 1
    reference = norm(x)
    with torch.autocast("cpu", dtype=dtype):
        out = low(x)
        original = norm(x)
    assert out.dtype == dtype
    assert original.dtype == torch.float32  # the original norm keeps a float32 input in float32
    torch.testing.assert_close(out.float(), reference, rtol=tol, atol=tol)


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

    net, trainer = run("bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        trainer.fit()
    assert isinstance(net[1], LowPrecisionGroupNormModule)
    assert torch.isfinite(torch.as_tensor(trainer.state.loss)).all()
    with pytest.warns(UserWarning, match="no effect with precision='fp32'"):
        run("fp32")
