"""Low-precision LayerNorm: layer norm in bf16 or fp16 under autocast, instead of float32.

MosaicML, "Low Precision LayerNorm" (method card of MosaicML Composer, 2023); see the README in this folder.
"""

from composer.algorithms.low_precision_layernorm.low_precision_layernorm import (
    LowPrecisionLayerNorm,
    LowPrecisionLayerNormHparams,
    LowPrecisionLayerNormModule,
    apply_low_precision_layernorm,
)

__all__ = [
    "LowPrecisionLayerNorm",
    "LowPrecisionLayerNormHparams",
    "LowPrecisionLayerNormModule",
    "apply_low_precision_layernorm",
]
