"""Squeeze-and-Excitation: channel gates computed from globally pooled features, after convolutions.

Hu, Shen, Albanie, Sun and Wu 2018, "Squeeze-and-Excitation Networks", https://arxiv.org/abs/1709.01507.
"""

from composer.algorithms.squeeze_excite.squeeze_excite import (
    SqueezeExcite,
    SqueezeExcite2d,
    SqueezeExciteConv2d,
    SqueezeExciteHparams,
    apply_se,
)

__all__ = ["SqueezeExcite", "SqueezeExcite2d", "SqueezeExciteConv2d", "SqueezeExciteHparams", "apply_se"]
