"""Gated Linear Units: a transformer's feed-forward blocks become GLU blocks (GEGLU, ReGLU, SwiGLU).

Noam Shazeer 2020, "GLU Variants Improve Transformer", https://arxiv.org/abs/2002.05202.
"""

from composer.algorithms.gated_linear_units.gated_linear_units import (
    GatedLinearUnits,
    GatedLinearUnitsHparams,
    apply_gated_linear_units,
    glu_hidden_size,
)
from composer.algorithms.gated_linear_units.layers import GLU_ACTIVATIONS, GatedLinearUnit, GLUFeedForward

__all__ = [
    "GLU_ACTIVATIONS",
    "GLUFeedForward",
    "GatedLinearUnit",
    "GatedLinearUnits",
    "GatedLinearUnitsHparams",
    "apply_gated_linear_units",
    "glu_hidden_size",
]
