"""The gated feed-forward layers: ``GLU(x) = act(x W + b) * (x V + c)`` and the block ``GLU(x) W2 + d``.

Shazeer 2020, "GLU Variants Improve Transformer", https://arxiv.org/abs/2002.05202: the activation names the
variant (GELU: GEGLU, ReLU: ReGLU, SiLU/Swish: SwiGLU).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GLU_ACTIVATIONS", "GLUFeedForward", "GatedLinearUnit"]

GLU_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,  # GEGLU
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GEGLU with GPT-2's tanh approximation
    "relu": F.relu,  # ReGLU
    "silu": F.silu,  # SwiGLU
}
"""Activation name -> function, for :class:`GatedLinearUnit` (the names a recipe may use)."""


def check_activation(activation: str) -> None:
    """Raises a ValueError naming the choices when ``activation`` is not in :data:`GLU_ACTIVATIONS`."""
    if activation not in GLU_ACTIVATIONS:
        raise ValueError(
            f"activation={activation!r} is not a GLU activation; choose one of {sorted(GLU_ACTIVATIONS)} ('gelu' "
            "gives GEGLU, 'relu' ReGLU, 'silu' SwiGLU)."
        )


class GatedLinearUnit(nn.Module):
    """The gated layer of a GLU feed-forward block: ``act(x W + b) * (x V + c)``, ``d_model -> d_hidden``.

    Args:
        d_model: Input features.
        d_hidden: Output features (the hidden size of the feed-forward block).
        activation: A name in :data:`GLU_ACTIVATIONS`.
        bias: Give ``W`` and ``V`` biases.

    Example:
        >>> glu = GatedLinearUnit(4, 6, activation="silu")
        >>> x = torch.randn(2, 4)
        >>> torch.allclose(glu(x), F.silu(glu.w(x)) * glu.v(x))
        True
    """

    def __init__(self, d_model: int, d_hidden: int, activation: str = "gelu", bias: bool = True) -> None:
        super().__init__()
        check_activation(activation)
        self.activation = activation
        self.w = nn.Linear(d_model, d_hidden, bias=bias)  # the gate, through the activation
        self.v = nn.Linear(d_model, d_hidden, bias=bias)  # the value it gates, linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``act(x W + b) * (x V + c)`` for ``x`` of shape ``(..., d_model)``: shape ``(..., d_hidden)``."""
        gate: torch.Tensor = GLU_ACTIVATIONS[self.activation](self.w(x))
        out: torch.Tensor = gate * self.v(x)
        return out

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class GLUFeedForward(nn.Module):
    """A transformer feed-forward block with a gated hidden layer: ``dropout(GLU(x) W2 + d)``.

    Args:
        d_model: Width of the residual stream (input and output features).
        d_hidden: Hidden size.
        activation: A name in :data:`GLU_ACTIVATIONS`.
        bias: Give the three linear layers biases.
        dropout: Dropout probability on the output.

    Example:
        >>> ffn = GLUFeedForward(8, 16)
        >>> ffn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self, d_model: int, d_hidden: int, activation: str = "gelu", bias: bool = True, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.glu = GatedLinearUnit(d_model, d_hidden, activation=activation, bias=bias)
        self.w2 = nn.Linear(d_hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output, shape ``(..., d_model)``."""
        out: torch.Tensor = self.dropout(self.w2(self.glu(x)))
        return out
