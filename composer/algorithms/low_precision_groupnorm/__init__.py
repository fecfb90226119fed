"""Low-precision GroupNorm: group norm in bf16 or fp16 under autocast, instead of float32.

MosaicML, "Low Precision GroupNorm" (method card of MosaicML Composer, 2023); see the README in this folder.
"""

from composer.algorithms.low_precision_groupnorm.low_precision_groupnorm import (
    LowPrecisionGroupNorm,
    LowPrecisionGroupNormHparams,
    LowPrecisionGroupNormModule,
    apply_low_precision_groupnorm,
)

__all__ = [
    "LowPrecisionGroupNorm",
    "LowPrecisionGroupNormHparams",
    "LowPrecisionGroupNormModule",
    "apply_low_precision_groupnorm",
]
