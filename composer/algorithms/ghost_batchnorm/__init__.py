"""Ghost Batch Normalization: batch norm over small slices ("ghost batches") of each training batch.

Hoffer, Hubara and Soudry 2017, "Train longer, generalize better: closing the generalization gap in large batch
training of neural networks", https://arxiv.org/abs/1705.08741.
"""

from composer.algorithms.ghost_batchnorm.ghost_batchnorm import (
    GhostBatchNorm,
    GhostBatchNorm1d,
    GhostBatchNorm2d,
    GhostBatchNorm3d,
    GhostBatchNormHparams,
    apply_ghost_batchnorm,
)

__all__ = [
    "GhostBatchNorm",
    "GhostBatchNorm1d",
    "GhostBatchNorm2d",
    "GhostBatchNorm3d",
    "GhostBatchNormHparams",
    "apply_ghost_batchnorm",
]
