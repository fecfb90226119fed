"""CIFAR-style ResNets (He et al. 2016, section 4.2): ResNet-20, -32, -44, -56, -110 and any depth ``6n + 2``."""

from __future__ import annotations

import torch
from torch import nn

from composer.models.classifier import ComposerClassifier
from composer.models.resnet import BasicBlock, init_resnet_weights

__all__ = ["CIFARResNet", "cifar_resnet"]


class CIFARResNet(nn.Module):
    """A ResNet for 32x32 images: a 3x3 stem of 16 channels, then three stages of :class:`BasicBlock` s.

    The stages have widths 16, 32 and 64 and ``(depth - 2) // 6`` blocks each; the second and third halve the
    resolution. A width or resolution change goes through a 1x1 projection shortcut (option B of the paper).
    ResNet-20 has about 0.27M parameters and ResNet-56 about 0.86M.

    Args:
        depth: ``6n + 2`` layers for some ``n >= 1`` (20, 32, 44, 56, 110, ...).
        num_classes: Output logits.
        in_channels: Channels of the input images.

    Example:
        >>> net = CIFARResNet(depth=20, num_classes=10)
        >>> net(torch.randn(2, 3, 32, 32)).shape
        torch.Size([2, 10])
    """

    def __init__(self, depth: int = 56, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 8 or (depth - 2) % 6 != 0:
            raise ValueError(
                f"cifar_resnet depth={depth!r} is not of the form 6n + 2 with n >= 1; use 20, 32, 44, 56 or 110 "
                "(or any 6n + 2, such as 8 for a tiny test model)."
            )
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"cifar_resnet num_classes must be a positive int, got {num_classes!r}.")
        self.depth = depth
        self.num_classes = num_classes
        blocks_per_stage = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        channels = 16
        stages: list[nn.Module] = []
        for i, width in enumerate((16, 32, 64)):
            blocks: list[nn.Module] = []
            for j in range(blocks_per_stage):
                blocks.append(BasicBlock(channels, width, stride=2 if (i > 0 and j == 0) else 1))
                channels = width
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)
        init_resnet_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns logits ``(N, num_classes)`` for images ``(N, in_channels, H, W)`` (32x32 for CIFAR)."""
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        logits: torch.Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


def cifar_resnet(depth: int = 56, num_classes: int = 10) -> ComposerClassifier:
    """A CIFAR ResNet-``depth`` wrapped as a :class:`~composer.models.ComposerClassifier`.

    Args:
        depth: ``6n + 2`` layers (20 and 56 are the usual choices; 8 makes a tiny test model).
        num_classes: Output logits.

    Returns:
        ComposerClassifier: The model; ``model.module`` is the :class:`CIFARResNet`.

    Example:
        >>> model = cifar_resnet(depth=20)
        >>> batch = (torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3]))
        >>> model(batch).shape
        torch.Size([4, 10])
        >>> cifar_resnet(depth=21)
        Traceback (most recent call last):
        ...
        ValueError: cifar_resnet depth=21 is not of the form 6n + 2 with n >= 1; ...
    """
    return ComposerClassifier(CIFARResNet(depth=depth, num_classes=num_classes), num_classes=num_classes)
