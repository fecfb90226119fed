"""The 13 image operations that AugMix and RandAugment chain together (plus 4 variants of the AugMix repository).

Every operation has the signature ``op(pil_img, level, generator=None) -> pil_img``: it takes a PIL image in mode
``'RGB'`` or ``'L'`` and returns a new image of the same mode and size. ``level`` is the severity, a number in
``[0, 10]``, mapped to each operation's own range of magnitudes as in the AugMix reference code (Hendrycks et al.
2020):

* a magnitude ``s`` is drawn uniformly from ``[0.1, level]`` (from ``[level, level]`` when ``level < 0.1``, so
  ``level=0`` gives ``s=0``), then scaled to the operation's range: ``int(s * max / 10)`` or ``s * max / 10``;
* rotate, shear and translate flip the sign of that magnitude with probability 1/2;
* color, contrast, brightness and sharpness draw an enhancement factor (1 leaves the image unchanged) from a
  distribution symmetric around 1: with probability 1/2 uniform on ``[1, max(1, level)]``, otherwise uniform on
  ``[1 - 0.09 * level, 1]``; at ``level=10`` the factor ranges over ``[0.1, 10]``, at ``level=0`` it is 1;
* autocontrast and equalize have no magnitude and ignore ``level``.

The table of operations, the ``*_original`` variants and the order of the random draws are in the guide
``docs/guides/speedup-methods.md`` ("The image operations"). Pass a seeded :class:`torch.Generator` for reproducible
results; ``generator=None`` draws from torch's default generator, as a transform in DataLoader workers should.

The named sets of these operations are in :mod:`~composer.algorithms.utils.augmentation_sets`.

Example:
    >>> import torch
    >>> from PIL import Image
    >>> img = Image.new("RGB", (32, 32), (40, 120, 200))
    >>> out = rotate(img, 5, generator=torch.Generator().manual_seed(0))
    >>> out.mode, out.size
    ('RGB', (32, 32))
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from composer.algorithms.utils.pil_image import check_image

if TYPE_CHECKING or importlib.util.find_spec("PIL") is not None:
    # Pillow comes with the 'vision' extra; without it this module still imports (the operations need a PIL image
    # as input, so they cannot be reached without Pillow).
    from PIL import Image, ImageEnhance, ImageFilter

__all__ = [
    "AugmentationOp",
    "apply_op",
    "autocontrast",
    "brightness",
    "brightness_original",
    "check_level",
    "color",
    "color_original",
    "contrast",
    "contrast_original",
    "equalize",
    "posterize",
    "rotate",
    "sharpness",
    "sharpness_original",
    "shear_x",
    "shear_y",
    "solarize",
    "translate_x",
    "translate_y",
]

AugmentationOp = Callable[..., Any]
"""An operation ``op(pil_img, level) -> pil_img`` (those of this module also take ``generator=``)."""

# A kernel applies an operation given its two uniform draws: (img, level, u_magnitude, u_sign) -> img.
_Kernel = Callable[["Image.Image", float, float, float], "Image.Image"]

_MAX_LEVEL = 10.0


def check_level(level: Any, name: str = "level") -> None:
    """Raises a ValueError unless ``level`` is a number in ``[0, 10]``.

    Args:
        level: The severity to check.
        name: The argument's name, for the message.

    Raises:
        ValueError: If ``level`` is not an int or float in ``[0, 10]``.

    Example:
        >>> check_level(11, "severity")
        Traceback (most recent call last):
        ...
        ValueError: severity=11 must be a number in [0, 10]: 0 is the mildest setting and 10 the most severe. ...
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 <= level <= _MAX_LEVEL:
        raise ValueError(
            f"{name}={level!r} must be a number in [0, 10]: 0 is the mildest setting and 10 the most severe. "
            f"Pass, for example, {name}=3."
        )


# ---- magnitudes -----------------------------------------------------------------------------------------------------


def _sample_level(level: float, u: float) -> float:
    # Uniform on [0.1, level] (the reference's sample_level), degenerating to `level` itself below 0.1.
    low = min(0.1, level)
    return low + (level - low) * u


def _int_param(magnitude: float, max_value: float) -> int:
    return int(magnitude * max_value / _MAX_LEVEL)


def _float_param(magnitude: float, max_value: float) -> float:
    return magnitude * max_value / _MAX_LEVEL


def _sign(u_sign: float) -> int:
    return -1 if u_sign < 0.5 else 1


def _symmetric_factor(level: float, u: float, u_side: float) -> float:
    # An enhancement factor around 1 (1 = unchanged): below 1 down to 1 - 0.09 * level, or above up to max(1, level).
    if u_side < 0.5:
        return 1.0 - 0.09 * level * u
    return 1.0 + (max(1.0, level) - 1.0) * u


def _original_factor(level: float, u: float) -> float:
    # The AugMix repository's enhancement factor: in [0.118, 1.9) at level 10, never exactly 1.
    return _float_param(_sample_level(level, u), 1.8) + 0.1


# ---- lookup tables, cached: there are only 5 posterize masks and 257 solarize thresholds -------------------------------


@functools.cache
def _posterize_table(bits: int) -> np.ndarray:
    mask = 0xFF ^ ((1 << (8 - bits)) - 1)  # keeps the top `bits` bits
    return (np.arange(256) & mask).astype(np.uint8)


@functools.cache
def _solarize_table(threshold: int) -> np.ndarray:
    values = np.arange(256)
    return np.where(values >= threshold, 255 - values, values).astype(np.uint8)


_CHANNEL_OFFSETS = np.arange(3) * 256  # where each RGB channel's table starts in a flattened (3 * 256,) table


def _apply_table(img: Image.Image, table: np.ndarray) -> Image.Image:
    # table: (256,) uint8 for every channel, or (256, 3) uint8 with one column per RGB channel.
    pixels = np.asarray(img)  # (H, W) for 'L', (H, W, 3) for 'RGB'
    if table.ndim == 1:
        return Image.fromarray(table[pixels])
    # One gather over the channel tables laid end to end: twice as fast as take_along_axis on small images.
    return Image.fromarray(np.ascontiguousarray(table.T).ravel()[pixels + _CHANNEL_OFFSETS])


def _apply_columns(img: Image.Image, columns: list[np.ndarray]) -> Image.Image:
    # One (256,) lookup table per channel of `img` (one for 'L', three for 'RGB'), clipped to [0, 255].
    table = np.clip(np.stack(columns, axis=1), 0, 255).astype(np.uint8)  # (256, C)
    return _apply_table(img, table[:, 0] if img.mode == "L" else table)


# ---- kernels: (img, level, u_magnitude, u_sign) -> img ----------------------------------------------------------------


def _autocontrast(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    # Per channel: v -> floor((v - lo) * 255 / (hi - lo)), so the lowest value goes to 0 and the highest to 255. This
    # is PIL's ImageOps.autocontrast computed in integers: PIL's floating-point table can send the highest to 254.
    extrema: Any = img.getextrema()  # (lo, hi) for 'L', ((lo, hi),) * 3 for 'RGB'
    channels: list[tuple[int, int]] = [extrema] if img.mode == "L" else list(extrema)
    values = np.arange(256, dtype=np.int64)
    columns = []
    for low, high in channels:
        columns.append(values if high <= low else (values - low) * 255 // (high - low))
    return _apply_columns(img, columns)


def _equalize(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    # Per channel: map values through the cumulative histogram so that the histogram becomes as flat as the
    # discrete values allow (as PIL's ImageOps.equalize).
    counts = np.asarray(img.histogram(), dtype=np.int64).reshape(-1, 256)  # (C, 256)
    columns = []
    for histogram in counts:
        present = histogram[histogram > 0]
        step = (int(present.sum()) - int(present[-1])) // 255 if len(present) > 1 else 0
        if step == 0:
            columns.append(np.arange(256))
        else:
            before = np.concatenate(([0], np.cumsum(histogram)[:-1]))  # pixels strictly below each value
            columns.append((step // 2 + before) // step)
    return _apply_columns(img, columns)


def _posterize(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    bits = 4 - _int_param(_sample_level(level, u), 4)
    return _apply_table(img, _posterize_table(max(bits, 1)))


def _rotate(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    degrees = _int_param(_sample_level(level, u), 30) * _sign(u_sign)
    return img.rotate(degrees, resample=Image.Resampling.BILINEAR)


def _solarize(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    threshold = 256 - _int_param(_sample_level(level, u), 256)
    return _apply_table(img, _solarize_table(threshold))


def _affine(img: Image.Image, matrix: tuple[float, ...], resample: Image.Resampling) -> Image.Image:
    # PIL's affine maps each output pixel (x, y) to the input pixel (a x + b y + c, d x + e y + f).
    return img.transform(img.size, Image.Transform.AFFINE, matrix, resample=resample)


def _shear_x(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    factor = _float_param(_sample_level(level, u), 0.3) * _sign(u_sign)
    return _affine(img, (1, factor, 0, 0, 1, 0), Image.Resampling.BILINEAR)


def _shear_y(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    factor = _float_param(_sample_level(level, u), 0.3) * _sign(u_sign)
    return _affine(img, (1, 0, 0, factor, 1, 0), Image.Resampling.BILINEAR)


def _translate_x(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    pixels = _int_param(_sample_level(level, u), img.size[0] / 3) * _sign(u_sign)
    # A whole-pixel shift: nearest and bilinear sampling give the same image, and nearest is twice as fast.
    return _affine(img, (1, 0, pixels, 0, 1, 0), Image.Resampling.NEAREST)


def _translate_y(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
    pixels = _int_param(_sample_level(level, u), img.size[1] / 3) * _sign(u_sign)
    return _affine(img, (1, 0, 0, 0, 1, pixels), Image.Resampling.NEAREST)


def _enhance_color(img: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Color(img).enhance(factor)


def _enhance_contrast(img: Image.Image, factor: float) -> Image.Image:
    # As PIL's ImageEnhance.Contrast (blend with a flat image of the rounded mean luminance), without its slow
    # pure-Python statistics.
    mean = int(float(np.asarray(img.convert("L"), dtype=np.float64).mean()) + 0.5)
    gray = Image.new(img.mode, img.size, mean if img.mode == "L" else (mean, mean, mean))
    return Image.blend(gray, img, factor)


def _enhance_brightness(img: Image.Image, factor: float) -> Image.Image:
    return Image.blend(Image.new(img.mode, img.size, 0), img, factor)


def _enhance_sharpness(img: Image.Image, factor: float) -> Image.Image:
    return Image.blend(img.filter(ImageFilter.SMOOTH), img, factor)


def _symmetric(enhance: Callable[[Image.Image, float], Image.Image]) -> _Kernel:
    def kernel(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
        return enhance(img, _symmetric_factor(level, u, u_sign))

    return kernel


def _original(enhance: Callable[[Image.Image, float], Image.Image]) -> _Kernel:
    def kernel(img: Image.Image, level: float, u: float, u_sign: float) -> Image.Image:
        return enhance(img, _original_factor(level, u))

    return kernel


# ---- the public operations ---------------------------------------------------------------------------------------------


def _run(
    kernel: _Kernel, name: str, pil_img: Image.Image, level: float, generator: torch.Generator | None
) -> Image.Image:
    check_image(pil_img, name)
    check_level(level)
    u_magnitude, u_sign = torch.rand(2, generator=generator).tolist()
    return kernel(pil_img, float(level), u_magnitude, u_sign)


def autocontrast(pil_img: Image.Image, level: float = 0.0, generator: torch.Generator | None = None) -> Image.Image:
    """Stretches each channel so that its darkest value becomes 0 and its brightest 255 (``level`` is ignored).

    Value ``v`` of a channel spanning ``[lo, hi]`` becomes ``floor((v - lo) * 255 / (hi - lo))``; a flat channel is
    left as it is. This is PIL's ``ImageOps.autocontrast`` in exact integer arithmetic (PIL's floating-point
    table can map the brightest value to 254).

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; this operation has no magnitude.
        generator: Unused (kept so that every operation has the same signature).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> out = autocontrast(Image.fromarray(np.array([[50, 100], [150, 200]], dtype=np.uint8)), 5)
        >>> np.asarray(out).tolist()
        [[0, 85], [170, 255]]
    """
    return _run(_autocontrast, "autocontrast", pil_img, level, generator)


def equalize(pil_img: Image.Image, level: float = 0.0, generator: torch.Generator | None = None) -> Image.Image:
    """Equalizes each channel's histogram, spreading the values as evenly over [0, 255] as possible.

    ``level`` is ignored. Matches PIL's ``ImageOps.equalize``.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; this operation has no magnitude.
        generator: Unused (kept so that every operation has the same signature).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> rows = np.repeat(np.array([10, 11, 12, 13], dtype=np.uint8), 256).reshape(32, 32)  # 4 equal bands
        >>> np.unique(np.asarray(equalize(Image.fromarray(rows)))).tolist()
        [0, 85, 171, 255]
    """
    return _run(_equalize, "equalize", pil_img, level, generator)


def posterize(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Keeps only the top ``4 - int(s * 4 / 10)`` bits of each value (1 to 4 bits; ``s`` is the sampled magnitude).

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; level 0 keeps 4 bits, level 10 between 1 and 4.
        generator: Source of the random magnitude (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> out = posterize(Image.fromarray(np.array([[0x5F, 0xFF]], dtype=np.uint8)), 0)
        >>> np.asarray(out).tolist()  # level 0: the top 4 bits
        [[80, 240]]
    """
    return _run(_posterize, "posterize", pil_img, level, generator)


def rotate(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Rotates about the centre by ``int(s * 3)`` degrees, in a random direction (bilinear, black corners).

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 rotates by up to 29 degrees.
        generator: Source of the random magnitude and direction (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> import torch
        >>> from PIL import Image
        >>> img = Image.new("L", (8, 8), 255)
        >>> rotate(img, 10, generator=torch.Generator().manual_seed(0)).getpixel((0, 0))  # a corner turned black
        0
    """
    return _run(_rotate, "rotate", pil_img, level, generator)


def solarize(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Inverts (``v -> 255 - v``) every value at or above the threshold ``256 - int(s * 25.6)``.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity (threshold 256), 10 lowers the threshold to as little as 1.
        generator: Source of the random magnitude (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.fromarray(np.array([[0, 100, 200, 255]], dtype=np.uint8))
        >>> np.asarray(solarize(img, 0)).tolist()
        [[0, 100, 200, 255]]
    """
    return _run(_solarize, "solarize", pil_img, level, generator)


def shear_x(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Shears horizontally: output pixel ``(x, y)`` samples the input at ``(x + f * y, y)``, ``f = ±s * 0.03``.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 shears by a factor of up to 0.3.
        generator: Source of the random magnitude and direction (torch's default generator if None).

    Returns:
        Image.Image: The new image (bilinear sampling, black where the input is left behind).

    Example:
        >>> from PIL import Image
        >>> img = Image.new("RGB", (16, 16), (9, 9, 9))
        >>> shear_x(img, 0) == img
        True
    """
    return _run(_shear_x, "shear_x", pil_img, level, generator)


def shear_y(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Shears vertically: output pixel ``(x, y)`` samples the input at ``(x, y + f * x)``, ``f = ±s * 0.03``.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 shears by a factor of up to 0.3.
        generator: Source of the random magnitude and direction (torch's default generator if None).

    Returns:
        Image.Image: The new image (bilinear sampling, black where the input is left behind).

    Example:
        >>> from PIL import Image
        >>> img = Image.new("L", (16, 16), 9)
        >>> shear_y(img, 0) == img
        True
    """
    return _run(_shear_y, "shear_y", pil_img, level, generator)


def translate_x(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Shifts the content left or right by ``int(s * width / 30)`` whole pixels, filling with black.

    Output pixel ``(x, y)`` takes the input pixel ``(x + t, y)``: a positive ``t`` moves the content left.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 shifts by up to a third of the width.
        generator: Source of the random magnitude and direction (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> import torch
        >>> from PIL import Image
        >>> out = translate_x(Image.new("L", (30, 4), 255), 10, generator=torch.Generator().manual_seed(0))
        >>> black = int(np.count_nonzero(np.asarray(out)[0] == 0))  # up to a third of each row is now black
        >>> 0 < black <= 10
        True
    """
    return _run(_translate_x, "translate_x", pil_img, level, generator)


def translate_y(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Shifts the content up or down by ``int(s * height / 30)`` whole pixels, filling with black.

    Output pixel ``(x, y)`` takes the input pixel ``(x, y + t)``: a positive ``t`` moves the content up.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 shifts by up to a third of the height.
        generator: Source of the random magnitude and direction (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.new("RGB", (4, 30), (1, 2, 3))
        >>> translate_y(img, 0) == img
        True
    """
    return _run(_translate_y, "translate_y", pil_img, level, generator)


def color(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Changes the saturation by a factor drawn around 1 (0 would be grayscale; see the module docstring).

    Args:
        pil_img: An image of mode 'RGB' or 'L' (a grayscale image is returned unchanged).
        level: Severity in [0, 10]; 0 is the identity, 10 draws the factor from [0.1, 10].
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.new("RGB", (4, 4), (200, 20, 20))
        >>> color(img, 0) == img
        True
    """
    return _run(_color, "color", pil_img, level, generator)


def contrast(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Changes the contrast by a factor drawn around 1 (0 would give a flat gray of the mean luminance).

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 draws the factor from [0.1, 10].
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.fromarray(np.array([[0, 255]], dtype=np.uint8))
        >>> contrast(img, 0) == img
        True
    """
    return _run(_contrast, "contrast", pil_img, level, generator)


def brightness(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Multiplies every value by a factor drawn around 1 (clipped to 255; 0 would give black).

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 draws the factor from [0.1, 10].
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.new("L", (4, 4), 100)
        >>> brightness(img, 0) == img
        True
    """
    return _run(_brightness, "brightness", pil_img, level, generator)


def sharpness(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """Sharpens (factor above 1) or blurs (below 1) by blending with a smoothed copy; the factor is drawn around 1.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; 0 is the identity, 10 draws the factor from [0.1, 10].
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.fromarray(np.arange(16, dtype=np.uint8).reshape(4, 4) * 16)
        >>> sharpness(img, 0) == img
        True
    """
    return _run(_sharpness, "sharpness", pil_img, level, generator)


def color_original(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """:func:`color` as the AugMix repository does it: factor ``s * 0.18 + 0.1``, mostly desaturating.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; the factor lies in ``[0.1, 0.18 * level + 0.1]``.
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> color_original(Image.new("RGB", (2, 2), (200, 20, 20)), 0).getpixel((0, 0))  # factor 0.1: nearly gray
        (86, 68, 68)
    """
    return _run(_color_original, "color_original", pil_img, level, generator)


def contrast_original(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """:func:`contrast` as the AugMix repository does it: factor ``s * 0.18 + 0.1``, mostly reducing contrast.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; the factor lies in ``[0.1, 0.18 * level + 0.1]``.
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.fromarray(np.array([[0, 255]], dtype=np.uint8))
        >>> np.asarray(contrast_original(img, 0)).tolist()  # factor 0.1 around the mean 128
        [[115, 140]]
    """
    return _run(_contrast_original, "contrast_original", pil_img, level, generator)


def brightness_original(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """:func:`brightness` as the AugMix repository does it: factor ``s * 0.18 + 0.1``, mostly darkening.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; the factor lies in ``[0.1, 0.18 * level + 0.1]``.
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> brightness_original(Image.new("L", (2, 2), 200), 0).getpixel((0, 0))  # factor 0.1
        20
    """
    return _run(_brightness_original, "brightness_original", pil_img, level, generator)


def sharpness_original(pil_img: Image.Image, level: float, generator: torch.Generator | None = None) -> Image.Image:
    """:func:`sharpness` as the AugMix repository does it: factor ``s * 0.18 + 0.1``, mostly blurring.

    Args:
        pil_img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10]; the factor lies in ``[0.1, 0.18 * level + 0.1]``.
        generator: Source of the random factor (torch's default generator if None).

    Returns:
        Image.Image: The new image.

    Example:
        >>> from PIL import Image
        >>> img = Image.new("L", (4, 4), 77)
        >>> sharpness_original(img, 5) == img  # a flat image has nothing to sharpen or blur
        True
    """
    return _run(_sharpness_original, "sharpness_original", pil_img, level, generator)


_color = _symmetric(_enhance_color)
_contrast = _symmetric(_enhance_contrast)
_brightness = _symmetric(_enhance_brightness)
_sharpness = _symmetric(_enhance_sharpness)
_color_original = _original(_enhance_color)
_contrast_original = _original(_enhance_contrast)
_brightness_original = _original(_enhance_brightness)
_sharpness_original = _original(_enhance_sharpness)

# Public operation -> its kernel, so that AugMix and RandAugment can draw all of an image's uniforms in one call.
_KERNELS: dict[AugmentationOp, _Kernel] = {
    autocontrast: _autocontrast,
    equalize: _equalize,
    posterize: _posterize,
    rotate: _rotate,
    solarize: _solarize,
    shear_x: _shear_x,
    shear_y: _shear_y,
    translate_x: _translate_x,
    translate_y: _translate_y,
    color: _color,
    contrast: _contrast,
    brightness: _brightness,
    sharpness: _sharpness,
    color_original: _color_original,
    contrast_original: _contrast_original,
    brightness_original: _brightness_original,
    sharpness_original: _sharpness_original,
}


def apply_op(op: AugmentationOp, img: Image.Image, level: float, u_magnitude: float, u_sign: float) -> Image.Image:
    """Applies an operation with its two uniforms already drawn, so that a chain of operations draws them in one call.

    For the operations of this module, ``apply_op(op, img, level, *torch.rand(2, generator=g).tolist())`` returns
    the same image as ``op(img, level, generator=g)``; it does not check its arguments. Any other callable is called
    as ``op(img, level)`` and the uniforms are ignored.

    Args:
        op: An operation of this module, or any callable ``op(pil_img, level) -> pil_img``.
        img: An image of mode 'RGB' or 'L'.
        level: Severity in [0, 10].
        u_magnitude: Uniform in [0, 1) that sets the magnitude.
        u_sign: Uniform in [0, 1) that sets the sign (or the side of 1, for the enhancers).

    Returns:
        Image.Image: The new image.

    Example:
        >>> import torch
        >>> from PIL import Image
        >>> img = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8) * 4)
        >>> u = torch.rand(2, generator=torch.Generator().manual_seed(1)).tolist()
        >>> apply_op(rotate, img, 10, *u) == rotate(img, 10, generator=torch.Generator().manual_seed(1))
        True
    """
    kernel = _KERNELS.get(op)
    if kernel is None:
        result: Image.Image = op(img, level)
        return result
    return kernel(img, level, u_magnitude, u_sign)
