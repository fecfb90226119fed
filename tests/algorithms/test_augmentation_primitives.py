"""The 13 augmentation operations (and the 4 '_original' enhancers): semantics, severity mapping, sets, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from composer.algorithms.utils import augmentation_primitives as ap
from composer.algorithms.utils.augmentation_primitives import (
    apply_op,
    autocontrast,
    brightness,
    brightness_original,
    color,
    contrast,
    contrast_original,
    equalize,
    posterize,
    rotate,
    sharpness,
    shear_x,
    shear_y,
    solarize,
    translate_x,
    translate_y,
)
from composer.algorithms.utils.augmentation_sets import augmentation_sets, get_augmentation_set

SEED_NAMES = [
    "autocontrast",
    "equalize",
    "posterize",
    "rotate",
    "solarize",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
    "color",
    "contrast",
    "brightness",
    "sharpness",
]
ALL_OPS = list(augmentation_sets["all"]) + list(augmentation_sets["original"][9:])
# Operations whose magnitude is 0 at level 0 (the others have no magnitude, or keep 4 bits, or are the _original ones).
IDENTITY_AT_ZERO = [
    rotate,
    solarize,
    shear_x,
    shear_y,
    translate_x,
    translate_y,
    color,
    contrast,
    brightness,
    sharpness,
]


def _random_image(mode: str = "RGB", size: tuple[int, int] = (23, 17), seed: int = 0, low: int = 0, high: int = 256):
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    return Image.fromarray(rng.integers(low, high, shape, dtype=np.uint8))


def _draws(seed: int) -> tuple[float, float]:
    """The two uniforms an operation draws from a generator seeded with ``seed`` (documented order)."""
    u_magnitude, u_sign = torch.rand(2, generator=torch.Generator().manual_seed(seed)).tolist()
    return u_magnitude, u_sign


def _magnitude(level: float, u: float) -> float:
    """Uniform on [0.1, level], written out independently of the library."""
    return 0.1 + (level - 0.1) * u


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_seed_operations_are_public_and_in_order():
    assert [op.__name__ for op in augmentation_sets["all"]] == SEED_NAMES
    for name in SEED_NAMES:
        assert getattr(ap, name).__name__ == name and name in ap.__all__


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: op.__name__)
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_mode_size_and_type_are_preserved(op, mode):
    img = _random_image(mode)
    for level in (0, 3, 10, 7.5):
        out = op(img, level, generator=_gen(1))
        assert isinstance(out, Image.Image) and out.mode == mode and out.size == img.size
    assert np.array_equal(np.asarray(img), np.asarray(_random_image(mode)))  # the input is left untouched


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: op.__name__)
def test_seeded_generator_is_deterministic_and_leaves_the_global_rng_alone(op):
    img = _random_image()
    before = torch.get_rng_state()
    first = op(img, 10, generator=_gen(3))
    assert torch.equal(torch.get_rng_state(), before)
    assert op(img, 10, generator=_gen(3)) == first


@pytest.mark.parametrize("op", IDENTITY_AT_ZERO, ids=lambda op: op.__name__)
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_level_zero_is_the_identity(op, mode):
    img = _random_image(mode)
    for seed in range(4):
        assert op(img, 0, generator=_gen(seed)) == img


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: op.__name__)
def test_apply_op_with_the_same_draws_equals_the_op(op):
    img = _random_image()
    assert apply_op(op, img, 8, *_draws(5)) == op(img, 8, generator=_gen(5))


def test_apply_op_calls_other_callables_with_image_and_level():
    calls = []

    def record(img, level):
        calls.append(level)
        return img

    img = _random_image()
    assert apply_op(record, img, 4.0, 0.3, 0.9) is img
    assert calls == [4.0]


# ---- known results ----------------------------------------------------------------------------------------------


def test_autocontrast_stretches_each_channel_to_full_range():
    rng = np.random.default_rng(0)
    pixels = np.stack([rng.integers(50, 101, (8, 8)), rng.integers(0, 256, (8, 8)), np.full((8, 8), 7)], axis=-1)
    pixels[0, 0] = (50, 0, 7)
    pixels[0, 1] = (100, 255, 7)
    out = np.asarray(autocontrast(Image.fromarray(pixels.astype(np.uint8)), 5)).astype(int)
    expected_red = (pixels[..., 0] - 50) * 255 // 50  # (v - lo) * 255 / (hi - lo), rounded down
    assert np.array_equal(out[..., 0], expected_red)
    assert (out[..., 0].min(), out[..., 0].max()) == (0, 255)
    assert np.array_equal(out[..., 1], pixels[..., 1])  # already spans [0, 255]
    assert np.array_equal(out[..., 2], pixels[..., 2])  # a flat channel is left alone


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_autocontrast_and_equalize_match_pillow(seed, mode):
    # A narrow range for most seeds, the full range for some: PIL's ImageOps is the reference (autocontrast up to
    # PIL's floating-point rounding, which can land one below the exact value).
    img = _random_image(mode, seed=seed, low=10 * seed, high=60 + 30 * seed)
    ours, pils = np.asarray(autocontrast(img)).astype(int), np.asarray(ImageOps.autocontrast(img)).astype(int)
    assert ((ours - pils) >= 0).all() and ((ours - pils) <= 1).all()
    assert equalize(img).tobytes() == ImageOps.equalize(img).tobytes()


def test_equalize_flattens_the_histogram():
    # 1024 pixels crowded into 4 adjacent values, 256 each: equalized they spread evenly over [0, 255].
    pixels = np.repeat(np.array([100, 101, 102, 103], dtype=np.uint8), 256).reshape(32, 32)
    out = np.asarray(equalize(Image.fromarray(pixels)))
    values, counts = np.unique(out, return_counts=True)
    assert values.tolist() == [0, 85, 171, 255] and counts.tolist() == [256] * 4


@pytest.mark.parametrize("seed", range(5))
def test_posterize_keeps_the_top_bits(seed):
    img = _random_image(seed=seed)
    pixels = np.asarray(img)
    assert np.array_equal(np.asarray(posterize(img, 0)), pixels & 0xF0)  # level 0: 4 bits
    u, _ = _draws(seed)
    bits = 4 - int(_magnitude(10, u) * 4 / 10)
    mask = (0xFF << (8 - bits)) & 0xFF
    assert np.array_equal(np.asarray(posterize(img, 10, generator=_gen(seed))), pixels & mask)


@pytest.mark.parametrize("seed", range(5))
def test_solarize_inverts_values_at_or_above_the_threshold(seed):
    img = _random_image(seed=seed)
    pixels = np.asarray(img).astype(int)
    u, _ = _draws(seed)
    threshold = 256 - int(_magnitude(10, u) * 256 / 10)
    expected = np.where(pixels >= threshold, 255 - pixels, pixels)
    assert np.array_equal(np.asarray(solarize(img, 10, generator=_gen(seed))), expected)


def _bright_pixel(size: tuple[int, int], x: int, y: int) -> Image.Image:
    pixels = np.zeros((size[1], size[0]), dtype=np.uint8)
    pixels[y, x] = 255
    return Image.fromarray(pixels)


def _brightest(img: Image.Image) -> tuple[int, int]:
    pixels = np.asarray(img)
    y, x = np.unravel_index(int(np.argmax(pixels)), pixels.shape)
    return int(x), int(y)


@pytest.mark.parametrize("seed", range(6))
def test_translate_moves_a_bright_pixel_by_the_drawn_whole_pixel_shift(seed):
    u, u_sign = _draws(seed)
    sign = -1 if u_sign < 0.5 else 1
    img = _bright_pixel((30, 30), 15, 12)
    shift = sign * int(_magnitude(10, u) * 10 / 10)  # size / 3 = 10 pixels at most
    # Output (x, y) takes input (x + t, y): the content moves by -t.
    out_x = translate_x(img, 10, generator=_gen(seed))
    assert _brightest(out_x) == (15 - shift, 12) and np.asarray(out_x).max() == 255
    out_y = translate_y(img, 10, generator=_gen(seed))
    assert _brightest(out_y) == (15, 12 - shift) and np.asarray(out_y).max() == 255


@pytest.mark.parametrize("seed", range(6))
def test_shear_moves_a_bright_pixel_where_the_affine_map_says(seed):
    u, u_sign = _draws(seed)
    factor = (-1 if u_sign < 0.5 else 1) * _magnitude(10, u) * 0.3 / 10
    x0, y0 = 16, 25
    # Output pixel centre (x + .5, y + .5) samples the input at (x + .5 + f (y + .5), y + .5).
    x, y = _brightest(shear_x(_bright_pixel((33, 33), x0, y0), 10, generator=_gen(seed)))
    assert y == y0 and abs(x - (x0 - factor * (y0 + 0.5))) <= 0.5 + 1e-9
    x, y = _brightest(shear_y(_bright_pixel((33, 33), y0, x0), 10, generator=_gen(seed)))
    assert x == y0 and abs(y - (x0 - factor * (y0 + 0.5))) <= 0.5 + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_rotate_turns_a_bright_pixel_about_the_centre(seed):
    u, u_sign = _draws(seed)
    degrees = (-1 if u_sign < 0.5 else 1) * int(_magnitude(10, u) * 30 / 10)
    # Pixel (25, 15) of a 31x31 image has its centre 10 pixels right of the image centre (15.5, 15.5); PIL turns
    # counter-clockwise on screen, where y points down.
    x, y = _brightest(rotate(_bright_pixel((31, 31), 25, 15), 10, generator=_gen(seed)))
    theta = math.radians(degrees)
    expected = (15.5 + 10 * math.cos(theta), 15.5 - 10 * math.sin(theta))
    assert abs(x + 0.5 - expected[0]) <= 1.0 and abs(y + 0.5 - expected[1]) <= 1.0


def test_brightness_factor_is_symmetric_around_one():
    # On a flat image of value 25, brightness gives round(25 * factor): recover the factor from the output.
    img = Image.new("L", (2, 2), 25)
    factors = [brightness(img, 10, generator=_gen(seed)).getpixel((0, 0)) / 25 for seed in range(200)]
    assert all(0.1 - 0.03 <= f <= 10.2 for f in factors)
    below = sum(f < 1 for f in factors) / len(factors)
    assert 0.35 < below < 0.65  # one side of 1 or the other with probability 1/2
    assert max(factors) > 5 and min(factors) < 0.5
    # At level 3 the factor stays within [1 - 0.27, 3].
    mild = [brightness(img, 3, generator=_gen(seed)).getpixel((0, 0)) / 25 for seed in range(100)]
    assert all(0.73 - 0.03 <= f <= 3.0 + 0.03 for f in mild)


def test_brightness_original_factor_range():
    img = Image.new("L", (2, 2), 200)
    for seed in range(50):
        u, _ = _draws(seed)
        factor = _magnitude(10, u) * 1.8 / 10 + 0.1
        assert abs(brightness_original(img, 10, generator=_gen(seed)).getpixel((0, 0)) - min(255, 200 * factor)) <= 1
    assert brightness_original(img, 0).getpixel((0, 0)) == 20  # factor 0.1 at level 0: never the identity


def test_contrast_moves_values_away_from_or_towards_the_mean():
    pixels = np.array([[0, 64, 128, 192]], dtype=np.uint8)  # mean 96
    values = pixels.astype(float)
    for seed in range(20):
        out = np.asarray(contrast(Image.fromarray(pixels), 10, generator=_gen(seed))).astype(float)
        u, u_side = _draws(seed)
        factor = 1 - 0.9 * u if u_side < 0.5 else 1 + 9 * u
        expected = np.clip(96 + factor * (values - 96), 0, 255)
        assert np.abs(out - expected).max() <= 1.0
    out = np.asarray(contrast_original(Image.fromarray(pixels), 0)).astype(float)
    assert np.abs(out - (96 + 0.1 * (values - 96))).max() <= 1.0


def test_color_on_grayscale_is_the_identity_and_on_rgb_moves_saturation():
    gray = _random_image("L")
    assert color(gray, 10, generator=_gen(0)) == gray
    rgb = Image.new("RGB", (4, 4), (200, 40, 40))
    spreads = []
    for seed in range(20):
        r, g, b = color(rgb, 10, generator=_gen(seed)).getpixel((0, 0))
        spreads.append(max(r, g, b) - min(r, g, b))
    assert min(spreads) < 160 < max(spreads)  # desaturated for some draws, saturated for others


def test_sharpness_changes_edges_but_not_flat_images():
    flat = Image.new("RGB", (8, 8), (50, 60, 70))
    assert sharpness(flat, 10, generator=_gen(0)) == flat
    edge = Image.fromarray(np.repeat(np.array([[0] * 4 + [200] * 4], dtype=np.uint8), 8, axis=0))
    assert any(sharpness(edge, 10, generator=_gen(seed)) != edge for seed in range(5))


# ---- sets and errors --------------------------------------------------------------------------------------------


def test_set_names_in_both_spellings():
    assert get_augmentation_set("all") == get_augmentation_set("augmentations_all") == tuple(augmentation_sets["all"])
    safe = get_augmentation_set("augmentations_corruption_safe")
    assert safe == get_augmentation_set("safe") and len(safe) == 9
    assert not {color, contrast, brightness, sharpness} & set(safe)
    original = get_augmentation_set("augmentations_original")
    assert original == get_augmentation_set("original") and len(original) == 13
    assert [op.__name__ for op in original[9:]] == [
        "color_original",
        "contrast_original",
        "brightness_original",
        "sharpness_original",
    ]
    assert get_augmentation_set([rotate, solarize]) == (rotate, solarize)


@pytest.mark.parametrize("bad", ["bogus", "ALL", [], [rotate, 3], 5])
def test_unknown_sets_raise(bad):
    with pytest.raises(ValueError, match="augmentation_set"):
        get_augmentation_set(bad)


@pytest.mark.parametrize("level", [-1, 10.5, 11, True, "3", None, float("nan")])
def test_level_out_of_range_raises(level):
    with pytest.raises(ValueError, match=r"level=.*\[0, 10\]"):
        rotate(_random_image(), level)


@pytest.mark.parametrize("mode", ["RGBA", "P", "I", "F", "CMYK", "1"])
def test_unsupported_modes_raise_naming_the_mode(mode):
    img = Image.new(mode, (4, 4))
    for op in (autocontrast, rotate, color):
        with pytest.raises(ValueError, match=rf"mode '{mode}'.*\['RGB', 'L'\]"):
            op(img, 3)


def test_non_images_raise_type_error():
    with pytest.raises(TypeError, match="PIL image"):
        solarize(np.zeros((4, 4), dtype=np.uint8), 3)
