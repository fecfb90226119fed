"""MLP: a small fully connected classifier for examples, tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import nn

__all__ = ["MLP"]


class MLP(nn.Module):
    """A multilayer perceptron: flatten, then ``Linear -> ReLU`` for each hidden width, then a linear classifier.

    Inputs of any shape ``(N, ...)`` are flattened to ``(N, in_features)``, so it takes images as they come (an
    8x8 digit is ``in_features=64``). Wrap it in :class:`~composer.models.ComposerClassifier` to train it.

    Args:
        in_features: Features per sample after flattening.
        hidden: Widths of the hidden layers, in order; empty for a linear (logistic-regression) model.
        num_classes: Output logits per sample.

    Example:
        >>> model = MLP(in_features=256, hidden=(512, 512), num_classes=10)
        >>> model(torch.randn(4, 256)).shape
        torch.Size([4, 10])
        >>> MLP(in_features=64, hidden=(), num_classes=10)(torch.randn(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    def __init__(self, in_features: int, hidden: Sequence[int] = (512, 512), num_classes: int = 10) -> None:
        super().__init__()
        widths = [in_features, *hidden]
        for name, width in [("in_features", in_features), *((f"hidden[{i}]", w) for i, w in enumerate(hidden))]:
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise ValueError(f"MLP {name} must be a positive int, got {width!r}.")
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"MLP num_classes must be a positive int, got {num_classes!r}.")
        layers: list[nn.Module] = [nn.Flatten()]
        for width_in, width_out in pairwise(widths):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], num_classes))
        self.net = nn.Sequential(*layers)
        self.in_features = in_features
        self.num_classes = num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns logits of shape ``(N, num_classes)`` for inputs of shape ``(N, ...)``."""
        logits: torch.Tensor = self.net(x)
        return logits
