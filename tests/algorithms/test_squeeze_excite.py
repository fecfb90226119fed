"""SqueezeExcite2d against its formula; apply_se only where min(in, out) >= min_channels; the surgery on our ResNets
and torchvision's; SqueezeExcite in the Trainer trains the new blocks."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import SqueezeExcite, SqueezeExciteHparams
from composer.algorithms.squeeze_excite import SqueezeExcite2d, SqueezeExciteConv2d
from composer.functional import apply_se
from composer.models import imagenet_resnet
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def test_squeeze_excite_2d_matches_its_formula():
    torch.manual_seed(0)
    se = SqueezeExcite2d(num_features=6, latent_channels=3)
    x = torch.randn(2, 6, 5, 4)
    w1, w2 = se.mlp[0].weight, se.mlp[2].weight  # (3, 6), (6, 3): bias-free
    pooled = x.mean(dim=(2, 3))  # (N, C)
    gates = torch.sigmoid(torch.relu(pooled @ w1.T) @ w2.T)  # (N, C)
    assert torch.allclose(se(x), x * gates[:, :, None, None], atol=1e-6)
    assert se.mlp[0].bias is None and se.mlp[2].bias is None


@pytest.mark.parametrize(("latent_channels", "expected"), [(64, 64), (3.0, 3), (0.25, 4), (0.125, 2), (0.01, 1)])
def test_latent_width_is_absolute_or_a_fraction(latent_channels: float, expected: int):
    se = SqueezeExcite2d(num_features=16, latent_channels=latent_channels)
    assert se.latent_channels == expected and se.mlp[0].out_features == expected


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="latent_channels=0 must be positive"):
        SqueezeExcite2d(8, latent_channels=0)
    with pytest.raises(ValueError, match="latent_channels=-1 must be positive"):
        SqueezeExcite(latent_channels=-1)
    with pytest.raises(ValueError, match="min_channels=-3 must be a non-negative int"):
        apply_se(nn.Sequential(nn.Conv2d(1, 1, 1)), latent_channels=4, min_channels=-3)
    with pytest.raises(ValueError, match="either conv= .* or Conv2d arguments"):
        SqueezeExciteConv2d(3, 4, 1, conv=nn.Conv2d(3, 4, 1))


def test_squeeze_excite_conv_is_se_after_conv():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    layer = SqueezeExciteConv2d(conv=conv, latent_channels=0.5)
    x = torch.randn(2, 3, 6, 6)
    assert layer.conv is conv and torch.allclose(layer(x), layer.se(conv(x)))


def test_apply_se_only_where_min_in_out_reaches_min_channels():
    convs = [(3, 16), (16, 16), (16, 32), (32, 16), (32, 32), (32, 64), (64, 64)]
    model = nn.Sequential(*[nn.Conv2d(i, o, 1) for i, o in convs])
    apply_se(model, latent_channels=4, min_channels=32)
    wrapped = [isinstance(m, SqueezeExciteConv2d) for m in model]
    assert wrapped == [min(i, o) >= 32 for i, o in convs] == [False, False, False, False, True, True, True]
    with pytest.warns(UserWarning, match="replaced nothing"):
        apply_se(model, latent_channels=4, min_channels=32)  # a second application adds nothing
    assert sum(isinstance(m, SqueezeExcite2d) for m in model.modules()) == 3


def test_optimizer_given_to_apply_se_trains_the_new_blocks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    apply_se(model, latent_channels=2, min_channels=8, optimizers=optimizer)
    trained = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert {id(p) for p in model.parameters()} == trained


def _changes_outputs_keeping_shapes(model: nn.Module, size: int, min_channels: int) -> int:
    model.eval()
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    before = model(x)
    apply_se(model, latent_channels=0.25, min_channels=min_channels)
    after = model(x)
    assert after.shape == before.shape
    assert not torch.allclose(after, before, atol=1e-4)
    return sum(isinstance(m, SqueezeExciteConv2d) for m in model.modules())


def test_surgery_changes_outputs_of_our_resnets_keeping_shapes():
    torch.manual_seed(0)
    assert _changes_outputs_keeping_shapes(cifar_resnet(depth=8).module, 16, min_channels=64) == 1
    # ResNet-18's convs with min(in, out) >= 256: stage 4's 3x3s and shortcut, and stage 3's 256-wide 3x3s.
    assert _changes_outputs_keeping_shapes(imagenet_resnet(depth=18).module, 32, min_channels=256) == 8


def test_surgery_on_torchvision_resnets_at_64_pixels(torchvision_resnet: nn.Module):
    convs = [m for m in torchvision_resnet.modules() if isinstance(m, nn.Conv2d)]
    expected = sum(min(c.in_channels, c.out_channels) >= 128 for c in convs)
    assert _changes_outputs_keeping_shapes(torchvision_resnet, 64, min_channels=128) == expected > 0


def test_squeeze_excite_trains_the_new_blocks_through_the_trainer():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,))), batch_size=4)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        max_duration="2ba",
        algorithms=[SqueezeExcite(latent_channels=8, min_channels=32)],
        progress_bar=False,
    )
    blocks = [m for m in model.modules() if isinstance(m, SqueezeExcite2d)]
    assert len(blocks) == 4
    before = [b.mlp[0].weight.detach().clone() for b in blocks]
    trainer.fit()
    assert all(not torch.equal(w, b.mlp[0].weight) for w, b in zip(before, blocks))


def test_hparams_defaults():
    algorithm = SqueezeExciteHparams().initialize_object()
    assert (algorithm.latent_channels, algorithm.min_channels) == (64, 128)
    assert (SqueezeExcite().latent_channels, SqueezeExcite().min_channels) == (64, 128)
