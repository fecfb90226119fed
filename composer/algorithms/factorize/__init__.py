"""Factorize: large convolutions and linear layers replaced by low-rank pairs initialised by truncated SVD.

The factorization of a layer through a narrow bottleneck follows the "Factorize" method of MosaicML Composer; the
initialisation from the layer's own weights is the truncated singular value decomposition (Eckart and Young 1936,
"The approximation of one matrix by another of lower rank", Psychometrika 1(3)), as in Denton, Zaremba, Bruna,
LeCun and Fergus 2014, "Exploiting Linear Structure Within Convolutional Networks for Efficient Evaluation",
https://arxiv.org/abs/1404.0736.
"""

from composer.algorithms.factorize.factorize import Factorize, FactorizeHparams, apply_factorization
from composer.algorithms.factorize.factorized_layers import FactorizedConv2d, FactorizedLinear
from composer.algorithms.factorize.latent_sizes import latent_size, max_useful_rank
from composer.algorithms.factorize.low_rank import LowRankSolution, factorize_conv2d, factorize_matrix, svd_factors

__all__ = [
    "Factorize",
    "FactorizeHparams",
    "FactorizedConv2d",
    "FactorizedLinear",
    "LowRankSolution",
    "apply_factorization",
    "factorize_conv2d",
    "factorize_matrix",
    "latent_size",
    "max_useful_rank",
    "svd_factors",
]
