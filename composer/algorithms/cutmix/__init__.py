"""CutMix: paste a box from another image of the batch into each image and mix the targets by the box's area.

From `CutMix: Regularization Strategy to Train Strong Classifiers with Localizable Features
<https://arxiv.org/abs/1905.04899>`_ (Yun et al. 2019).
"""

from composer.algorithms.cutmix.cutmix import CutMix, CutMixHparams, cutmix_batch, cutmix_inputs, gen_cutmix_bbox

__all__ = ["CutMix", "CutMixHparams", "cutmix_batch", "cutmix_inputs", "gen_cutmix_bbox"]
