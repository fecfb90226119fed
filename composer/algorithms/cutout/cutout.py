"""CutOut: zero one or more square patches of the input images.

:func:`cutout` masks a batch (or a single image); :class:`CutOut` does it to every training batch.
"""

from __future__ import annotations

from typing import Any

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["CutOut", "CutOutHparams", "cutout"]


_MEANINGS = {"n_holes": "the number of square holes", "length": "the side of each hole, in pixels"}


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"CutOut {name}={value!r} must be an int >= 0 ({_MEANINGS[name]}); for example n_holes=1, length=16 "
            "for 32x32 images."
        )


def cutout(X: torch.Tensor, n_holes: int, length: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Cutout is a data augmentation technique that works by masking out one or more square regions of an input image.

    Each hole is a ``length`` x ``length`` square of zeros whose top-left corner sits at ``(cy - length // 2, cx -
    length // 2)`` for a centre pixel ``(cy, cx)`` drawn uniformly over the image; the parts of the square outside
    the image are cut off, so holes near the border are smaller. Holes may overlap. This implementation cuts out the
    same squares from all images in a batch (one slice write per hole, no per-sample work).

    Introduced in `Improved Regularization of Convolutional Neural Networks with Cutout
    <https://arxiv.org/abs/1708.04552>`_ (DeVries and Taylor 2017).

    Args:
        X: Batch Tensor image of size ``(B, C, H, W)``, or a single image ``(C, H, W)``.
        n_holes: Integer number of holes to cut out.
        length: Side length of the square hole to cut out, in pixels.
        generator: Where the hole positions come from; default: torch's default generator.

    Returns:
        torch.Tensor: X_cutout, a new tensor: the images with ``n_holes`` squares of side ``length`` set to zero.

    Raises:
        ValueError: If ``X`` is not 3- or 4-dimensional, or ``n_holes`` or ``length`` is not an int >= 0.

    Example:
        >>> X = torch.ones(2, 3, 8, 8)
        >>> X_cut = cutout(X, n_holes=1, length=4, generator=torch.Generator().manual_seed(0))
        >>> int((X_cut[0, 0] == 0).sum()) <= 16, torch.equal(X_cut[0], X_cut[1])
        (True, True)
    """
    if not isinstance(X, torch.Tensor) or X.ndim not in (3, 4):
        got = f"a tensor of shape {tuple(X.shape)}" if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(
            f"cutout X must be a batch of images (B, C, H, W) or one image (C, H, W), got {got}. To fix, add the "
            "missing channel or batch dimension (X.unsqueeze(0))."
        )
    _check_count("n_holes", n_holes)
    _check_count("length", length)
    height, width = X.shape[-2], X.shape[-1]
    device = generator.device if generator is not None else torch.device("cpu")
    # One uniformly random pixel per hole, as a flat index into the H x W grid: one draw, read back once.
    centres = torch.randint(0, height * width, (n_holes,), generator=generator, device=device).tolist()
    out = X.clone()
    for centre in centres:
        cy, cx = divmod(centre, width)
        top, left = cy - length // 2, cx - length // 2
        out[..., max(top, 0) : max(top + length, 0), max(left, 0) : max(left + length, 0)] = 0
    return out


class CutOut(Algorithm):
    """Cutout is a data augmentation technique that works by masking out one or more square regions of an input image.

    This implementation cuts out the same square from all images in a batch. Runs on ``Event.AFTER_DATALOADER``,
    on the inputs of each ``(inputs, targets)`` training batch (the targets are left alone), drawing the hole
    positions from ``state.rng``. See :func:`cutout`.

    Introduced in `Improved Regularization of Convolutional Neural Networks with Cutout
    <https://arxiv.org/abs/1708.04552>`_ (DeVries and Taylor 2017).

    Args:
        n_holes: Integer number of holes to cut out.
        length: Side length of the square hole to cut out, in pixels.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import ComposerClassifier
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> images = DataLoader(TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))), batch_size=8)
        >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        >>> trainer = Trainer(
        ...     model=ComposerClassifier(net),
        ...     train_dataloader=images,
        ...     max_duration="1ep",
        ...     algorithms=[CutOut(n_holes=1, length=4)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    def __init__(self, n_holes: int, length: int) -> None:
        _check_count("n_holes", n_holes)
        _check_count("length", length)
        self.n_holes = n_holes
        self.length = length

    def match(self, event: Event, state: State) -> bool:
        """Runs once per batch, right after the dataloader."""
        return event == Event.AFTER_DATALOADER

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Cuts the holes out of the batch's inputs."""
        inputs, targets = state.batch_pair
        state.batch_pair = (cutout(inputs, self.n_holes, self.length, generator=state.rng), targets)


CutOutHparams = hparams_for(CutOut)
"""See :class:`CutOut`; the fields are its arguments (YAML key ``cutout``)."""
