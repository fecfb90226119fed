"""How wide a factorization's bottleneck is: latent sizes given as fractions or counts, and where one stops saving.

A layer with ``fan_in`` inputs and ``out`` outputs per position costs ``fan_in * out`` multiply-adds; its
factorization through ``latent`` channels or features costs ``latent * (fan_in + out)``, less exactly while
``latent`` is below the break-even rank ``fan_in * out / (fan_in + out)`` (:func:`max_useful_rank`).
"""

from __future__ import annotations

import math

__all__ = ["check_latent", "check_size", "checked_latent", "latent_size", "max_useful_rank"]


def check_size(name: str, value: int) -> None:
    """Raises unless ``value`` is an int of at least 1 (a channel or feature count), naming ``name``.

    Args:
        name: The argument's name, for the message.
        value: The count given.
    """
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
    check_size("fan_in", fan_in)
    check_size("out", out)
    return math.ceil(fan_in * out / (fan_in + out)) - 1


def check_latent(name: str, value: float) -> None:
    """Raises unless ``value`` is a latent size: a fraction in (0, 1) or a whole number of at least 1.

    Args:
        name: The argument's name, for the message.
        value: The latent size given.

    Example:
        >>> check_latent("latent_features", 1.5)
        Traceback (most recent call last):
        ...
        ValueError: latent_features=1.5 is neither a fraction in (0, 1) nor a whole number: ...
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{name}={value!r} must be positive: a fraction of min(in, out) in (0, 1), such as 0.25, or an "
            "absolute size, a whole number of at least 1, such as 64."
        )
    if value >= 1 and value != int(value):
        raise ValueError(
            f"{name}={value!r} is neither a fraction in (0, 1) nor a whole number: pass a fraction of min(in, out) "
            f"such as 0.25, or an absolute size such as {int(value)}."
        )


def latent_size(latent: float, in_size: int, out_size: int) -> int:
    """The latent size a factorization uses: a fraction of ``min(in_size, out_size)``, or an absolute size.

    Args:
        latent: Below 1, a fraction: ``max(1, int(latent * min(in_size, out_size)))``; from 1 up, the size itself
            (a whole number).
        in_size: Input channels or features of the layer.
        out_size: Output channels or features of the layer.

    Returns:
        int: The latent size.

    Example:
        >>> latent_size(0.25, 512, 256), latent_size(128, 512, 256), latent_size(0.001, 64, 64)
        (64, 128, 1)
    """
    check_latent("latent", latent)
    if latent < 1:
        return max(1, int(latent * min(in_size, out_size)))
    return int(latent)


def checked_latent(name: str, latent: float, in_size: int, out_size: int, fan_in: int) -> int:
    """The latent size of a new layer, refused (as the original release did) where the factorization is not smaller.

    Args:
        name: The argument's name, for the message (``latent_channels`` or ``latent_features``).
        latent: The latent size given: a fraction of ``min(in_size, out_size)`` below 1, else the size.
        in_size: Input channels or features.
        out_size: Output channels or features.
        fan_in: Inputs per output (``in_channels * kh * kw`` for a convolution).

    Returns:
        int: The latent size.

    Raises:
        ValueError: If the latent size is above ``max_useful_rank(fan_in, out_size)``.
    """
    check_latent(name, latent)
    size = latent_size(latent, in_size, out_size)
    limit = max_useful_rank(fan_in, out_size)
    if size > limit:
        raise ValueError(
            f"{name}={latent!r} gives a latent size of {size}, at which this factorization has at least as many "
            f"weights and multiply-adds as the dense layer; the most that saves anything is {limit} "
            f"(max_useful_rank({fan_in}, {out_size})). Pass {name}={limit} or less; to approximate an existing layer at "
            "a higher rank, use from_linear / from_conv2d."
        )
    return size
