"""Exponential moving average of the model weights, used for evaluation."""

from composer.algorithms.ema.ema import EMA, EMAHparams, compute_ema, smoothing_from_half_life

__all__ = ["EMA", "EMAHparams", "compute_ema", "smoothing_from_half_life"]
