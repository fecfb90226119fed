"""Stochastic weight averaging (Izmailov et al. 2018, https://arxiv.org/abs/1803.05407)."""

from composer.algorithms.swa.swa import SWA, SWAHparams, swa_annealed_lr, update_bn_statistics, update_swa_weights

__all__ = ["SWA", "SWAHparams", "swa_annealed_lr", "update_bn_statistics", "update_swa_weights"]
