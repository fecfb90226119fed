"""The ALiBi attention bias: per-head slopes, the bias matrix, and a per-model cache of it.

Press et al. 2022, "Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation"
(https://arxiv.org/abs/2108.12409). Head ``h`` adds ``-slope[h] * (i - j)`` to the score of query ``i`` for key
``j <= i`` (causal attention) or ``-slope[h] * |i - j|`` (bidirectional attention), so nearby tokens weigh more,
at every length alike.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["AlibiBias", "ZeroPositionEmbedding", "alibi_bias", "alibi_slopes", "apply_bias_to_mask"]


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def _power_of_two_slopes(num_heads: int) -> list[float]:
    # The geometric sequence that starts at 2^(-8/n) and has that value as its ratio: 2^(-8/n), ..., 2^(-8).
    start = 2.0 ** (-8.0 / num_heads)
    return [start ** (index + 1) for index in range(num_heads)]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Returns the ALiBi slope of each attention head, shape ``(num_heads,)``, float32.

    For ``n`` heads, ``n`` a power of two, the slopes are the geometric sequence ``2^(-8/n), 2^(-16/n), ...,
    2^(-8)``. Otherwise they are the slopes of the largest power of two ``m < n``, followed by every other slope of
    the ``2m``-head sequence (its odd powers) until there are ``n`` (as in the paper's reference code).

    Args:
        num_heads: Attention heads per layer.

    Returns:
        torch.Tensor: One slope per head, shape ``(num_heads,)``, float32.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
        >>> alibi_slopes(12).shape
        torch.Size([12])
    """
    _check_positive_int("num_heads", num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = _power_of_two_slopes(closest)
    if closest < num_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(
    num_heads: int,
    seq_len: int,
    causal: bool = True,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Returns the ALiBi bias added to attention scores, shape ``(num_heads, seq_len, seq_len)`` (query, key).

    Causal: ``bias[h, i, j] = -slope[h] * (i - j)`` for ``j <= i``, and the most negative finite value of ``dtype``
    for ``j > i`` (the future is masked; a finite value keeps softmax free of NaN). Bidirectional:
    ``bias[h, i, j] = -slope[h] * |i - j|``. Pass it as ``attn_mask`` to
    :func:`torch.nn.functional.scaled_dot_product_attention` (no ``is_causal`` needed).

    Args:
        num_heads: Attention heads; the slopes are :func:`alibi_slopes` ``(num_heads)``.
        seq_len: Number of queries and keys.
        causal: Mask the future (decoder) or not (encoder).
        dtype: Floating-point dtype of the result (that of the attention scores).
        device: Device of the result.

    Returns:
        torch.Tensor: The biases, shape ``(num_heads, seq_len, seq_len)``, of ``dtype`` on ``device``.

    Example:
        >>> alibi_bias(1, 3)[0]  # one head, slope 1/256
        tensor([[ 0.0000e+00, -3.4028e+38, -3.4028e+38],
                [-3.9062e-03,  0.0000e+00, -3.4028e+38],
                [-7.8125e-03, -3.9062e-03,  0.0000e+00]])
        >>> alibi_bias(1, 3, causal=False)[0] * 256
        tensor([[ 0., -1., -2.],
                [-1.,  0., -1.],
                [-2., -1.,  0.]])
    """
    _check_positive_int("seq_len", seq_len)
    positions = torch.arange(seq_len, device=device)
    offset = positions[None, :] - positions[:, None]  # (S, S): j - i, integers (so no -0.0 on the diagonal)
    slopes = alibi_slopes(num_heads).to(device)[:, None, None]  # (H, 1, 1)
    bias = (slopes * (offset if causal else -offset.abs())).to(dtype)  # (H, S, S)
    if causal:
        bias = bias.masked_fill(offset > 0, torch.finfo(dtype).min)
    return bias


def apply_bias_to_mask(bias: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Combines an ALiBi bias ``(1, H, Q, K)`` with a model's attention mask into one additive float mask.

    Args:
        bias: From :class:`AlibiBias` (or :func:`alibi_bias`).
        attention_mask: None; a boolean mask broadcastable to ``(B, H, Q, K)`` where True means "attend" (what
            ``transformers`` passes under ``attn_implementation='sdpa'``); or an additive float mask (under
            ``'eager'``).

    Returns:
        ``bias`` where attention is allowed and the most negative finite value elsewhere, shape ``(1, H, Q, K)`` or
        ``(B, H, Q, K)``.

    Example:
        >>> mask = torch.tensor([True, True, False]).view(1, 1, 1, 3)  # the third key is padding
        >>> apply_bias_to_mask(torch.zeros(1, 1, 3, 3), mask)[0, 0, 0]
        tensor([ 0.0000e+00,  0.0000e+00, -3.4028e+38])
    """
    if attention_mask is None:
        return bias
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(
            f"ALiBi attention got an attention mask of type {type(attention_mask).__name__}; it supports boolean "
            "or additive float tensors, which transformers passes with attn_implementation='sdpa' or 'eager'."
        )
    lowest = torch.finfo(bias.dtype).min
    if attention_mask.dtype == torch.bool:
        return torch.where(attention_mask, bias, torch.tensor(lowest, dtype=bias.dtype, device=bias.device))
    return (bias + attention_mask.to(bias.dtype)).clamp_min(lowest)


class AlibiBias:
    """The ALiBi bias of one model, built once per length, device and dtype, and shared by all its layers.

    Calling it for ``query_length`` queries and ``key_length`` keys returns a view, shape
    ``(1, num_heads, query_length, key_length)``, of the cached ``(num_heads, L, L)`` matrix: the bias depends on
    ``i - j`` only, so a shorter length's bias is the cached matrix's top-left block (the last ``query_length``
    rows of it when cached keys come first, as in generation). The matrix is rebuilt only when a longer length than
    any before arrives. The leading batch dimension matters: given a 4-D mask, PyTorch's CPU attention keeps its
    fused kernel (a 3-D mask made it 1.7x slower in a micro-benchmark).

    Args:
        num_heads: Attention heads per layer.
        max_sequence_length: The longest key length accepted; longer raises a :class:`ValueError`.

    Example:
        >>> bias = AlibiBias(num_heads=8, max_sequence_length=64)
        >>> full = bias(16, 16, causal=True, device=torch.device("cpu"), dtype=torch.float32)
        >>> full.shape
        torch.Size([1, 8, 16, 16])
        >>> torch.equal(bias(4, 4, causal=True, device=torch.device("cpu"), dtype=torch.float32), full[:, :, :4, :4])
        True
    """

    def __init__(self, num_heads: int, max_sequence_length: int) -> None:
        self.num_heads = _check_positive_int("heads_per_layer", num_heads)
        self.max_sequence_length = _check_positive_int("max_sequence_length", max_sequence_length)
        self._cache: dict[tuple[bool, torch.device, torch.dtype], torch.Tensor] = {}

    def __call__(
        self, query_length: int, key_length: int, causal: bool, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor:
        """Returns the bias for the last ``query_length`` of ``key_length`` positions, ``(1, H, Q, K)``."""
        if key_length > self.max_sequence_length:
            raise ValueError(
                f"ALiBi attention got a sequence of length {key_length}, longer than max_sequence_length="
                f"{self.max_sequence_length}. Pass a larger max_sequence_length to Alibi (or apply_alibi), or "
                "shorten the inputs."
            )
        key = (causal, device, dtype)
        cached = self._cache.get(key)
        if cached is None or cached.shape[-1] < key_length:
            cached = alibi_bias(self.num_heads, key_length, causal, dtype=dtype, device=device)
            self._cache[key] = cached
        return cached[None, :, key_length - query_length : key_length, :key_length]

    def check_heads(self, num_heads: int) -> None:
        """Raises a :class:`ValueError` unless the attention has as many heads as the bias."""
        if num_heads != self.num_heads:
            raise ValueError(
                f"ALiBi was set up with heads_per_layer={self.num_heads}, but the attention has {num_heads} heads. "
                "Pass heads_per_layer equal to the model's number of attention heads (or None to read it)."
            )


class ZeroPositionEmbedding(nn.Module):
    """Stands in for a removed position embedding: zeros of shape ``(*positions.shape, embedding_dim)``.

    It has no parameters, so ALiBi models carry no position information but the attention bias. Its
    ``num_embeddings`` is the longest sequence the model accepts.

    Args:
        num_embeddings: The longest sequence accepted (ALiBi's ``max_sequence_length``).
        embedding_dim: Width of the embedding it replaces.
        dtype: Dtype of the zeros (that of the replaced embedding).

    Example:
        >>> embedding = ZeroPositionEmbedding(1024, 16)
        >>> embedding(torch.arange(5)).shape, len(list(embedding.parameters()))
        (torch.Size([5, 16]), 0)
    """

    zero: torch.Tensor

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        # A scalar buffer, so the zeros follow the model's .to(device, dtype); not saved in checkpoints.
        self.register_buffer("zero", torch.zeros((), dtype=dtype), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """Returns zeros of shape ``(*positions.shape, embedding_dim)`` (an expanded view, no allocation)."""
        return self.zero.expand(*positions.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
