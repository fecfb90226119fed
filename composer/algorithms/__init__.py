"""Speed-up methods as Algorithms (two-way callbacks); each is also a plain function in composer.functional.

``ALGORITHMS`` maps each method's registry name to its class.
"""

from __future__ import annotations

from composer.algorithms.alibi import Alibi, AlibiHparams
from composer.algorithms.augmix import AugMix, AugMixHparams
from composer.algorithms.blurpool import BlurPool, BlurPoolHparams
from composer.algorithms.channels_last import ChannelsLast, ChannelsLastHparams
from composer.algorithms.colout import ColOut, ColOutHparams
from composer.algorithms.cutmix import CutMix, CutMixHparams
from composer.algorithms.cutout import CutOut, CutOutHparams
from composer.algorithms.ema import EMA, EMAHparams
from composer.algorithms.ghost_batchnorm import GhostBatchNorm, GhostBatchNormHparams
from composer.algorithms.gradient_clipping import GradientClipping, GradientClippingHparams
from composer.algorithms.label_smoothing import LabelSmoothing, LabelSmoothingHparams
from composer.algorithms.layer_freezing import LayerFreezing, LayerFreezingHparams
from composer.algorithms.mixup import MixUp, MixUpHparams
from composer.algorithms.progressive_resizing import ProgressiveResizing, ProgressiveResizingHparams
from composer.algorithms.randaugment import RandAugment, RandAugmentHparams
from composer.algorithms.sam import SAM, SAMHparams, SAMOptimizer
from composer.algorithms.scale_schedule import ScaleSchedule, ScaleScheduleHparams
from composer.algorithms.selective_backprop import SelectiveBackprop, SelectiveBackpropHparams
from composer.algorithms.seq_length_warmup import SeqLengthWarmup, SeqLengthWarmupHparams
from composer.algorithms.squeeze_excite import SqueezeExcite, SqueezeExciteHparams
from composer.algorithms.stochastic_depth import StochasticDepth, StochasticDepthHparams
from composer.algorithms.swa import SWA, SWAHparams
from composer.core.algorithm import Algorithm

__all__ = [
    "ALGORITHMS",
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
    "GhostBatchNorm",
    "GhostBatchNormHparams",
    "GradientClipping",
    "GradientClippingHparams",
    "LabelSmoothing",
    "LabelSmoothingHparams",
    "LayerFreezing",
    "LayerFreezingHparams",
    "MixUp",
    "MixUpHparams",
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
]

ALGORITHMS: dict[str, type[Algorithm]] = {
    "colout": ColOut,
    "cutmix": CutMix,
    "cutout": CutOut,
    "label_smoothing": LabelSmoothing,
    "mixup": MixUp,
    "layer_freezing": LayerFreezing,
    "progressive_resizing": ProgressiveResizing,
    "randaugment": RandAugment,
    "augmix": AugMix,
    "selective_backprop": SelectiveBackprop,
    "sam": SAM,
    "swa": SWA,
    "scale_schedule": ScaleSchedule,
    "ema": EMA,
    "gradient_clipping": GradientClipping,
    "blurpool": BlurPool,
    "channels_last": ChannelsLast,
    "ghost_batchnorm": GhostBatchNorm,
    "squeeze_excite": SqueezeExcite,
    "stochastic_depth": StochasticDepth,
    "alibi": Alibi,
    "seq_length_warmup": SeqLengthWarmup,
}
