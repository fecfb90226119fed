"""torchvision's ResNets for surgery tests, built once per session; every caller gets its own copy."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
from torch import nn

__all__ = ["torchvision_resnet_copy"]

_BUILT: dict[str, nn.Module] = {}


def torchvision_resnet_copy(name: str) -> nn.Module:
    """A fresh copy of ``torchvision.models.<name>(num_classes=10)`` initialised with seed 0."""
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed (pip install 'opencomposer[vision]')")
    import torchvision

    if name not in _BUILT:
        torch.manual_seed(0)
        _BUILT[name] = getattr(torchvision.models, name)(num_classes=10)
    return copy.deepcopy(_BUILT[name])
