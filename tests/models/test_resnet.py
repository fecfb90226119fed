"""ImageNet- and CIFAR-style ResNets: output shapes, parameter counts against the published figures, bad depths."""

from __future__ import annotations

import pytest
import torch

from composer.models import BasicBlock, Bottleneck, ComposerClassifier, cifar_resnet, imagenet_resnet
from composer.models.resnet_cifar import CIFARResNet


def _num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("depth", "millions"), [(20, 0.27), (56, 0.85)])
def test_cifar_resnet_parameter_counts_match_the_paper(depth: int, millions: float):
    # He et al. 2016, Table 6: ResNet-20 0.27M, ResNet-56 0.85M (our projection shortcuts add ~1%).
    model = cifar_resnet(depth=depth)
    assert isinstance(model, ComposerClassifier)
    assert _num_params(model) == pytest.approx(millions * 1e6, rel=0.02)


@pytest.mark.parametrize(("depth", "count"), [(18, 11_689_512), (50, 25_557_032)])
def test_imagenet_resnet_parameter_counts_match_the_reference(depth: int, count: int):
    # The well-known counts at 1000 classes: ResNet-18 11.69M, ResNet-50 25.56M (torchvision's exact figures).
    assert _num_params(imagenet_resnet(depth=depth)) == count


def test_cifar_resnet_structure_and_shapes():
    torch.manual_seed(0)
    model = cifar_resnet(depth=20, num_classes=7)
    net = model.module
    assert isinstance(net, CIFARResNet)
    blocks = [m for m in net.modules() if isinstance(m, BasicBlock)]
    assert len(blocks) == 9  # (20 - 2) // 6 = 3 per stage
    assert [b.conv2.out_channels for b in blocks] == [16] * 3 + [32] * 3 + [64] * 3
    logits = model((torch.randn(3, 3, 32, 32), torch.zeros(3, dtype=torch.long)))
    assert logits.shape == (3, 7)
    # Stage outputs halve the resolution twice: 32 -> 16 -> 8.
    x = net.relu(net.bn1(net.conv1(torch.randn(1, 3, 32, 32))))
    assert net.layer3(net.layer2(net.layer1(x))).shape == (1, 64, 8, 8)


def test_imagenet_resnet_shapes_at_64_pixels():
    torch.manual_seed(0)
    model = imagenet_resnet(depth=18, num_classes=5)
    assert model((torch.randn(2, 3, 64, 64), torch.zeros(2, dtype=torch.long))).shape == (2, 5)
    assert sum(isinstance(m, BasicBlock) for m in model.modules()) == 8


def test_bottleneck_expands_four_times_and_strides_its_3x3_conv():
    block = Bottleneck(64, 32, stride=2)
    assert block.conv2.stride == (2, 2) and block.conv1.stride == (1, 1)
    assert block(torch.randn(2, 64, 8, 8)).shape == (2, 128, 4, 4)
    assert block.downsample is not None
    assert Bottleneck(128, 32).downsample is None  # identity shortcut when shapes already match


@pytest.mark.parametrize("depth", [0, 2, 7, 21, 57, "20"])
def test_cifar_resnet_rejects_depths_not_of_the_form_6n_plus_2(depth):
    with pytest.raises(ValueError, match=r"depth=.* 6n \+ 2"):
        cifar_resnet(depth=depth)


def test_imagenet_resnet_rejects_unknown_depths_listing_the_choices():
    with pytest.raises(ValueError, match=r"depth=20 .*\[18, 34, 50, 101, 152\]"):
        imagenet_resnet(depth=20)


def test_trains_through_the_trainer():
    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer

    torch.manual_seed(0)
    model = cifar_resnet(depth=8, num_classes=3)
    data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 3, (8,))), batch_size=4)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = Trainer(model=model, train_dataloader=data, max_duration="2ba", progress_bar=False, seed=0)
    trainer.fit()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
