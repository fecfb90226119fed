"""Speed-up methods as Algorithms (two-way callbacks); each is also a plain function in composer.functional.

``ALGORITHMS`` maps each method's registry name to its class, ``ALGORITHM_HPARAMS`` to its config class (the class's
name plus ``Hparams``), and ``ALGORITHM_CLASS_NAMES`` to the class's name without importing anything. ``import composer.algorithms`` is cheap: each class is imported when first used, so
that the ``composer`` command can check a recipe's list of methods (:mod:`composer.algorithms.composition`) before
it imports torch.

Example:
    >>> from composer.algorithms import ALGORITHMS, ALGORITHM_CLASS_NAMES, MixUp
    >>> ALGORITHMS["mixup"] is MixUp and ALGORITHM_CLASS_NAMES["mixup"] == "MixUp"
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from composer._lazy import lazy_attributes

if TYPE_CHECKING:
    from composer.algorithms.alibi import Alibi, AlibiHparams
    from composer.algorithms.augmix import AugMix, AugMixHparams
    from composer.algorithms.blurpool import BlurPool, BlurPoolHparams
    from composer.algorithms.channels_last import ChannelsLast, ChannelsLastHparams
    from composer.algorithms.colout import ColOut, ColOutHparams
    from composer.algorithms.cutmix import CutMix, CutMixHparams
    from composer.algorithms.cutout import CutOut, CutOutHparams
    from composer.algorithms.ema import EMA, EMAHparams
    from composer.algorithms.factorize import Factorize, FactorizeHparams
    from composer.algorithms.gated_linear_units import GatedLinearUnits, GatedLinearUnitsHparams
    from composer.algorithms.ghost_batchnorm import GhostBatchNorm, GhostBatchNormHparams
    from composer.algorithms.gradient_clipping import GradientClipping, GradientClippingHparams
    from composer.algorithms.gyro_dropout import GyroDropout, GyroDropoutHparams
    from composer.algorithms.label_smoothing import LabelSmoothing, LabelSmoothingHparams
    from composer.algorithms.layer_freezing import LayerFreezing, LayerFreezingHparams
    from composer.algorithms.low_precision_groupnorm import LowPrecisionGroupNorm, LowPrecisionGroupNormHparams
    from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNorm, LowPrecisionLayerNormHparams
    from composer.algorithms.mixup import MixUp, MixUpHparams
    from composer.algorithms.no_op_model import NoOpModel, NoOpModelHparams
    from composer.algorithms.progressive_resizing import ProgressiveResizing, ProgressiveResizingHparams
    from composer.algorithms.randaugment import RandAugment, RandAugmentHparams
    from composer.algorithms.sam import SAM, SAMHparams, SAMOptimizer
    from composer.algorithms.scale_schedule import ScaleSchedule, ScaleScheduleHparams
    from composer.algorithms.selective_backprop import SelectiveBackprop, SelectiveBackpropHparams
    from composer.algorithms.seq_length_warmup import SeqLengthWarmup, SeqLengthWarmupHparams
    from composer.algorithms.squeeze_excite import SqueezeExcite, SqueezeExciteHparams
    from composer.algorithms.stochastic_depth import StochasticDepth, StochasticDepthHparams
    from composer.algorithms.swa import SWA, SWAHparams
    from composer.algorithms.weight_standardization import WeightStandardization, WeightStandardizationHparams
    from composer.core.algorithm import Algorithm
    from composer.core.hparams import Hparams

__all__ = [
    "ALGORITHMS",
    "ALGORITHM_CLASS_NAMES",
    "ALGORITHM_HPARAMS",
    "EMA",
    "SAM",
    "SWA",
    "Algorithm",
    "Alibi",
    "AlibiHparams",
    "AugMix",
    "AugMixHparams",
    "BlurPool",
    "BlurPoolHparams",
    "ChannelsLast",
    "ChannelsLastHparams",
    "ColOut",
    "ColOutHparams",
    "CutMix",
    "CutMixHparams",
    "CutOut",
    "CutOutHparams",
    "EMAHparams",
    "Factorize",
    "FactorizeHparams",
    "GatedLinearUnits",
    "GatedLinearUnitsHparams",
    "GhostBatchNorm",
    "GhostBatchNormHparams",
    "GradientClipping",
    "GradientClippingHparams",
    "GyroDropout",
    "GyroDropoutHparams",
    "LabelSmoothing",
    "LabelSmoothingHparams",
    "LayerFreezing",
    "LayerFreezingHparams",
    "LowPrecisionGroupNorm",
    "LowPrecisionGroupNormHparams",
    "LowPrecisionLayerNorm",
    "LowPrecisionLayerNormHparams",
    "MixUp",
    "MixUpHparams",
    "NoOpModel",
    "NoOpModelHparams",
    "ProgressiveResizing",
    "ProgressiveResizingHparams",
    "RandAugment",
    "RandAugmentHparams",
    "SAMHparams",
    "SAMOptimizer",
    "SWAHparams",
    "ScaleSchedule",
    "ScaleScheduleHparams",
    "SelectiveBackprop",
    "SelectiveBackpropHparams",
    "SeqLengthWarmup",
    "SeqLengthWarmupHparams",
    "SqueezeExcite",
    "SqueezeExciteHparams",
    "StochasticDepth",
    "StochasticDepthHparams",
    "WeightStandardization",
    "WeightStandardizationHparams",
]

ALGORITHM_CLASS_NAMES: dict[str, str] = {
    "colout": "ColOut",
    "cutmix": "CutMix",
    "cutout": "CutOut",
    "label_smoothing": "LabelSmoothing",
    "mixup": "MixUp",
    "layer_freezing": "LayerFreezing",
    "progressive_resizing": "ProgressiveResizing",
    "randaugment": "RandAugment",
    "augmix": "AugMix",
    "selective_backprop": "SelectiveBackprop",
    "sam": "SAM",
    "swa": "SWA",
    "scale_schedule": "ScaleSchedule",
    "ema": "EMA",
    "gradient_clipping": "GradientClipping",
    "blurpool": "BlurPool",
    "channels_last": "ChannelsLast",
    "ghost_batchnorm": "GhostBatchNorm",
    "squeeze_excite": "SqueezeExcite",
    "stochastic_depth": "StochasticDepth",
    "alibi": "Alibi",
    "seq_length_warmup": "SeqLengthWarmup",
    "factorize": "Factorize",
    "weight_standardization": "WeightStandardization",
    "no_op_model": "NoOpModel",
    "gated_linear_units": "GatedLinearUnits",
    "low_precision_layernorm": "LowPrecisionLayerNorm",
    "low_precision_groupnorm": "LowPrecisionGroupNorm",
    "gyro_dropout": "GyroDropout",
}
"""Each method's registry name mapped to its class's name: :data:`ALGORITHMS` without importing the classes."""

# Public name -> the module that defines it.
_LAZY = {
    "Algorithm": "composer.core.algorithm",
    "Alibi": "composer.algorithms.alibi",
    "AlibiHparams": "composer.algorithms.alibi",
    "AugMix": "composer.algorithms.augmix",
    "AugMixHparams": "composer.algorithms.augmix",
    "BlurPool": "composer.algorithms.blurpool",
    "BlurPoolHparams": "composer.algorithms.blurpool",
    "ChannelsLast": "composer.algorithms.channels_last",
    "ChannelsLastHparams": "composer.algorithms.channels_last",
    "ColOut": "composer.algorithms.colout",
    "ColOutHparams": "composer.algorithms.colout",
    "CutMix": "composer.algorithms.cutmix",
    "CutMixHparams": "composer.algorithms.cutmix",
    "CutOut": "composer.algorithms.cutout",
    "CutOutHparams": "composer.algorithms.cutout",
    "EMA": "composer.algorithms.ema",
    "EMAHparams": "composer.algorithms.ema",
    "Factorize": "composer.algorithms.factorize",
    "FactorizeHparams": "composer.algorithms.factorize",
    "GatedLinearUnits": "composer.algorithms.gated_linear_units",
    "GatedLinearUnitsHparams": "composer.algorithms.gated_linear_units",
    "GyroDropout": "composer.algorithms.gyro_dropout",
    "GyroDropoutHparams": "composer.algorithms.gyro_dropout",
    "LowPrecisionGroupNorm": "composer.algorithms.low_precision_groupnorm",
    "LowPrecisionGroupNormHparams": "composer.algorithms.low_precision_groupnorm",
    "LowPrecisionLayerNorm": "composer.algorithms.low_precision_layernorm",
    "LowPrecisionLayerNormHparams": "composer.algorithms.low_precision_layernorm",
    "GhostBatchNorm": "composer.algorithms.ghost_batchnorm",
    "GhostBatchNormHparams": "composer.algorithms.ghost_batchnorm",
    "GradientClipping": "composer.algorithms.gradient_clipping",
    "GradientClippingHparams": "composer.algorithms.gradient_clipping",
    "LabelSmoothing": "composer.algorithms.label_smoothing",
    "LabelSmoothingHparams": "composer.algorithms.label_smoothing",
    "LayerFreezing": "composer.algorithms.layer_freezing",
    "LayerFreezingHparams": "composer.algorithms.layer_freezing",
    "MixUp": "composer.algorithms.mixup",
    "MixUpHparams": "composer.algorithms.mixup",
    "NoOpModel": "composer.algorithms.no_op_model",
    "NoOpModelHparams": "composer.algorithms.no_op_model",
    "ProgressiveResizing": "composer.algorithms.progressive_resizing",
    "ProgressiveResizingHparams": "composer.algorithms.progressive_resizing",
    "RandAugment": "composer.algorithms.randaugment",
    "RandAugmentHparams": "composer.algorithms.randaugment",
    "SAM": "composer.algorithms.sam",
    "SAMHparams": "composer.algorithms.sam",
    "SAMOptimizer": "composer.algorithms.sam",
    "ScaleSchedule": "composer.algorithms.scale_schedule",
    "ScaleScheduleHparams": "composer.algorithms.scale_schedule",
    "SelectiveBackprop": "composer.algorithms.selective_backprop",
    "SelectiveBackpropHparams": "composer.algorithms.selective_backprop",
    "SeqLengthWarmup": "composer.algorithms.seq_length_warmup",
    "SeqLengthWarmupHparams": "composer.algorithms.seq_length_warmup",
    "SqueezeExcite": "composer.algorithms.squeeze_excite",
    "SqueezeExciteHparams": "composer.algorithms.squeeze_excite",
    "StochasticDepth": "composer.algorithms.stochastic_depth",
    "StochasticDepthHparams": "composer.algorithms.stochastic_depth",
    "SWA": "composer.algorithms.swa",
    "SWAHparams": "composer.algorithms.swa",
    "WeightStandardization": "composer.algorithms.weight_standardization",
    "WeightStandardizationHparams": "composer.algorithms.weight_standardization",
}

_lazy_getattr, __dir__ = lazy_attributes(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    suffix = {"ALGORITHMS": "", "ALGORITHM_HPARAMS": "Hparams"}.get(name)
    if suffix is not None:
        registry = {key: _lazy_getattr(cls + suffix) for key, cls in ALGORITHM_CLASS_NAMES.items()}
        globals()[name] = registry
        return registry
    return _lazy_getattr(name)


if TYPE_CHECKING:
    ALGORITHMS: dict[str, type[Algorithm]]
    """The algorithm registry: each name a recipe's ``algorithms:`` may use, mapped to its class (imported on first
    access)."""
    ALGORITHM_HPARAMS: dict[str, type[Hparams]]
    """Each name of :data:`ALGORITHMS` mapped to its config class (imported on first access)."""
