"""The named sets of augmentation operations that AugMix and RandAugment choose from, and a random chain of them.

Sets, by name (each has a short and a long name; both are accepted):

* ``'all'`` / ``'augmentations_all'``: the 13 operations of
  :mod:`~composer.algorithms.utils.augmentation_primitives`.
* ``'safe'`` / ``'augmentations_corruption_safe'``: the first nine, leaving out color, contrast, brightness and
  sharpness, which overlap with the corruptions of ImageNet-C and CIFAR-10-C (so those test sets stay unseen).
* ``'original'`` / ``'augmentations_original'``: the first nine plus the ``*_original`` enhancers, which reproduce
  the AugMix repository's color, contrast, brightness and sharpness.

Example:
    >>> [op.__name__ for op in augmentation_sets["safe"]]  # doctest: +NORMALIZE_WHITESPACE
    ['autocontrast', 'equalize', 'posterize', 'rotate', 'solarize', 'shear_x', 'shear_y', 'translate_x',
     'translate_y']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from composer.algorithms.utils.augmentation_primitives import (
    AugmentationOp,
    apply_op,
    autocontrast,
    brightness,
    brightness_original,
    color,
    color_original,
    contrast,
    contrast_original,
    equalize,
    posterize,
    rotate,
    sharpness,
    sharpness_original,
    shear_x,
    shear_y,
    solarize,
    translate_x,
    translate_y,
)

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["apply_chain", "augmentation_sets", "choose", "get_augmentation_set"]

_SAFE = (autocontrast, equalize, posterize, rotate, solarize, shear_x, shear_y, translate_x, translate_y)
_ALL = (*_SAFE, color, contrast, brightness, sharpness)
_ORIGINAL = (*_SAFE, color_original, contrast_original, brightness_original, sharpness_original)

augmentation_sets: dict[str, tuple[AugmentationOp, ...]] = {
    "all": _ALL,
    "safe": _SAFE,
    "original": _ORIGINAL,
    "augmentations_all": _ALL,
    "augmentations_corruption_safe": _SAFE,
    "augmentations_original": _ORIGINAL,
}
"""Set name -> its operations; each set has a short and a long name (see the module docstring)."""


def get_augmentation_set(augmentation_set: str | Sequence[AugmentationOp]) -> tuple[AugmentationOp, ...]:
    """Returns the operations of a named set, or checks and returns a sequence of operations as a tuple.

    Args:
        augmentation_set: A key of :data:`augmentation_sets` ('all', 'safe', 'original', or the long names
            'augmentations_all', 'augmentations_corruption_safe', 'augmentations_original'), or a non-empty sequence
            of operations ``op(pil_img, level) -> pil_img``.

    Returns:
        tuple: The operations.

    Raises:
        ValueError: If the name is unknown or the sequence is empty or holds something that is not callable.

    Example:
        >>> len(get_augmentation_set("augmentations_all")), len(get_augmentation_set("safe"))
        (13, 9)
        >>> get_augmentation_set("most")
        Traceback (most recent call last):
        ...
        ValueError: augmentation_set='most' is not a known set; choose one of ['all', 'safe', 'original', ...
    """
    if isinstance(augmentation_set, str):
        if augmentation_set not in augmentation_sets:
            raise ValueError(
                f"augmentation_set={augmentation_set!r} is not a known set; choose one of {list(augmentation_sets)}, "
                "or pass a list of operations such as [rotate, solarize]."
            )
        return augmentation_sets[augmentation_set]
    ops: tuple[AugmentationOp, ...] = ()
    if isinstance(augmentation_set, Sequence):
        ops = tuple(cast(Sequence[AugmentationOp], augmentation_set))
    if not ops or not all(callable(op) for op in ops):
        raise ValueError(
            f"augmentation_set={augmentation_set!r} must be a set name, one of {list(augmentation_sets)}, or a "
            "non-empty sequence of operations op(pil_img, level) -> pil_img."
        )
    return ops


def choose(u: float, count: int) -> int:
    """Turns a uniform ``u`` in ``[0, 1)`` into an index in ``[0, count)``: ``floor(u * count)``.

    AugMix and RandAugment pick operations (and chain depths) this way, from uniforms drawn in one call per image.

    Args:
        u: A uniform draw in ``[0, 1)``.
        count: The number of choices.

    Returns:
        int: The index.

    Example:
        >>> [choose(u, 13) for u in (0.0, 0.5, 0.999)]
        [0, 6, 12]
    """
    return min(math.floor(u * count), count - 1)


def apply_chain(img: Image, ops: Sequence[AugmentationOp], level: float, uniforms: Sequence[float]) -> Image:
    """Applies ``len(uniforms) // 3`` operations in sequence, each chosen from ``ops`` by its own three uniforms.

    Step ``i`` reads ``(u_op, u_magnitude, u_sign) = uniforms[3 * i : 3 * i + 3]``: ``u_op`` picks the operation
    (:func:`choose`), the other two drive it (:func:`~composer.algorithms.utils.augmentation_primitives.apply_op`).
    RandAugment applies one such chain to an image, AugMix ``width`` of them; both draw all the uniforms in one call.

    Args:
        img: An image of mode 'RGB' or 'L'.
        ops: The operations to choose from.
        level: Severity in [0, 10], the same for every step.
        uniforms: Uniforms in ``[0, 1)``, three per step.

    Returns:
        Image.Image: The image after the last step (``img`` itself when ``uniforms`` has fewer than three).

    Example:
        >>> import torch
        >>> from PIL import Image
        >>> from composer.algorithms.utils.augmentation_primitives import rotate, solarize
        >>> img = Image.new("L", (8, 8), 200)
        >>> uniforms = torch.rand(6, generator=torch.Generator().manual_seed(0)).tolist()
        >>> apply_chain(img, [rotate, solarize], 5, uniforms).size
        (8, 8)
        >>> apply_chain(img, [rotate, solarize], 5, []) is img
        True
    """
    for step in range(len(uniforms) // 3):
        u_op, u_magnitude, u_sign = uniforms[3 * step : 3 * step + 3]
        img = apply_op(ops[choose(u_op, len(ops))], img, level, u_magnitude, u_sign)
    return img
