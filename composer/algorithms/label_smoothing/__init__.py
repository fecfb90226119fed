"""Label smoothing: shrink the targets towards the uniform distribution over classes.

From `Rethinking the Inception Architecture for Computer Vision <https://arxiv.org/abs/1512.00567>`_ (Szegedy et al.
2016).
"""

from composer.algorithms.label_smoothing.label_smoothing import LabelSmoothing, LabelSmoothingHparams, smooth_labels

__all__ = ["LabelSmoothing", "LabelSmoothingHparams", "smooth_labels"]
