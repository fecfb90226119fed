"""Gradient clipping by global norm, by value, or adaptively (AGC, Brock et al. 2021, https://arxiv.org/abs/2102.06171)."""

from composer.algorithms.gradient_clipping.gradient_clipping import (
    CLIPPING_TYPES,
    GradientClipping,
    GradientClippingHparams,
    apply_gradient_clipping,
)

__all__ = ["CLIPPING_TYPES", "GradientClipping", "GradientClippingHparams", "apply_gradient_clipping"]
