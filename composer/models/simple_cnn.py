"""SimpleCNN: a small convolutional classifier for images of any size, for CPU-sized tasks and tests."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from composer.models.classifier import ComposerClassifier

__all__ = ["SimpleCNN", "simple_cnn"]


class SimpleCNN(nn.Module):
    """Stages of ``conv 3x3 -> BatchNorm -> ReLU -> max-pool 2x2``, then global average pooling and a linear layer.

    Each entry of ``widths`` adds a stage with that many channels and halves the resolution. The global pooling lets
    the network take images of any size of at least ``2 ** len(widths)`` pixels a side, which is what methods that
    change the resolution during training (ProgressiveResizing, ColOut) need. It is the model of the built-in digits
    task: with widths ``(16, 32, 64)`` on 32x32 images it has 24k parameters and trains in seconds per epoch on a CPU.

    Args:
        in_channels: Channels of the input images.
        widths: Channels of each stage, in order.
        num_classes: Output logits.
        dropout: Probability of an ``nn.Dropout`` on the pooled features before the linear layer (the classifier
            head); 0 (the default) adds no dropout module.

    Example:
        >>> net = SimpleCNN(in_channels=1, widths=(8, 16), num_classes=10)
        >>> net(torch.randn(2, 1, 32, 32)).shape, net(torch.randn(2, 1, 12, 12)).shape
        (torch.Size([2, 10]), torch.Size([2, 10]))
    """

    def __init__(
        self, in_channels: int = 3, widths: Sequence[int] = (16, 32, 64), num_classes: int = 10, dropout: float = 0.0
    ) -> None:
        super().__init__()
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"SimpleCNN dropout must be a probability in [0, 1), got {dropout!r}.")
        named = [("in_channels", in_channels), ("num_classes", num_classes)]
        named += [(f"widths[{i}]", w) for i, w in enumerate(widths)]
        for name, value in named:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SimpleCNN {name} must be a positive int, got {value!r}.")
        if len(widths) == 0:
            raise ValueError("SimpleCNN widths must name at least one stage, for example (16, 32, 64).")
        layers: list[nn.Module] = []
        channels = in_channels
        for width in widths:
            layers += [
                nn.Conv2d(channels, width, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            channels = width
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.fc = nn.Linear(channels, num_classes)
        self.num_classes = num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns logits ``(N, num_classes)`` for images ``(N, in_channels, H, W)``."""
        logits: torch.Tensor = self.fc(self.dropout(torch.flatten(self.pool(self.features(x)), 1)))
        return logits


def simple_cnn(
    in_channels: int = 3, widths: Sequence[int] = (16, 32, 64), num_classes: int = 10, dropout: float = 0.0
) -> ComposerClassifier:
    """A :class:`SimpleCNN` wrapped as a :class:`~composer.models.ComposerClassifier`.

    Args:
        in_channels: Channels of the input images.
        widths: Channels of each stage.
        num_classes: Output logits.
        dropout: Dropout probability before the linear layer (0: none).

    Returns:
        ComposerClassifier: The model; ``model.module`` is the :class:`SimpleCNN`.

    Example:
        >>> model = simple_cnn(in_channels=1, widths=(8, 16), num_classes=10)
        >>> model((torch.randn(4, 1, 32, 32), torch.tensor([0, 1, 2, 3]))).shape
        torch.Size([4, 10])
    """
    return ComposerClassifier(SimpleCNN(in_channels, widths, num_classes, dropout), num_classes=num_classes)
