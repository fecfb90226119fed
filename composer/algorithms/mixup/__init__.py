"""MixUp: train on convex combinations of pairs of examples and of their targets.

From `mixup: Beyond Empirical Risk Minimization <https://arxiv.org/abs/1710.09412>`_ (Zhang et al. 2018).
"""

from composer.algorithms.mixup.batch_mixing import mix_targets
from composer.algorithms.mixup.mixup import MixUp, MixUpHparams, gen_interpolation_lambda, mixup_batch, mixup_inputs

__all__ = ["MixUp", "MixUpHparams", "gen_interpolation_lambda", "mix_targets", "mixup_batch", "mixup_inputs"]
