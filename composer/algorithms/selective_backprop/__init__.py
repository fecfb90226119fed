"""Selective backprop: backpropagate only through the hardest samples of each batch.

See Jiang et al., "Accelerating Deep Learning by Focusing on the Biggest Losers" (2019,
https://arxiv.org/abs/1910.00762).
"""

from composer.algorithms.selective_backprop.selective_backprop import (
    SelectiveBackprop,
    SelectiveBackpropHparams,
    select_using_loss,
    selection_weights,
    should_selective_backprop,
)

__all__ = [
    "SelectiveBackprop",
    "SelectiveBackpropHparams",
    "select_using_loss",
    "selection_weights",
    "should_selective_backprop",
]
