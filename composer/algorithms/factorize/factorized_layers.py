"""Low-rank layers: a ``Linear`` or ``Conv2d`` written as two thinner layers through a ``latent`` bottleneck.

A layer whose weight, seen as a matrix ``W`` of shape ``(out, fan_in)``, is replaced by ``W ~ B @ A`` with ``A`` of
shape ``(latent, fan_in)`` and ``B`` of shape ``(out, latent)`` costs ``latent * (fan_in + out)`` multiply-adds per
output position instead of ``fan_in * out``. :func:`svd_factors` gives the best such pair in the Frobenius and
spectral norms (Eckart-Young): ``B @ A`` is the truncated singular value decomposition of ``W``, so a factorized
layer built from an existing one starts as close to it as its rank allows, and reproduces it exactly at full rank.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["FactorizedConv2d", "FactorizedLinear", "max_useful_rank", "svd_factors"]


def _check_size(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be an int of at least 1.")


def max_useful_rank(fan_in: int, out: int) -> int:
    """The largest rank at which a factorization has fewer weights (and multiply-adds) than the dense layer.

    A factorization of rank ``r`` has ``r * (fan_in + out)`` weights against ``fan_in * out``, so it is smaller
    exactly when ``r < fan_in * out / (fan_in + out)`` (the break-even rank).

    Args:
        fan_in: Inputs per output (``in_features``, or ``in_channels * kh * kw`` for a convolution).
        out: Outputs (``out_features`` or ``out_channels``).

    Returns:
        int: ``ceil(fan_in * out / (fan_in + out)) - 1``, the largest integer strictly below the break-even rank.

    Example:
        >>> max_useful_rank(512, 512), max_useful_rank(64 * 9, 64)
        (255, 57)
    """
    _check_size("fan_in", fan_in)
    _check_size("out", out)
    return math.ceil(fan_in * out / (fan_in + out)) - 1


def svd_factors(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The best rank-``rank`` factorization ``weight ~ second @ first`` of a matrix, by truncated SVD.

    With ``weight = U diag(s) V^T``, returns ``first = diag(sqrt(s_r)) V_r^T`` and ``second = U_r diag(sqrt(s_r))``
    (the singular values split evenly, so both factors have the same scale). The error
    ``||weight - second @ first||_F`` is ``sqrt(sum of s_i^2 for i > rank)``, the least any rank-``rank`` matrix
    achieves (Eckart-Young). The SVD runs in float64 on the weight's device; the factors have the weight's dtype.

    Args:
        weight: A matrix ``(out, fan_in)``.
        rank: The rank, from 1 to ``min(out, fan_in)``.

    Returns:
        tuple[Tensor, Tensor]: ``(first, second)`` of shapes ``(rank, fan_in)`` and ``(out, rank)``.

    Example:
        >>> w = torch.tensor([[3.0, 0.0], [0.0, 1.0]])
        >>> first, second = svd_factors(w, rank=1)
        >>> second @ first
        tensor([[3., 0.],
                [0., 0.]])
    """
    if weight.ndim != 2:
        raise ValueError(f"svd_factors needs a matrix (out, fan_in), got a tensor of shape {tuple(weight.shape)}.")
    full = min(weight.shape)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= full:
        raise ValueError(f"rank={rank!r} must be an int from 1 to min(out, fan_in) = {full} for this weight.")
    u, s, vh = torch.linalg.svd(weight.detach().to(torch.float64), full_matrices=False)
    root = s[:rank].sqrt()
    first = root[:, None] * vh[:rank]  # (rank, fan_in)
    second = u[:, :rank] * root[None, :]  # (out, rank)
    return first.to(weight.dtype), second.to(weight.dtype)


class FactorizedLinear(nn.Module):
    """A ``Linear`` layer factorized through ``latent_features``: ``linear1(linear0(x))``.

    ``linear0`` maps ``in_features -> latent_features`` without bias; ``linear1`` maps
    ``latent_features -> out_features`` with the bias, if any. Parameters:
    ``latent * (in + out) (+ out for the bias)``, against ``in * out (+ out)`` for the dense layer.
    :meth:`from_linear` builds one from an existing layer, initialised by truncated SVD (see :func:`svd_factors`).

    Args:
        in_features: Size of each input sample.
        out_features: Size of each output sample.
        latent_features: Width of the bottleneck, the rank of the factorization.
        bias: Whether the layer adds a learned bias (held by ``linear1``).

    Example:
        >>> dense = torch.nn.Linear(16, 8)
        >>> layer = FactorizedLinear.from_linear(dense, latent_features=8)  # full rank: the same map
        >>> x = torch.randn(4, 16)
        >>> torch.allclose(layer(x), dense(x), atol=1e-5), layer.linear0.weight.shape, layer.linear1.weight.shape
        (True, torch.Size([8, 16]), torch.Size([8, 8]))
    """

    def __init__(self, in_features: int, out_features: int, latent_features: int, bias: bool = True) -> None:
        super().__init__()
        for name, value in (
            ("in_features", in_features),
            ("out_features", out_features),
            ("latent_features", latent_features),
        ):
            _check_size(name, value)
        self.in_features = in_features
        self.out_features = out_features
        self.latent_features = latent_features
        self.linear0 = nn.Linear(in_features, latent_features, bias=False)
        self.linear1 = nn.Linear(latent_features, out_features, bias=bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, latent_features: int) -> FactorizedLinear:
        """Factorizes ``linear`` at rank ``latent_features`` (at most ``min(in, out)``), by truncated SVD.

        The new layer has the old one's device and dtype, and a copy of its bias; the old layer is left as is.

        Args:
            linear: The layer to factorize.
            latent_features: The rank.

        Returns:
            FactorizedLinear: The factorized layer.
        """
        first, second = svd_factors(linear.weight, latent_features)
        layer = cls(linear.in_features, linear.out_features, latent_features, bias=linear.bias is not None)
        layer.to(device=linear.weight.device, dtype=linear.weight.dtype)
        with torch.no_grad():
            layer.linear0.weight.copy_(first)
            layer.linear1.weight.copy_(second)
            if linear.bias is not None and layer.linear1.bias is not None:
                layer.linear1.bias.copy_(linear.bias)
        return layer

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``(..., in_features) -> (..., out_features)`` through the ``latent_features`` bottleneck."""
        out: torch.Tensor = self.linear1(self.linear0(input))
        return out

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, latent_features={self.latent_features}"
        )


class FactorizedConv2d(nn.Module):
    """A ``Conv2d`` factorized through ``latent_channels``: a ``k x k`` convolution to ``latent_channels``, then 1x1.

    ``conv0`` is a convolution ``in_channels -> latent_channels`` with the original kernel size, stride, padding,
    dilation and padding mode, and no bias; ``conv1`` a 1x1 convolution ``latent_channels -> out_channels`` with the
    bias, if any. Seen as matrices over the ``in_channels * kh * kw`` values of each input patch, this is the
    product of two matrices of rank ``latent_channels`` (the scheme of the original Composer release). Parameters:
    ``latent * (in * kh * kw + out) (+ out)``, against ``in * kh * kw * out (+ out)``. :meth:`from_conv2d` builds one
    from an existing convolution, initialised by truncated SVD (see :func:`svd_factors`). Grouped convolutions are
    not supported.

    Args:
        in_channels: Channels of the input.
        out_channels: Channels of the output.
        kernel_size: Size of the ``k x k`` (or ``kh x kw``) kernel of ``conv0``.
        latent_channels: Channels between the two convolutions, the rank of the factorization.
        stride: Stride of ``conv0``.
        padding: Padding of ``conv0`` (as ``nn.Conv2d`` takes it, ``'same'`` included).
        dilation: Dilation of ``conv0``.
        bias: Whether the layer adds a learned bias (held by ``conv1``).
        padding_mode: Padding mode of ``conv0``.

    Example:
        >>> conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        >>> layer = FactorizedConv2d.from_conv2d(conv, latent_channels=4)
        >>> layer(torch.randn(2, 8, 10, 10)).shape, layer.conv0.weight.shape, layer.conv1.weight.shape
        (torch.Size([2, 16, 10, 10]), torch.Size([4, 8, 3, 3]), torch.Size([16, 4, 1, 1]))
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        latent_channels: int,
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
    ) -> None:
        super().__init__()
        for name, value in (
            ("in_channels", in_channels),
            ("out_channels", out_channels),
            ("latent_channels", latent_channels),
        ):
            _check_size(name, value)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.latent_channels = latent_channels
        self.conv0 = nn.Conv2d(
            in_channels,
            latent_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=False,
            padding_mode=padding_mode,  # type: ignore[arg-type]  # nn.Conv2d checks the value
        )
        self.conv1 = nn.Conv2d(latent_channels, out_channels, kernel_size=1, bias=bias)

    @classmethod
    def from_conv2d(cls, conv: nn.Conv2d, latent_channels: int) -> FactorizedConv2d:
        """Factorizes ``conv`` at rank ``latent_channels`` (at most ``min(out, in * kh * kw)``), by truncated SVD.

        The new layer has the old one's geometry (kernel, stride, padding, dilation, padding mode), device and
        dtype, and a copy of its bias; the old layer is left as is.

        Args:
            conv: The convolution to factorize (``groups == 1``).
            latent_channels: The rank.

        Returns:
            FactorizedConv2d: The factorized layer.
        """
        if conv.groups != 1:
            raise ValueError(
                f"FactorizedConv2d cannot factorize a grouped convolution (groups={conv.groups}); only groups=1."
            )
        out_channels, in_channels, kh, kw = conv.weight.shape
        first, second = svd_factors(conv.weight.reshape(out_channels, in_channels * kh * kw), latent_channels)
        layer = cls(
            in_channels,
            out_channels,
            (kh, kw),
            latent_channels,
            stride=conv.stride,  # type: ignore[arg-type]  # a 2-tuple for Conv2d
            padding=conv.padding,  # type: ignore[arg-type]
            dilation=conv.dilation,  # type: ignore[arg-type]
            bias=conv.bias is not None,
            padding_mode=conv.padding_mode,
        )
        layer.to(device=conv.weight.device, dtype=conv.weight.dtype)
        with torch.no_grad():
            layer.conv0.weight.copy_(first.reshape(latent_channels, in_channels, kh, kw))
            layer.conv1.weight.copy_(second.reshape(out_channels, latent_channels, 1, 1))
            if conv.bias is not None and layer.conv1.bias is not None:
                layer.conv1.bias.copy_(conv.bias)
        return layer

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``(N, in_channels, H, W) -> (N, out_channels, H', W')``, ``H', W'`` as the original convolution's."""
        out: torch.Tensor = self.conv1(self.conv0(input))
        return out

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, latent_channels={self.latent_channels}"
        )
