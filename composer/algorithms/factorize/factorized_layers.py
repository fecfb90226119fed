"""Low-rank layers: a ``Linear`` or ``Conv2d`` written as two thinner layers through a ``latent`` bottleneck.

A layer whose weight, seen as a matrix ``W`` of shape ``(out, fan_in)``, is replaced by ``W ~ B @ A`` with ``A`` of
shape ``(latent, fan_in)`` and ``B`` of shape ``(out, latent)`` costs ``latent * (fan_in + out)`` multiply-adds per
output position instead of ``fan_in * out``. :func:`~composer.algorithms.factorize.low_rank.svd_factors` gives the
best such pair in the Frobenius and spectral norms (Eckart-Young): ``B @ A`` is the truncated singular value
decomposition of ``W``, so a factorized layer built from an existing one starts as close to it as its rank allows,
and reproduces it exactly at full rank. ``set_rank`` lowers the rank later, refitting to sample inputs
(:mod:`~composer.algorithms.factorize.low_rank`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from composer.algorithms.factorize.latent_sizes import check_size, checked_latent
from composer.algorithms.factorize.low_rank import LowRankSolution, factorize_conv2d, factorize_matrix, svd_factors

__all__ = ["FactorizedConv2d", "FactorizedLinear"]


def _check_new_rank(rank: int, current: int) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank={rank!r} must be an int of at least 1.")
    if rank > current:
        raise ValueError(
            f"rank={rank} exceeds the current latent size {current}; set_rank only lowers it. To go higher, factorize "
            "the original layer again (from_linear / from_conv2d)."
        )


class _Factorized(nn.Module):
    """What both factorized layers share: ``module1(module0(x))``, installing factors, and lowering the rank."""

    module0: nn.Linear | nn.Conv2d
    module1: nn.Linear | nn.Conv2d

    def _build(self, latent: int, bias: bool, like: torch.Tensor | None = None) -> None:
        raise NotImplementedError

    def _latent(self) -> int:
        raise NotImplementedError

    def _weights(self, solution: LowRankSolution) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def solution_for_rank(self, input: torch.Tensor, rank: int) -> LowRankSolution:
        raise NotImplementedError

    def _install(self, first: torch.Tensor, second: torch.Tensor, bias: torch.Tensor | None, has_bias: bool) -> None:
        """Rebuilds both modules at latent size ``first.shape[0]`` holding ``first`` and ``second`` (module weights)."""
        self._build(first.shape[0], has_bias, like=first)
        with torch.no_grad():
            self.module0.weight.copy_(first)
            self.module1.weight.copy_(second)
            if has_bias and bias is not None and self.module1.bias is not None:
                self.module1.bias.copy_(bias)

    def apply_solution(self, solution: LowRankSolution) -> None:
        """Replaces ``module0`` and ``module1`` by modules of the solution's latent size holding its factors.

        The new parameters are new objects: an optimizer built before must be given them (see
        :func:`~composer.utils.update_optimizer_params`).

        Args:
            solution: A factorized solution (``Wb`` not None) for this layer's sizes, from :meth:`solution_for_rank`.
        """
        if solution.Wa is None or solution.Wb is None:
            raise ValueError(
                "The solution is not factorized (Wb is None): at that rank the dense layer is as small, so keep (or "
                "rebuild) a plain layer instead."
            )
        first, second = self._weights(solution)
        dtype, device = self.module0.weight.dtype, self.module0.weight.device
        self._install(first.to(device, dtype), second.to(device, dtype), solution.bias, self.module1.bias is not None)

    def set_rank(self, input: torch.Tensor, rank: int) -> None:
        """Lowers the latent size to ``rank``, refitting the factors to keep the outputs on ``input`` (original API).

        Args:
            input: Sample inputs the layer takes.
            rank: The new latent size, at most the current one (equal: nothing changes).

        Raises:
            ValueError: If ``rank`` is above the current latent size, or below 1.
        """
        _check_new_rank(rank, self._latent())
        if rank < self._latent():
            self.apply_solution(self.solution_for_rank(input, rank))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """The layer's input through ``module0`` (to the latent size) and then ``module1``."""
        out: torch.Tensor = self.module1(self.module0(input))
        return out


class FactorizedLinear(_Factorized):
    """A ``Linear`` layer factorized through ``latent_features``: ``module1(module0(x))``.

    ``module0`` maps ``in_features -> latent_features`` without bias; ``module1`` maps
    ``latent_features -> out_features`` with the bias, if any (also reachable as ``linear0`` and ``linear1``).
    Parameters: ``latent * (in + out) (+ out for the bias)``, against ``in * out (+ out)`` for the dense layer.
    The constructor takes the original Composer's arguments, and refuses a latent size at which the factorization is
    not smaller than the dense layer (above :func:`max_useful_rank`). :meth:`from_linear` builds one from an existing
    layer, initialised by truncated SVD (see :func:`svd_factors`), at any rank up to full; :meth:`set_rank` lowers
    the rank, refitting to sample inputs.

    Args:
        in_features: Size of each input sample.
        out_features: Size of each output sample.
        bias: Whether the layer adds a learned bias (held by ``module1``).
        latent_features: Width of the bottleneck: a fraction of ``min(in_features, out_features)`` if below 1, else
            the size itself.

    Example:
        >>> dense = torch.nn.Linear(16, 8)
        >>> layer = FactorizedLinear.from_linear(dense, latent_features=8)  # full rank: the same map
        >>> x = torch.randn(4, 16)
        >>> torch.allclose(layer(x), dense(x), atol=1e-5), layer.module0.weight.shape, layer.module1.weight.shape
        (True, torch.Size([8, 16]), torch.Size([8, 8]))
        >>> FactorizedLinear(36, 40, latent_features=0.25).latent_features  # 0.25 * min(36, 40)
        9
    """

    module0: nn.Linear
    module1: nn.Linear

    def __init__(self, in_features: int, out_features: int, bias: bool = True, latent_features: float = 0.25) -> None:
        super().__init__()
        check_size("in_features", in_features)
        check_size("out_features", out_features)
        self.in_features = in_features
        self.out_features = out_features
        self._build(checked_latent("latent_features", latent_features, in_features, out_features, in_features), bias)

    def _build(self, latent: int, bias: bool, like: torch.Tensor | None = None) -> None:
        kwargs: dict[str, Any] = {} if like is None else {"device": like.device, "dtype": like.dtype}
        self.latent_features = latent
        self.module0 = nn.Linear(self.in_features, latent, bias=False, **kwargs)
        self.module1 = nn.Linear(latent, self.out_features, bias=bias, **kwargs)

    @property
    def linear0(self) -> nn.Linear:
        """``module0``, by this library's earlier name."""
        return self.module0

    @property
    def linear1(self) -> nn.Linear:
        """``module1``, by this library's earlier name."""
        return self.module1

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
        return cls._from_matrix(linear.weight, linear.bias, latent_features)

    @classmethod
    def from_conv1d(cls, conv1d: nn.Module, latent_features: int) -> FactorizedLinear:
        """Factorizes a Hugging Face ``transformers`` ``Conv1D`` at rank ``latent_features``, as :meth:`from_linear`.

        ``Conv1D`` is GPT-2's linear layer: it computes ``x @ weight + bias`` with ``weight`` of shape ``(in, out)``,
        the transpose of a ``Linear``'s.

        Args:
            conv1d: The layer to factorize (its ``weight`` a matrix ``(in, out)``, its ``bias`` of size ``out``).
            latent_features: The rank.

        Returns:
            FactorizedLinear: The factorized layer.
        """
        weight, bias = conv1d.weight, conv1d.bias
        if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
            raise TypeError(f"from_conv1d needs a layer whose weight is a matrix (in, out); got {conv1d!r}.")
        return cls._from_matrix(weight.T, bias if isinstance(bias, torch.Tensor) else None, latent_features)

    @classmethod
    def _from_matrix(cls, weight: torch.Tensor, bias: torch.Tensor | None, latent_features: int) -> FactorizedLinear:
        first, second = svd_factors(weight, latent_features)
        layer = cls.__new__(cls)  # the constructor's size rule is for new layers; any rank approximates this one
        nn.Module.__init__(layer)
        layer.out_features, layer.in_features = weight.shape
        layer._install(first, second, bias, bias is not None)
        return layer

    def _latent(self) -> int:
        return self.latent_features

    def _weights(self, solution: LowRankSolution) -> tuple[torch.Tensor, torch.Tensor]:
        assert solution.Wa is not None and solution.Wb is not None
        return solution.Wa.T, solution.Wb.T  # (rank, in) and (out, rank), as Linear weights

    def solution_for_rank(self, input: torch.Tensor, rank: int) -> LowRankSolution:
        """The best factorization at latent size ``rank`` of what this layer computes on ``input`` (not applied).

        Args:
            input: Sample inputs ``(..., in_features)``.
            rank: The latent size.

        Returns:
            LowRankSolution: See :func:`factorize_matrix`; :meth:`apply_solution` installs it.
        """
        x = input.detach().reshape(-1, self.in_features).to(self.module0.weight.dtype)
        with torch.no_grad():
            target = self(x)
        has_bias = self.module1.bias is not None
        return factorize_matrix(
            x,
            target,
            self.module0.weight.T,
            self.module1.weight.T,
            bias=self.module1.bias,
            rank=rank,
            fit_bias=has_bias,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, latent_features={self.latent_features}"
        )


class FactorizedConv2d(_Factorized):
    """A ``Conv2d`` factorized through ``latent_channels``: a ``k x k`` convolution to ``latent_channels``, then 1x1.

    ``module0`` is a convolution ``in_channels -> latent_channels`` with the original kernel size, stride, padding,
    dilation and padding mode, and no bias; ``module1`` a 1x1 convolution ``latent_channels -> out_channels`` with
    the bias, if any (also reachable as ``conv0`` and ``conv1``). Seen as matrices over the ``in_channels * kh * kw``
    values of each input patch, this is the product of two matrices of rank ``latent_channels`` (the scheme of the
    original Composer release). Parameters: ``latent * (in * kh * kw + out) (+ out)``, against
    ``in * kh * kw * out (+ out)``. The constructor takes the original Composer's arguments, and refuses a latent
    size at which the factorization is not smaller than the convolution; :meth:`from_conv2d` builds one from an
    existing convolution, initialised by truncated SVD (see :func:`svd_factors`), at any rank up to full;
    :meth:`set_rank` lowers the rank, refitting to sample inputs. Grouped convolutions are not supported.

    Args:
        in_channels: Channels of the input.
        out_channels: Channels of the output.
        kernel_size: Size of the ``k x k`` (or ``kh x kw``) kernel of ``module0``.
        latent_channels: Channels between the two convolutions: a fraction of ``min(in_channels, out_channels)`` if
            below 1, else the number itself.
        stride: Stride of ``module0``.
        padding: Padding of ``module0`` (as ``nn.Conv2d`` takes it, ``'same'`` included).
        dilation: Dilation of ``module0``.
        bias: Whether the layer adds a learned bias (held by ``module1``).
        padding_mode: Padding mode of ``module0``.

    Example:
        >>> conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        >>> layer = FactorizedConv2d.from_conv2d(conv, latent_channels=4)
        >>> layer(torch.randn(2, 8, 10, 10)).shape, layer.module0.weight.shape, layer.module1.weight.shape
        (torch.Size([2, 16, 10, 10]), torch.Size([4, 8, 3, 3]), torch.Size([16, 4, 1, 1]))
    """

    module0: nn.Conv2d
    module1: nn.Conv2d

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        latent_channels: float = 0.25,
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
    ) -> None:
        super().__init__()
        check_size("in_channels", in_channels)
        check_size("out_channels", out_channels)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size: tuple[int, int] = (
            (kernel_size, kernel_size) if isinstance(kernel_size, int) else (kernel_size[0], kernel_size[1])
        )
        self._geometry: dict[str, Any] = {
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
            "padding_mode": padding_mode,
        }
        fan_in = in_channels * self.kernel_size[0] * self.kernel_size[1]
        self._build(checked_latent("latent_channels", latent_channels, in_channels, out_channels, fan_in), bias)

    def _build(self, latent: int, bias: bool, like: torch.Tensor | None = None) -> None:
        kwargs: dict[str, Any] = {} if like is None else {"device": like.device, "dtype": like.dtype}
        self.latent_channels = latent
        # nn.Conv2d checks the geometry (stride, padding, dilation, padding mode).
        self.module0 = nn.Conv2d(self.in_channels, latent, self.kernel_size, bias=False, **self._geometry, **kwargs)
        self.module1 = nn.Conv2d(latent, self.out_channels, kernel_size=1, bias=bias, **kwargs)

    @property
    def conv0(self) -> nn.Conv2d:
        """``module0``, by this library's earlier name."""
        return self.module0

    @property
    def conv1(self) -> nn.Conv2d:
        """``module1``, by this library's earlier name."""
        return self.module1

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
        layer = cls.__new__(cls)  # the constructor's size rule is for new layers; any rank approximates this one
        nn.Module.__init__(layer)
        layer.in_channels, layer.out_channels, layer.kernel_size = in_channels, out_channels, (kh, kw)
        layer._geometry = {
            "stride": conv.stride,
            "padding": conv.padding,
            "dilation": conv.dilation,
            "padding_mode": conv.padding_mode,
        }
        first = first.reshape(latent_channels, in_channels, kh, kw)
        layer._install(first, second.reshape(out_channels, latent_channels, 1, 1), conv.bias, conv.bias is not None)
        return layer

    def _latent(self) -> int:
        return self.latent_channels

    def _weights(self, solution: LowRankSolution) -> tuple[torch.Tensor, torch.Tensor]:
        assert solution.Wa is not None and solution.Wb is not None
        return solution.Wa, solution.Wb  # already convolution weights

    def solution_for_rank(self, input: torch.Tensor, rank: int) -> LowRankSolution:
        """The best factorization at ``rank`` latent channels of what this layer computes on ``input`` (not applied).

        Args:
            input: Sample inputs ``(N, in_channels, H, W)``.
            rank: The latent channels.

        Returns:
            LowRankSolution: See :func:`factorize_conv2d`; :meth:`apply_solution` installs it.
        """
        conv = self.module0
        return factorize_conv2d(
            input.to(conv.weight.dtype),
            conv.weight,
            self.module1.weight,
            rank=rank,
            biasB=self.module1.bias,
            padding=conv.padding,  # type: ignore[arg-type]  # a pair or a string for Conv2d
            dilation=conv.dilation,  # type: ignore[arg-type]
            padding_mode=conv.padding_mode,
            fit_bias=self.module1.bias is not None,
        )

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, latent_channels={self.latent_channels}"
        )
