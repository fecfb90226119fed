"""Stochastic Depth: randomly skip residual blocks (or, per sample, their residual branches) during training.

Huang, Sun, Liu, Sedra and Weinberger 2016, "Deep Networks with Stochastic Depth", https://arxiv.org/abs/1603.09382;
the sample-wise variant follows the EfficientNet TensorFlow/TPU implementation (Tan and Le 2019).
"""

from composer.algorithms.stochastic_depth.stochastic_depth import (
    DROP_DISTRIBUTIONS,
    STOCHASTIC_LAYER_MAPPING,
    StochasticDepth,
    StochasticDepthHparams,
    apply_stochastic_depth,
)
from composer.algorithms.stochastic_depth.stochastic_layers import (
    STOCHASTIC_METHODS,
    StochasticBasicBlock,
    StochasticBottleneck,
)

__all__ = [
    "DROP_DISTRIBUTIONS",
    "STOCHASTIC_LAYER_MAPPING",
    "STOCHASTIC_METHODS",
    "StochasticBasicBlock",
    "StochasticBottleneck",
    "StochasticDepth",
    "StochasticDepthHparams",
    "apply_stochastic_depth",
]
