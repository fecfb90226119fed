"""RandAugment: apply a few image operations, chosen at random, at one shared severity.

From `RandAugment: Practical automated data augmentation with a reduced search space
<https://arxiv.org/abs/1909.13719>`_ (Cubuk et al. 2020).
"""

from composer.algorithms.randaugment.randaugment import (
    RandAugment,
    RandAugmentHparams,
    RandAugmentTransform,
    randaugment,
    randaugment_image,
)
from composer.algorithms.utils.augmentation_sets import augmentation_sets

__all__ = [
    "RandAugment",
    "RandAugmentHparams",
    "RandAugmentTransform",
    "augmentation_sets",
    "randaugment",
    "randaugment_image",
]
