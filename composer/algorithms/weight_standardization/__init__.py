"""Weight Standardization: convolution weights standardized per output channel, through a parametrization.

Siyuan Qiao, Huiyu Wang, Chenxi Liu, Wei Shen and Alan Yuille 2019, "Micro-Batch Training with Batch-Channel
Normalization and Weight Standardization", https://arxiv.org/abs/1903.10520.
"""

from composer.algorithms.weight_standardization.weight_standardization import (
    WeightStandardization,
    WeightStandardizationHparams,
    WeightStandardizer,
    apply_weight_standardization,
    standardize_weight,
)

__all__ = [
    "WeightStandardization",
    "WeightStandardizationHparams",
    "WeightStandardizer",
    "apply_weight_standardization",
    "standardize_weight",
]
