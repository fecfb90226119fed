"""Sharpness-aware minimization (Foret et al. 2020, https://arxiv.org/abs/2010.01412)."""

from composer.algorithms.sam.sam import SAM, SAMHparams, SAMOptimizer, sam_perturbation

__all__ = ["SAM", "SAMHparams", "SAMOptimizer", "sam_perturbation"]
