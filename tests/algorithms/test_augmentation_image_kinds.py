"""augmix_image and randaugment_image (the v0.5 names) take PIL images, uint8 tensors and float tensors in [0, 1].

Each kind comes back as the kind it went in as. The reference for a tensor input is the PIL path with the same seeded
generator, built here by hand from the pixels: a float image is the uint8 image ``round(x * 255)`` divided by 255.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms

import composer.functional
from composer.algorithms.augmix import AugmentAndMixTransform, augment_and_mix, augmix_image
from composer.algorithms.randaugment import RandAugmentTransform, randaugment, randaugment_image

Augment = Callable[..., Any]

# Arguments that make both functions change the image substantially.
ALIASES: list[tuple[str, Augment, dict[str, Any]]] = [
    ("augmix_image", augmix_image, {"severity": 6, "width": 3}),
    ("randaugment_image", randaugment_image, {"severity": 9, "depth": 3}),
]


@pytest.fixture(params=ALIASES, ids=[name for name, _, _ in ALIASES])
def alias(request: pytest.FixtureRequest) -> tuple[Augment, dict[str, Any]]:
    _, function, kwargs = request.param
    return function, kwargs


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _float_image(channels: int, seed: int, size: tuple[int, int] = (14, 11)) -> torch.Tensor:
    # Values anywhere in [0, 1], not only on the 1/255 grid, including both ends.
    x = torch.rand(channels, *size, generator=_gen(seed))
    x[:, 0, 0], x[:, 0, 1] = 0.0, 1.0
    return x


def _to_pil(pixels: torch.Tensor) -> Image.Image:
    # (C, H, W) uint8 -> PIL, 'L' for one channel: the reference conversion, independent of the library's.
    array = pixels.permute(1, 2, 0).numpy()
    return Image.fromarray(array[:, :, 0] if pixels.shape[0] == 1 else np.ascontiguousarray(array))


def _from_pil(img: Image.Image, channels: int) -> torch.Tensor:
    array = np.array(img)
    return torch.from_numpy(array.reshape(array.shape[0], array.shape[1], channels)).permute(2, 0, 1)


def test_the_aliases_are_the_functions_and_exported():
    assert augmix_image is augment_and_mix and randaugment_image is randaugment
    assert composer.functional.augmix_image is augmix_image
    assert composer.functional.randaugment_image is randaugment_image


@pytest.mark.parametrize("channels", [3, 1])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float_tensor_is_the_pil_result_over_255(alias, channels: int, seed: int):
    function, kwargs = alias
    x = _float_image(channels, seed)
    out = function(x, **kwargs, generator=_gen(seed))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == x.shape
    assert out.min().item() >= 0.0 and out.max().item() <= 1.0

    quantised = (x * 255).round().to(torch.uint8)  # each value moves by at most 0.5 / 255
    assert (quantised.float() / 255 - x).abs().max().item() <= 0.5 / 255 + 1e-7
    reference = function(_to_pil(quantised), **kwargs, generator=_gen(seed))
    assert isinstance(reference, Image.Image) and reference.mode == ("RGB" if channels == 3 else "L")
    expected = _from_pil(reference, channels).float() / 255
    assert torch.allclose(out, expected, atol=1e-6, rtol=0)
    assert not torch.allclose(out, x, atol=2 / 255)  # the image was augmented, not passed through


@pytest.mark.parametrize("seed", [0, 3])
def test_uint8_tensor_matches_the_pil_result(alias, seed: int):
    function, kwargs = alias
    pixels = (_float_image(3, seed) * 255).round().to(torch.uint8)
    out = function(pixels, **kwargs, generator=_gen(seed))
    assert out.dtype == torch.uint8 and out.shape == pixels.shape
    reference = function(_to_pil(pixels), **kwargs, generator=_gen(seed))
    assert torch.equal(out, _from_pil(reference, 3))
    # The float path on the same pixels agrees with the uint8 path exactly.
    from_float = function(pixels.float() / 255, **kwargs, generator=_gen(seed))
    assert torch.equal((from_float * 255).round().to(torch.uint8), out)


def test_pil_image_stays_a_pil_image(alias):
    function, kwargs = alias
    img = _to_pil((_float_image(3, 5) * 255).round().to(torch.uint8))
    out = function(img, **kwargs, generator=_gen(5))
    assert isinstance(out, Image.Image) and out.mode == "RGB" and out.size == img.size


def test_float64_stays_float64(alias):
    function, kwargs = alias
    x = _float_image(3, 4).double()
    out = function(x, **kwargs, generator=_gen(4))
    reference = function(x.float(), **kwargs, generator=_gen(4))
    assert out.dtype == torch.float64 and torch.allclose(out, reference.double(), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("image", "match"),
    [
        (
            torch.rand(3, 6, 6, generator=torch.Generator().manual_seed(0)) * 2 - 0.5,
            r"float images must lie in \[0, 1\]",
        ),
        (torch.full((3, 4, 4), float("nan")), r"float images must lie in \[0, 1\]"),
        (
            torch.zeros(3, 4, 4, dtype=torch.int64),
            r"dtype torch.int64 .* uint8 of shape .* 0 to 255, or float .* in \[0, 1\]",
        ),
        (torch.rand(2, 3, 4, 4), r"shape \(2, 3, 4, 4\).*\(3, H, W\) or \(1, H, W\)"),
        (torch.rand(4, 4, 3), r"shape \(4, 4, 3\).*permute"),
    ],
)
def test_tensors_that_are_not_images_raise_naming_what_is_wrong(alias, image: torch.Tensor, match: str):
    function, kwargs = alias
    with pytest.raises(ValueError, match=match):
        function(image, **kwargs, generator=_gen(0))


@pytest.mark.parametrize("transform_class", [AugmentAndMixTransform, RandAugmentTransform])
def test_the_transforms_also_work_after_to_tensor(transform_class: type):
    torch.manual_seed(0)  # the transforms draw from torch's default generator, as in a DataLoader worker
    pipeline = transforms.Compose([transforms.ToTensor(), transform_class()])
    img = _to_pil((_float_image(3, 6) * 255).round().to(torch.uint8))
    out = pipeline(img)
    assert out.dtype == torch.float32 and out.shape == (3, 14, 11)
    assert torch.equal((out * 255).round() / 255, out)  # on the 1/255 grid, as the uint8 image it came from
