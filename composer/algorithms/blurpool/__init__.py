"""BlurPool: anti-aliasing filters before strided convolutions and max pools.

Zhang 2019, "Making Convolutional Networks Shift-Invariant Again", https://arxiv.org/abs/1904.11486.
"""

from composer.algorithms.blurpool.blurpool import (
    BlurConv2d,
    BlurMaxPool2d,
    BlurPool,
    BlurPool2d,
    BlurPoolHparams,
    apply_blurpool,
    blur_2d,
)

__all__ = ["BlurConv2d", "BlurMaxPool2d", "BlurPool", "BlurPool2d", "BlurPoolHparams", "apply_blurpool", "blur_2d"]
