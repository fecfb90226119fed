"""ImageNet-style ResNets (He et al. 2016): the basic and bottleneck residual blocks and the networks built from them.

The blocks keep torchvision's attribute names (``conv1``, ``bn1``, ..., ``downsample``), so model surgery written
for one works on the other, and the stride of a bottleneck sits on its 3x3 convolution ("ResNet v1.5").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from composer.models.classifier import ComposerClassifier

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "imagenet_resnet", "init_resnet_weights"]


def _shortcut(in_channels: int, out_channels: int, stride: int) -> nn.Module | None:
    # A projection (1x1 conv + BN) only where the identity would not fit the residual branch's output.
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
    )


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a skip connection: ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``.

    The building block of ResNet-18/34 and of the CIFAR ResNets. The shortcut is the identity, or a strided 1x1
    convolution with batch norm (``downsample``) when the block changes the width or the resolution.

    Args:
        in_channels: Channels of the input.
        out_channels: Channels of the output.
        stride: Stride of the first convolution (2 halves the resolution).

    Example:
        >>> block = BasicBlock(16, 32, stride=2)
        >>> block(torch.randn(2, 16, 8, 8)).shape
        torch.Size([2, 32, 4, 4])
    """

    expansion = 1

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = _shortcut(in_channels, out_channels, stride)
        self.stride = stride

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch alone, without the skip connection or the final ReLU."""
        out: torch.Tensor = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns ``relu(residual(x) + shortcut(x))``: ``(N, in, H, W) -> (N, out, H/stride, W/stride)``."""
        identity = x if self.downsample is None else self.downsample(x)
        out: torch.Tensor = self.relu(self.residual(x) + identity)
        return out


class Bottleneck(nn.Module):
    """A 1x1 reduce, 3x3 (strided), 1x1 expand residual block, the building block of ResNet-50/101/152.

    The output has ``4 * width`` channels. The shortcut is the identity, or a strided 1x1 convolution with batch
    norm (``downsample``) when the block changes the width or the resolution.

    Args:
        in_channels: Channels of the input.
        width: Channels of the inner 3x3 convolution; the block outputs ``4 * width``.
        stride: Stride of the 3x3 convolution.

    Example:
        >>> block = Bottleneck(64, 64)
        >>> block(torch.randn(2, 64, 8, 8)).shape
        torch.Size([2, 256, 8, 8])
    """

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_channels, out_channels, stride)
        self.stride = stride

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """The residual branch alone, without the skip connection or the final ReLU."""
        out: torch.Tensor = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns ``relu(residual(x) + shortcut(x))``: ``(N, in, H, W) -> (N, 4 * width, H/stride, W/stride)``."""
        identity = x if self.downsample is None else self.downsample(x)
        out: torch.Tensor = self.relu(self.residual(x) + identity)
        return out


def init_resnet_weights(module: nn.Module) -> None:
    """Kaiming-normal (fan-out, ReLU) convolutions, unit/zero batch norm, default linear layers."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class ResNet(nn.Module):
    """An ImageNet-style ResNet: a 7x7 stride-2 stem and 3x3 max pool, four stages, global pooling, a classifier.

    Stage ``i`` has ``layers[i]`` blocks of width ``64 * 2**i``; stages 2-4 halve the resolution in their first
    block. A 224x224 input reaches the pool at 7x7.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: Blocks per stage, four numbers (``(2, 2, 2, 2)`` for ResNet-18, ``(3, 4, 6, 3)`` for ResNet-50).
        num_classes: Output logits.
        in_channels: Channels of the input images.

    Example:
        >>> net = ResNet(BasicBlock, (1, 1, 1, 1), num_classes=5)
        >>> net(torch.randn(2, 3, 64, 64)).shape
        torch.Size([2, 5])
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        num_classes: int = 1000,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        if len(layers) != 4 or any(n < 1 for n in layers):
            raise ValueError(f"ResNet layers must be four positive block counts, got {tuple(layers)!r}.")
        self.num_classes = num_classes
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        channels = 64
        stages: list[nn.Module] = []
        for i, num_blocks in enumerate(layers):
            width = 64 * 2**i
            blocks: list[nn.Module] = []
            for j in range(num_blocks):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(channels, width, stride))
                channels = width * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)
        init_resnet_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns logits ``(N, num_classes)`` for images ``(N, in_channels, H, W)``."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits: torch.Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


_IMAGENET_CONFIGS: dict[int, tuple[type[BasicBlock] | type[Bottleneck], tuple[int, int, int, int]]] = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)),
    152: (Bottleneck, (3, 8, 36, 3)),
}


def imagenet_resnet(depth: int = 50, num_classes: int = 1000) -> ComposerClassifier:
    """An ImageNet-style ResNet-``depth`` wrapped as a :class:`~composer.models.ComposerClassifier`.

    Args:
        depth: 18, 34, 50, 101 or 152 (11.69M, 21.80M, 25.56M, 44.55M and 60.19M parameters at 1000 classes).
        num_classes: Output logits.

    Returns:
        ComposerClassifier: The model; ``model.module`` is the :class:`ResNet`.

    Example:
        >>> model = imagenet_resnet(depth=18, num_classes=10)
        >>> model((torch.randn(2, 3, 64, 64), torch.tensor([0, 1]))).shape
        torch.Size([2, 10])
    """
    if depth not in _IMAGENET_CONFIGS:
        raise ValueError(
            f"imagenet_resnet depth={depth!r} is not supported; choose one of {sorted(_IMAGENET_CONFIGS)}."
        )
    block, layers = _IMAGENET_CONFIGS[depth]
    return ComposerClassifier(ResNet(block, layers, num_classes=num_classes), num_classes=num_classes)
