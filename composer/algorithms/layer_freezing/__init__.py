"""Layer freezing: progressively freeze the earliest layers during training.

Freezing schedule similar to FreezeOut (Brock et al. 2017, https://arxiv.org/abs/1706.04983) and Freeze Training
(Raghu et al. 2017, https://arxiv.org/abs/1706.05806).
"""

from composer.algorithms.layer_freezing.layer_freezing import (
    LayerFreezing,
    LayerFreezingHparams,
    freeze_layers,
    freeze_schedule,
)

__all__ = ["LayerFreezing", "LayerFreezingHparams", "freeze_layers", "freeze_schedule"]
