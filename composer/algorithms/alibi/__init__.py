"""ALiBi (Press et al. 2022): attention with linear biases instead of position embeddings; trains short, tests long."""

from composer.algorithms.alibi.alibi import Alibi, AlibiHparams, apply_alibi, scale_sequence_length
from composer.algorithms.alibi.bias import AlibiBias, ZeroPositionEmbedding, alibi_bias, alibi_slopes
from composer.algorithms.alibi.policies import ALIBI_POLICIES, AlibiPolicy

__all__ = [
    "ALIBI_POLICIES",
    "Alibi",
    "AlibiBias",
    "AlibiHparams",
    "AlibiPolicy",
    "ZeroPositionEmbedding",
    "alibi_bias",
    "alibi_slopes",
    "apply_alibi",
    "scale_sequence_length",
]
