"""PIL images for the augmentations: is Pillow there, is an image usable, and conversion to and from tensors.

The augmentations work on PIL images of mode ``'RGB'`` or ``'L'``. Pillow comes with the ``vision`` extra
(``pip install 'opencomposer[vision]'``); without it this module still imports, and :func:`require_pil` says what to
install.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING or importlib.util.find_spec("PIL") is not None:
    from PIL import Image

__all__ = ["SUPPORTED_MODES", "as_pil", "check_image", "from_array", "is_pil_available", "require_pil", "to_pil"]

SUPPORTED_MODES = ("RGB", "L")
"""The PIL image modes the augmentations handle."""


def is_pil_available() -> bool:
    """Returns whether Pillow, which the augmentations need, is installed (it comes with ``opencomposer[vision]``).

    Returns:
        bool: True when ``PIL`` can be imported.

    Example:
        >>> is_pil_available()
        True
    """
    return importlib.util.find_spec("PIL") is not None


def require_pil(caller: str) -> None:
    """Raises an ImportError that names the extra to install if Pillow is missing.

    Args:
        caller: What needs Pillow, for the message.

    Raises:
        ImportError: If Pillow is not installed.

    Example:
        >>> require_pil("AugMix")  # Pillow is installed: nothing happens
    """
    if not is_pil_available():
        raise ImportError(
            f"{caller} works on PIL images and needs Pillow. To fix, install the vision extra: "
            "pip install 'opencomposer[vision]'."
        )


def check_image(img: Any, caller: str) -> None:
    """Raises unless ``img`` is a PIL image of a mode the augmentations handle ('RGB' or 'L').

    Args:
        img: The image to check.
        caller: The function checking, for the message.

    Raises:
        TypeError: If ``img`` is not a PIL image.
        ValueError: If its mode is not 'RGB' or 'L'.

    Example:
        >>> check_image(Image.new("RGBA", (2, 2)), "rotate")
        Traceback (most recent call last):
        ...
        ValueError: rotate got an image of mode 'RGBA'; the augmentations handle the modes ['RGB', 'L']. ...
    """
    if not is_pil_available() or not isinstance(img, Image.Image):
        raise TypeError(
            f"{caller} expects a PIL image of mode 'RGB' or 'L', got {type(img).__name__}. To fix, apply it before "
            "ToTensor in the transform pipeline, or convert with torchvision.transforms.functional.to_pil_image."
        )
    if img.mode not in SUPPORTED_MODES:
        raise ValueError(
            f"{caller} got an image of mode {img.mode!r}; the augmentations handle the modes {list(SUPPORTED_MODES)}. "
            "To fix, convert the image first, e.g. img.convert('RGB')."
        )


def to_pil(img: Any, caller: str) -> tuple[Image.Image, bool]:
    """Returns ``(PIL image, was_tensor)``: a checked PIL image as it is, or a uint8 tensor converted.

    A tensor must be uint8 of shape ``(3, H, W)`` (becomes 'RGB') or ``(1, H, W)`` (becomes 'L').

    Args:
        img: A PIL image of mode 'RGB' or 'L', or such a tensor.
        caller: The function converting, for error messages.

    Returns:
        tuple: The PIL image, and whether ``img`` was a tensor (to convert back with :func:`from_array`).

    Raises:
        ValueError: If the tensor has another dtype or shape, or the image another mode.
        TypeError: If ``img`` is neither a PIL image nor a tensor.

    Example:
        >>> pil, was_tensor = to_pil(torch.zeros(3, 4, 6, dtype=torch.uint8), "randaugment")
        >>> pil.mode, pil.size, was_tensor
        ('RGB', (6, 4), True)
    """
    if isinstance(img, torch.Tensor):
        if img.dtype != torch.uint8 or img.ndim != 3 or img.shape[0] not in (1, 3):
            raise ValueError(
                f"{caller} got a tensor of dtype {img.dtype} and shape {tuple(img.shape)}; tensors must be uint8 of "
                "shape (3, H, W) or (1, H, W). To fix, add the transform before ToTensor (it works on PIL images), "
                "or convert with (x * 255).round().to(torch.uint8)."
            )
        require_pil(caller)
        pixels = img.permute(1, 2, 0).numpy()  # (H, W, C)
        return Image.fromarray(pixels[:, :, 0] if img.shape[0] == 1 else np.ascontiguousarray(pixels)), True
    check_image(img, caller)
    return img, False


def from_array(pixels: np.ndarray, as_tensor: bool) -> Any:
    """Turns ``(H, W)`` or ``(H, W, 3)`` uint8 pixels into a PIL image, or into a ``(C, H, W)`` uint8 tensor.

    Args:
        pixels: The pixels, as ``np.asarray(pil_image)`` gives them.
        as_tensor: Return a tensor (True) or a PIL image (False).

    Returns:
        PIL.Image.Image | torch.Tensor: The image.

    Example:
        >>> from_array(np.zeros((4, 6, 3), dtype=np.uint8), as_tensor=True).shape
        torch.Size([3, 4, 6])
        >>> from_array(np.zeros((4, 6), dtype=np.uint8), as_tensor=False).mode
        'L'
    """
    if not as_tensor:
        return Image.fromarray(pixels)
    tensor = torch.from_numpy(np.ascontiguousarray(pixels))
    return tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1).contiguous()


def _check_tensor_image(img: torch.Tensor, caller: str) -> None:
    if not (img.dtype == torch.uint8 or img.is_floating_point()) or img.ndim != 3 or img.shape[0] not in (1, 3):
        raise ValueError(
            f"{caller} got a tensor of dtype {img.dtype} and shape {tuple(img.shape)}; tensor images must be uint8 "
            "of shape (3, H, W) or (1, H, W) with values 0 to 255, or float of that shape with values in [0, 1]. "
            "To fix, pass one image at a time, channels first, e.g. x.permute(2, 0, 1) for an (H, W, C) array."
        )
    if img.is_floating_point() and img.numel() > 0:
        low, high = img.min().item(), img.max().item()
        if not (low >= 0.0 and high <= 1.0):  # also catches NaN
            raise ValueError(
                f"{caller} got a float tensor with values from {low:.4g} to {high:.4g}; float images must lie in "
                "[0, 1], as ToTensor gives them. To fix, apply it before Normalize in the pipeline, or pass a uint8 "
                "tensor."
            )


def as_pil(img: Any, caller: str) -> tuple[Image.Image, Callable[[np.ndarray], Any]]:
    """Returns ``img`` as a PIL image, and a function that turns augmented pixels back into the kind ``img`` was.

    The augmentations run on PIL images; this lets them take what their users pass and hand back the same kind:

    * a PIL image of mode 'RGB' or 'L' is used as it is, and the pixels come back as a PIL image;
    * a uint8 tensor of shape ``(3, H, W)`` or ``(1, H, W)`` comes back as a uint8 tensor of that shape;
    * a float tensor of that shape with values in [0, 1] (as ``ToTensor`` gives) is quantised to 256 levels,
      ``round(x * 255)``, and comes back as a float tensor of its dtype in [0, 1] (multiples of 1/255), so a float
      input differs from the uint8 one only by that rounding, at most ``0.5 / 255``.

    Tensors come back on the device they came from (the operations themselves run on the CPU).

    Args:
        img: A PIL image, or a uint8 or float tensor image as above.
        caller: The function converting, for error messages.

    Returns:
        tuple: The PIL image, and ``restore(pixels)`` that turns ``(H, W)`` or ``(H, W, 3)`` uint8 pixels (as
        ``np.asarray(pil_image)`` gives them) into the kind of ``img``.

    Raises:
        ValueError: If ``img`` is None, a tensor has another dtype or shape, a float tensor has values outside
            [0, 1], or an image has a mode other than 'RGB' or 'L'.
        TypeError: If ``img`` is neither a PIL image nor a tensor.

    Example:
        >>> x = torch.tensor([[[0.0, 0.5], [0.998, 1.0]]])  # (1, 2, 2) float
        >>> pil, restore = as_pil(x, "randaugment")
        >>> pil.mode, np.asarray(pil).tolist()
        ('L', [[0, 128], [254, 255]])
        >>> restore(np.array(pil)) * 255
        tensor([[[  0., 128.],
                 [254., 255.]]])
    """
    if img is None:
        raise ValueError(
            f"{caller} needs an image: pass img=<a PIL image, or a (C, H, W) tensor, uint8 or float in [0, 1]>."
        )
    if not isinstance(img, torch.Tensor):
        check_image(img, caller)
        return img, lambda pixels: from_array(pixels, as_tensor=False)
    _check_tensor_image(img, caller)
    dtype, device = img.dtype, img.device
    pixels = img.detach().cpu()
    if pixels.is_floating_point():
        pixels = pixels.float().mul(255.0).round().to(torch.uint8)  # values checked to lie in [0, 1]
    pil_img, _ = to_pil(pixels, caller)

    def restore(augmented: np.ndarray) -> torch.Tensor:
        tensor: torch.Tensor = from_array(augmented, as_tensor=True)
        if dtype != torch.uint8:
            tensor = (tensor.float() / 255.0).to(dtype)
        return tensor.to(device)

    return pil_img, restore
