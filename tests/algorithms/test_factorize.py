"""Factorized layers against the layers they replace: exact at full rank, the SVD truncation error below it (Eckart-
Young, from the singular values computed independently), the parameter count formula; apply_factorization's rules;
Factorize in the Trainer keeps a user's optimizer in step with the new parameters."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import Factorize, FactorizeHparams
from composer.algorithms.factorize import FactorizedConv2d, FactorizedLinear, latent_size, max_useful_rank
from composer.functional import apply_factorization
from composer.loggers import InMemoryLogger
from composer.models import ComposerClassifier
from composer.trainer import Trainer


def _num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_full_rank_linear_reproduces_the_original():
    torch.manual_seed(0)
    dense = nn.Linear(16, 10)
    layer = FactorizedLinear.from_linear(dense, latent_features=10)
    x = torch.randn(5, 16)
    torch.testing.assert_close(layer(x), dense(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("stride", "padding", "dilation", "bias"), [(1, 1, 1, True), (2, 0, 1, False), (1, 2, 2, True)]
)
def test_full_rank_conv_reproduces_the_original(stride: int, padding: int, dilation: int, bias: bool):
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, stride=stride, padding=padding, dilation=dilation, bias=bias)
    layer = FactorizedConv2d.from_conv2d(conv, latent_channels=6)  # min(out, in * 3 * 3) = 6: full rank
    x = torch.randn(2, 4, 9, 9)
    torch.testing.assert_close(layer(x), conv(x), atol=1e-5, rtol=1e-5)
    assert layer.conv0.stride == conv.stride and layer.conv0.padding == conv.padding
    assert layer.conv0.bias is None and (layer.conv1.bias is not None) == bias


@pytest.mark.parametrize("rank", [1, 3, 6])
def test_low_rank_linear_error_is_the_eckart_young_bound(rank: int):
    torch.manual_seed(1)
    dense = nn.Linear(20, 12, bias=True)
    layer = FactorizedLinear.from_linear(dense, latent_features=rank)
    # On the basis vectors, the difference of the outputs is (W_r - W)^T (the biases cancel).
    basis = torch.eye(20)
    error = (layer(basis) - dense(basis)).double()
    s = torch.linalg.svdvals(dense.weight.detach().double())  # descending
    frobenius_bound = s[rank:].pow(2).sum().sqrt()
    torch.testing.assert_close(torch.linalg.matrix_norm(error), frobenius_bound, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.linalg.matrix_norm(error, ord=2), s[rank], atol=1e-5, rtol=1e-5)
    # Any other rank-r map does at least as badly, e.g. the weight with its smallest singular directions kept.
    u, _, vh = torch.linalg.svd(dense.weight.detach().double(), full_matrices=False)
    other = u[:, -rank:] @ torch.diag(s[-rank:]) @ vh[-rank:]
    assert torch.linalg.matrix_norm(other - dense.weight.detach().double()) >= frobenius_bound - 1e-6


def test_low_rank_conv_error_is_the_truncation_bound_of_the_patch_matrix():
    torch.manual_seed(2)
    conv = nn.Conv2d(3, 5, kernel_size=2, bias=True)
    rank = 2
    layer = FactorizedConv2d.from_conv2d(conv, latent_channels=rank)
    # An input the size of the kernel has one patch: each basis input picks one column of the (5, 12) matrix.
    basis = torch.eye(12).reshape(12, 3, 2, 2)
    error = (layer(basis) - conv(basis)).reshape(12, 5).double()
    s = torch.linalg.svdvals(conv.weight.detach().reshape(5, 12).double())
    torch.testing.assert_close(torch.linalg.matrix_norm(error), s[rank:].pow(2).sum().sqrt(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_counts_follow_the_formula(bias: bool):
    conv = FactorizedConv2d(8, 16, (3, 5), latent_channels=4, bias=bias)
    assert _num_params(conv) == 4 * (8 * 3 * 5 + 16) + (16 if bias else 0)
    linear = FactorizedLinear(30, 20, latent_features=7, bias=bias)
    assert _num_params(linear) == 7 * (30 + 20) + (20 if bias else 0)


def test_max_useful_rank_is_below_the_break_even_rank():
    for fan_in, out in [(512, 512), (576, 64), (10, 3), (7, 7)]:
        r = max_useful_rank(fan_in, out)
        assert r * (fan_in + out) < fan_in * out <= (r + 1) * (fan_in + out)


@pytest.mark.parametrize(("latent", "expected"), [(0.25, 8), (0.01, 1), (5, 5), (5.0, 5), (64, 64)])
def test_latent_size_is_a_fraction_or_an_absolute_size(latent: float, expected: int):
    assert latent_size(latent, 32, 48) == expected


def test_apply_factorization_replaces_exactly_the_eligible_layers():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(16, 32, 3),  # 0: min 16 < 32, kept
        nn.Conv2d(32, 32, 3),  # 1: latent 8 <= max_useful_rank(288, 32) = 28, factorized
        nn.Conv2d(32, 32, 1),  # 2: 1x1, max_useful_rank(32, 32) = 15 >= 8, factorized
        nn.Conv2d(32, 32, 3, groups=2),  # 3: grouped, kept
        nn.Flatten(),
        nn.Linear(64, 64),  # 5: latent 16 <= 31, factorized
        nn.Linear(64, 40),  # 6: min 40 >= 32, latent 10 <= 24, factorized
        nn.Linear(64, 16),  # 7: min 16 < 32, kept
    )
    before = _num_params(model)
    apply_factorization(model, min_channels=32, latent_channels=0.25, min_features=32, latent_features=0.25)
    kinds = [type(m).__name__ for m in model]
    assert kinds == [
        "Conv2d",
        "FactorizedConv2d",
        "FactorizedConv2d",
        "Conv2d",
        "Flatten",
        "FactorizedLinear",
        "FactorizedLinear",
        "Linear",
    ]
    saved = (288 * 32 - 8 * (288 + 32)) + (32 * 32 - 8 * 64) + (64 * 64 - 16 * 128) + (64 * 40 - 10 * 104)
    assert before - _num_params(model) == saved
    # A second application changes nothing more; with any sizes, it never factorizes inside a factorized layer.
    after = _num_params(model)
    with pytest.warns(UserWarning, match="all kept by their policy"):
        apply_factorization(model, min_channels=32, latent_channels=0.25, min_features=32, latent_features=0.25)
    assert [type(m).__name__ for m in model] == kinds and _num_params(model) == after
    apply_factorization(model, min_channels=1, latent_channels=1, min_features=1, latent_features=1)
    factorized = [m for m in model.modules() if isinstance(m, (FactorizedConv2d, FactorizedLinear))]
    assert len(factorized) == 6  # 0 and 7 as well now, at rank 1
    assert all(type(inner) in (nn.Conv2d, nn.Linear) for m in factorized for inner in m.children())


def test_latent_at_or_above_break_even_is_not_factorized():
    model = nn.Sequential(nn.Linear(64, 64))  # max_useful_rank 31
    with pytest.warns(UserWarning, match="all kept by their policy"):
        apply_factorization(model, min_features=1, latent_features=32)
    assert type(model[0]) is nn.Linear
    apply_factorization(model, min_features=1, latent_features=31)
    assert type(model[0]) is FactorizedLinear and model[0].latent_features == 31


def test_bad_arguments_name_the_argument():
    model = nn.Sequential(nn.Linear(4, 4))
    for kwargs, message in [
        ({"latent_features": 0}, "latent_features=0 must be positive"),
        ({"latent_features": -0.5}, "latent_features=-0.5 must be positive"),
        ({"latent_channels": 1.5}, "latent_channels=1.5 is neither a fraction"),
        ({"latent_channels": float("nan")}, "latent_channels=nan must be positive"),
        ({"min_channels": 0}, "min_channels=0 must be an int of at least 1"),
        ({"min_features": True}, "min_features=True must be an int"),
    ]:
        with pytest.raises(ValueError, match=message):
            apply_factorization(model, **kwargs)
        with pytest.raises(ValueError, match=message):
            Factorize(**kwargs)
    with pytest.raises(ValueError, match="rank=9 must be an int from 1 to min"):
        FactorizedLinear.from_linear(nn.Linear(8, 12), latent_features=9)
    with pytest.raises(ValueError, match="grouped convolution"):
        FactorizedConv2d.from_conv2d(nn.Conv2d(4, 4, 3, groups=2), latent_channels=1)
    with pytest.raises(ValueError, match="latent_channels=0"):
        FactorizeHparams.from_dict({"latent_channels": 0})


def test_functional_form_keeps_a_given_optimizer_in_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    apply_factorization(model, min_features=32, latent_features=8, optimizers=optimizer)
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert trained == {id(p) for p in model.parameters()}


def test_factorize_in_the_trainer_trains_the_new_layers_with_the_users_optimizer():
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 3),
    )
    model = ComposerClassifier(net, num_classes=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 1, 6, 6, generator=g), torch.randint(0, 3, (8,), generator=g)), 4)
    logger = InMemoryLogger()
    algorithm = Factorize(min_channels=32, latent_channels=8, min_features=32, latent_features=8)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        max_duration="2ba",
        algorithms=[algorithm],
        optimizers=optimizer,
        loggers=[logger],
        progress_bar=False,
        seed=0,
    )
    assert isinstance(net[2], FactorizedConv2d) and isinstance(net[5], FactorizedLinear)
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    assert {id(p) for p in trained} == {id(p) for p in model.parameters()} and len(trained) == len(
        list(model.parameters())
    )
    start = net[2].conv0.weight.detach().clone()
    trainer.fit()
    trainer.close()
    assert not torch.equal(net[2].conv0.weight, start)  # the new parameters are trained
    assert logger.values("factorize/num_conv2d_replacements") == [1]
    assert logger.values("factorize/num_linear_replacements") == [1]
