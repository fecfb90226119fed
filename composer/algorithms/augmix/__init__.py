"""AugMix: train on convex combinations of an image and several randomly augmented copies of it.

From `AugMix: A Simple Data Processing Method to Improve Robustness and Uncertainty <https://arxiv.org/abs/1912.02781>`_
(Hendrycks et al. 2020).
"""

from composer.algorithms.augmix.augmix import (
    AugmentAndMixTransform,
    AugMix,
    AugMixHparams,
    augment_and_mix,
    augmix_image,
)
from composer.algorithms.utils.augmentation_sets import augmentation_sets

__all__ = ["AugMix", "AugMixHparams", "AugmentAndMixTransform", "augment_and_mix", "augmentation_sets", "augmix_image"]
