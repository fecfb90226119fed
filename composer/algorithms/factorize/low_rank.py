"""Low-rank fits of a layer to data: the original Composer's ``factorize_matrix`` and ``factorize_conv2d``.

:func:`svd_factors` approximates a weight matrix alone: the truncated SVD, the best approximation of that rank in
the Frobenius and spectral norms (Eckart and Young 1936).

A linear map ``Y = X @ W + bias`` (a ``Linear`` layer, or a convolution seen on its input patches) is replaced by
``X @ Wa @ Wb + bias'`` with ``Wa`` of shape ``(D, rank)`` and ``Wb`` of shape ``(rank, M)``, chosen to keep the
outputs on the sample ``X`` as close as possible. MosaicML Composer v0.5 reached such a pair by alternating least
squares from the SVD of the weights; here it is computed in closed form, as reduced-rank regression (Izenman 1975,
"Reduced-rank regression for the multivariate linear model", Journal of Multivariate Analysis 5(2)): with the
bias free, the best rank-``r`` map is the least-squares map projected onto the top ``r`` principal directions of its
fitted outputs. That is the least squared error any rank-``r`` pair reaches on ``X``, so a larger rank never does
worse, and the iterations of the original have nothing left to improve (``n_iters`` is accepted and checked, and
changes nothing).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

__all__ = ["LowRankSolution", "conv2d_patches", "factorize_conv2d", "factorize_matrix", "svd_factors"]


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


@dataclasses.dataclass
class LowRankSolution:
    """A factorized linear map fitted to data, as :func:`factorize_matrix` and :func:`factorize_conv2d` return it.

    Args:
        Wa: The first factor: ``(D, rank)`` for a matrix, ``(rank, in_channels, kh, kw)`` for a convolution; the
            whole map (``(D, M)`` or ``(out_channels, in_channels, kh, kw)``) when ``Wb`` is None.
        Wb: The second factor: ``(rank, M)``, or ``(out_channels, rank, 1, 1)``; None when a factorization at the
            requested rank would not be smaller than the map itself, so the map is returned whole.
        bias: Added to the output of the second factor (length ``M`` or ``out_channels``), or None.
        rank: The latent size, or -1 when ``Wb`` is None.
        nmse: The squared error of the fit on the data, divided by that of predicting each output by its mean: 0 is
            exact, 1 no better than the means.
    """

    Wa: torch.Tensor | None = None
    Wb: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    rank: int = -1
    nmse: float = 0.0


def _check_rank(rank: float, n_iters: int) -> None:
    if isinstance(rank, bool) or not isinstance(rank, (int, float)) or not rank > 0:
        raise ValueError(
            f"rank={rank!r} must be positive: a latent size such as 8, or a fraction below 1 such as 0.25."
        )
    if isinstance(n_iters, bool) or not isinstance(n_iters, int) or n_iters < 0:
        raise ValueError(f"n_iters={n_iters!r} must be an int of at least 0.")


def _check_shapes(X: torch.Tensor, Y: torch.Tensor, Wa: torch.Tensor, Wb: torch.Tensor | None) -> None:
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must be matrices with one row per sample, got X {tuple(X.shape)} and Y {tuple(Y.shape)}."
        )
    out = Wa.shape[-1] if Wb is None else Wb.shape[-1]
    if Wa.ndim != 2 or Wa.shape[0] != X.shape[1] or out != Y.shape[1]:
        described = f"Wa {tuple(Wa.shape)}" + ("" if Wb is None else f" and Wb {tuple(Wb.shape)}")
        raise ValueError(
            f"{described} do not map X {tuple(X.shape)} to Y {tuple(Y.shape)}: Wa must be (D, M), or (D, d) with Wb "
            "(d, M), for X of shape (N, D) and Y of shape (N, M)."
        )
    if Wb is not None and (Wb.ndim != 2 or Wb.shape[0] != Wa.shape[1]):
        raise ValueError(f"Wb {tuple(Wb.shape)} must be (d, M) with d = Wa.shape[1] = {Wa.shape[1]}.")


def _fit(
    X: torch.Tensor, Y: torch.Tensor, rank: int | None, fit_bias: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The least-squares map of rank ``rank`` (None: any rank) from X to Y, in float64: ``(Wa, Wb, intercept)``."""
    x_mean = X.mean(dim=0, keepdim=True) if fit_bias else torch.zeros_like(X[:1])
    y_mean = Y.mean(dim=0, keepdim=True) if fit_bias else torch.zeros_like(Y[:1])
    x, y = X - x_mean, Y - y_mean
    coef = torch.linalg.pinv(x) @ y  # (D, M): the minimum-norm least-squares map
    if rank is None:
        Wa, Wb, product = coef, None, coef
    else:
        fitted = x @ coef
        _, vectors = torch.linalg.eigh(fitted.T @ fitted)  # ascending: the last columns are the top directions
        v = vectors[:, -rank:].flip(1)  # (M, rank)
        Wa, Wb = coef @ v, v.T
        product = Wa @ Wb
    intercept = (y_mean - x_mean @ product).squeeze(0) if fit_bias else None
    return Wa, Wb, intercept


def _nmse(X: torch.Tensor, Y: torch.Tensor, solution: LowRankSolution) -> float:
    assert solution.Wa is not None
    predicted = X @ solution.Wa if solution.Wb is None else X @ solution.Wa @ solution.Wb
    if solution.bias is not None:
        predicted = predicted + solution.bias
    spread = (Y - Y.mean(dim=0, keepdim=True)).pow(2).sum().clamp_min(torch.finfo(Y.dtype).tiny)
    return float((Y - predicted).pow(2).sum() / spread)


def factorize_matrix(
    X: torch.Tensor,
    Y: torch.Tensor,
    Wa: torch.Tensor,
    Wb: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    rank: float = 0.25,
    n_iters: int = 3,
    *,
    fit_bias: bool = True,
) -> LowRankSolution:
    """Fits ``X @ Wa' @ Wb' + bias'`` of latent size ``rank`` to the outputs ``Y`` of a (maybe factorized) matrix.

    The pair minimises the squared error on the sample ``X`` among all pairs of that latent size (reduced-rank
    regression, see the module docstring), with the bias refitted. Three cases, as in the original release:

    * ``rank`` at least ``D`` or ``M``: factorizing cannot save anything, so the least-squares map is returned
      whole (``Wb`` None, ``rank`` -1);
    * ``Wb`` given (the map is already factorized, latent size ``d``) and ``rank >= d``: a factorization never
      grows, so the latent size stays ``d`` (refitted to the data);
    * otherwise the factorization at ``rank``.

    Args:
        X: Inputs, ``(N, D)``.
        Y: The outputs of the map on ``X``, ``(N, M)``: ``X @ Wa (@ Wb) + bias``, or any target to approximate.
        Wa: The map ``(D, M)``, or its first factor ``(D, d)``.
        Wb: Its second factor ``(d, M)``, if it is factorized.
        bias: The map's bias (length ``M``); only its shape is checked, since the fitted bias replaces it.
        rank: The latent size; below 1, a fraction of ``D`` (at least 1, at most the current latent size).
        n_iters: The original's count of alternating least-squares iterations; accepted for its callers and
            checked (an int of at least 0), but the closed form needs none.
        fit_bias: Fit a bias (True, the original's behaviour); False fits a map through the origin and keeps
            ``bias`` as it is (for a layer that has no bias, pass None).

    Returns:
        LowRankSolution: The factors in the dtype of ``Wa``, the bias, the latent size and the fit's error.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.randn(200, 16, generator=g)
        >>> W = torch.randn(16, 3, generator=g) @ torch.randn(3, 12, generator=g)  # a rank-3 map
        >>> solution = factorize_matrix(X, X @ W + 1.0, W, rank=3)
        >>> solution.Wa.shape, solution.Wb.shape, solution.nmse < 1e-10
        (torch.Size([16, 3]), torch.Size([3, 12]), True)
    """
    _check_rank(rank, n_iters)
    _check_shapes(X, Y, Wa, Wb)
    if bias is not None and bias.shape != (Y.shape[1],):
        raise ValueError(f"bias of shape {tuple(bias.shape)} must be a vector of length M = {Y.shape[1]}.")
    dtype = Wa.dtype
    x, y = X.detach().double(), Y.detach().double()
    if not fit_bias and bias is not None:
        y = y - bias.detach().double()
    current = Wa.shape[1]  # the latent size if factorized, else M
    k = min(max(1, int(rank * X.shape[1])), current) if rank < 1 else int(rank)
    if k >= X.shape[1] or k >= Y.shape[1]:
        factors = _fit(x, y, None, fit_bias)
    else:
        factors = _fit(x, y, min(k, current), fit_bias)
    first, second, intercept = factors
    solution = LowRankSolution(Wa=first, Wb=second, bias=intercept, rank=-1 if second is None else first.shape[1])
    solution.nmse = _nmse(x, y, solution)
    if not fit_bias:
        solution.bias = None if bias is None else bias.detach().double()
    solution.Wa = first.to(dtype)
    solution.Wb = None if second is None else second.to(dtype)
    solution.bias = None if solution.bias is None else solution.bias.to(dtype)
    return solution


def conv2d_patches(
    X: torch.Tensor,
    kernel_size: tuple[int, int],
    padding: int | tuple[int, int] | str = 0,
    dilation: int | tuple[int, int] = 1,
    padding_mode: str = "zeros",
) -> torch.Tensor:
    """Every input patch a convolution sees, at stride 1, as the rows of a matrix ``(N * positions, C * kh * kw)``.

    Stride 1 gives the most samples of the same map (a strided convolution sees a subset of these patches).

    Args:
        X: Input ``(N, C, H, W)``.
        kernel_size: ``(kh, kw)``.
        padding: As ``nn.Conv2d`` takes it (``'same'`` and ``'valid'`` included).
        dilation: As ``nn.Conv2d`` takes it.
        padding_mode: ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.

    Returns:
        torch.Tensor: The patches, one per row, in the order of a convolution weight ``(C, kh, kw)`` flattened.

    Example:
        >>> conv2d_patches(torch.randn(2, 3, 5, 5), (3, 3), padding=1).shape
        torch.Size([50, 27])
    """
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"padding={padding!r} must be an int, a pair, 'same' or 'valid'.")
        sides = []
        for k, d in ((kernel_size[1], dw), (kernel_size[0], dh)):
            total = d * (k - 1) if padding == "same" else 0
            sides += [total // 2, total - total // 2]
    else:
        ph, pw = (padding, padding) if isinstance(padding, int) else padding
        sides = [pw, pw, ph, ph]
    mode = "constant" if padding_mode == "zeros" else padding_mode
    padded = F.pad(X, sides, mode=mode) if any(sides) else X
    columns = F.unfold(padded, kernel_size=kernel_size, dilation=(dh, dw))  # (N, C * kh * kw, positions)
    return columns.transpose(1, 2).reshape(-1, columns.shape[1])


def factorize_conv2d(
    X: torch.Tensor,
    Wa: torch.Tensor,
    Wb: torch.Tensor | None = None,
    rank: float = 0.25,
    biasA: torch.Tensor | None = None,
    biasB: torch.Tensor | None = None,
    n_iters: int = 3,
    *,
    padding: int | tuple[int, int] | str = 0,
    dilation: int | tuple[int, int] = 1,
    padding_mode: str = "zeros",
    stride: int | tuple[int, int] = 1,
    groups: int = 1,
    fit_bias: bool = True,
) -> LowRankSolution:
    """Fits a ``k x k`` convolution to ``rank`` channels followed by a 1x1 convolution to a convolution's outputs.

    The convolution (``Wa``, or the pair ``Wa`` then ``Wb``, with their biases) is applied to the patches of ``X``
    (:func:`conv2d_patches`) and :func:`factorize_matrix` fits the factorized pair to those outputs; its cases and
    its ``rank`` rule apply. The factors come back as convolution weights.

    Args:
        X: Sample input ``(N, in_channels, H, W)``.
        Wa: The convolution's weight ``(out_channels, in_channels, kh, kw)``, or, factorized, the first weight
            ``(d, in_channels, kh, kw)``.
        Wb: The second (1x1) weight ``(out_channels, d, 1, 1)`` of a factorized convolution.
        rank: The latent channels; below 1, a fraction of ``in_channels * kh * kw``.
        biasA: The bias of ``Wa``'s convolution.
        biasB: The bias of ``Wb``'s convolution (only with ``Wb``).
        n_iters: Accepted for the original's callers and checked; the closed form needs none.
        padding: The convolution's padding (its patches are taken with it).
        dilation: The convolution's dilation.
        padding_mode: The convolution's padding mode.
        stride: The convolution's stride; the fit uses every patch (stride 1), which samples the same map.
        groups: Must be 1: grouped convolutions are not factorized.
        fit_bias: Fit a bias (True); False fits without one (for a layer that has none).

    Returns:
        LowRankSolution: ``Wa`` ``(rank, in_channels, kh, kw)`` and ``Wb`` ``(out_channels, rank, 1, 1)`` (or the
        whole convolution's weight in ``Wa`` and ``Wb`` None), the bias, the latent size and the fit's error.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        >>> solution = factorize_conv2d(torch.randn(4, 8, 6, 6, generator=g), conv.weight, rank=4,
        ...                             biasA=conv.bias, padding=1)
        >>> solution.Wa.shape, solution.Wb.shape, solution.bias.shape
        (torch.Size([4, 8, 3, 3]), torch.Size([16, 4, 1, 1]), torch.Size([16]))
    """
    del stride  # the patches at stride 1 sample the same map as any stride
    if groups != 1:
        raise ValueError(f"groups={groups!r}: grouped convolutions cannot be factorized; only groups=1.")
    if Wb is None and biasB is not None:
        raise ValueError("biasB was given without Wb; biasB is the bias of the second (1x1) convolution, Wb.")
    if X.ndim != 4 or Wa.ndim != 4 or X.shape[1] != Wa.shape[1]:
        raise ValueError(
            f"X {tuple(X.shape)} must be (N, in_channels, H, W) and Wa {tuple(Wa.shape)} "
            "(channels, in_channels, kh, kw) with the same in_channels."
        )
    kernel = (Wa.shape[2], Wa.shape[3])
    patches = conv2d_patches(X.detach(), kernel, padding, dilation, padding_mode).to(Wa.dtype)
    first = Wa.detach().reshape(Wa.shape[0], -1).T  # (in_channels * kh * kw, channels)
    with torch.no_grad():
        outputs = patches @ first + (0 if biasA is None else biasA.detach())
        second = None
        if Wb is not None:
            second = Wb.detach().reshape(Wb.shape[0], -1).T  # (d, out_channels)
            outputs = outputs @ second + (0 if biasB is None else biasB.detach())
    solution = factorize_matrix(patches, outputs, first, second, rank=rank, n_iters=n_iters, fit_bias=fit_bias)
    assert solution.Wa is not None
    solution.Wa = solution.Wa.T.reshape(-1, X.shape[1], *kernel)
    if solution.Wb is not None:
        solution.Wb = solution.Wb.T.reshape(solution.Wb.shape[1], -1, 1, 1)
    return solution
