"""CutOut: zero one or more square patches of the input images.

From `Improved Regularization of Convolutional Neural Networks with Cutout <https://arxiv.org/abs/1708.04552>`_
(DeVries and Taylor 2017).
"""

from composer.algorithms.cutout.cutout import CutOut, CutOutHparams, cutout

__all__ = ["CutOut", "CutOutHparams", "cutout"]
