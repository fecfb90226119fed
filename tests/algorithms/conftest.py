"""Fixtures shared by the algorithm tests."""

from __future__ import annotations

import pytest
from torch import nn

from tests.common.torchvision_models import torchvision_resnet_copy


@pytest.fixture(params=["resnet18", pytest.param("resnet50", marks=pytest.mark.slow)])
def torchvision_resnet(request: pytest.FixtureRequest) -> nn.Module:
    """torchvision's ResNet-18 (and ResNet-50 in slow runs), a fresh copy per test."""
    return torchvision_resnet_copy(request.param)
