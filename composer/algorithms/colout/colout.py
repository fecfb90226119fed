"""ColOut: drop a random fraction of the rows and columns of images, which shrinks them.

:func:`colout` works on a batch tensor ``(B, C, H, W)`` (the same rows and columns leave every image), a single image
tensor ``(C, H, W)`` or a PIL image. :class:`ColOutTransform` is the per-sample form for a dataset's ``transform``.
:class:`ColOut` applies it to each training batch, or installs the transform in the training dataset.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["ColOut", "ColOutHparams", "ColOutTransform", "colout"]

_Img = TypeVar("_Img", torch.Tensor, "Image")

# PIL modes whose pixels round-trip through a NumPy array unchanged (the others need a palette or a colour space).
_PIL_MODES = ("1", "L", "LA", "I", "I;16", "F", "RGB", "RGBA")


def _check_fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(
            f"ColOut {name}={value!r} must be a fraction in [0, 1), the share of "
            f"{'rows' if name == 'p_row' else 'columns'} to drop; for example {name}=0.15 (the default)."
        )


def _num_kept(size: int, p_drop: float) -> int:
    # floor((1 - p) * size), with a little slack so that 0.7 * 10 is 7 rather than 6.999...; at least one survives.
    return max(1, math.floor((1.0 - p_drop) * size + 1e-6))


def _kept_indices(size: int, p_drop: float, generator: torch.Generator | None) -> torch.Tensor:
    """A sorted random subset of ``range(size)`` of ``floor((1 - p_drop) * size)`` indices (at least one)."""
    device = generator.device if generator is not None else torch.device("cpu")
    keep = torch.randperm(size, generator=generator, device=device)[: _num_kept(size, p_drop)]
    return keep.sort().values


def colout(img: _Img, p_row: float = 0.15, p_col: float = 0.15, generator: torch.Generator | None = None) -> _Img:
    """Drops random rows and columns from an image or a batch of images.

    Keeps ``floor((1 - p_row) * H)`` rows and ``floor((1 - p_col) * W)`` columns (at least one of each), chosen
    uniformly at random and kept in their original order, so the image shrinks but its content stays recognisable.
    For a batch tensor the same rows and columns leave every image (two ``index_select`` calls for the whole batch),
    so the result is again a batch.

    Args:
        img: An image tensor ``(C, H, W)``, a batch ``(B, C, H, W)``, or a PIL image (modes
            ``'1', 'L', 'LA', 'I', 'I;16', 'F', 'RGB', 'RGBA'``).
        p_row: Fraction of rows to drop (drop along H), in ``[0, 1)``.
        p_col: Fraction of columns to drop (drop along W), in ``[0, 1)``.
        generator: Where the randomness comes from; default: torch's default generator.

    Returns:
        torch.Tensor or PIL Image: A smaller image (or batch) of the same type, dtype and mode.

    Raises:
        ValueError: If ``p_row`` or ``p_col`` is outside ``[0, 1)``, a tensor is not 3- or 4-dimensional, or a PIL
            image has another mode.
        TypeError: If ``img`` is neither a tensor nor a PIL image.

    Example:
        >>> x = torch.arange(16.0).reshape(1, 4, 4)
        >>> small = colout(x, p_row=0.5, p_col=0.25, generator=torch.Generator().manual_seed(0))
        >>> small.shape
        torch.Size([1, 2, 3])
        >>> colout(torch.randn(8, 3, 32, 32), p_row=0.15, p_col=0.15).shape
        torch.Size([8, 3, 27, 27])
    """
    _check_fraction("p_row", p_row)
    _check_fraction("p_col", p_col)
    if isinstance(img, torch.Tensor):
        if img.ndim not in (3, 4):
            raise ValueError(
                f"colout img must be an image (C, H, W) or a batch of images (B, C, H, W), got a tensor of shape "
                f"{tuple(img.shape)}. To fix, add the missing channel dimension (img.unsqueeze(0))."
            )
        rows = _kept_indices(img.shape[-2], p_row, generator).to(img.device)
        cols = _kept_indices(img.shape[-1], p_col, generator).to(img.device)
        # (..., H, W) -> (..., kept_h, W) -> (..., kept_h, kept_w): two contiguous index_selects, which beat a single
        # advanced-indexing gather on CPU (benchmarks/batch_ops.py).
        return img.index_select(-2, rows).index_select(-1, cols)
    return _colout_pil(img, p_row, p_col, generator)


def _colout_pil(img: Any, p_row: float, p_col: float, generator: torch.Generator | None) -> Image:
    wrong_type = TypeError(
        f"colout img must be a torch.Tensor (C, H, W) or (B, C, H, W), or a PIL image, got {type(img).__name__}."
    )
    try:
        import PIL.Image
    except ImportError:  # without Pillow nobody can hold a PIL image, so this is simply the wrong type
        raise wrong_type from None
    if not isinstance(img, PIL.Image.Image):
        raise wrong_type
    if img.mode not in _PIL_MODES:
        raise ValueError(
            f"colout cannot handle PIL images of mode {img.mode!r}; it supports modes {list(_PIL_MODES)}. To fix, "
            "convert the image first, for example img.convert('RGB')."
        )
    pixels = np.asarray(img)  # (H, W) or (H, W, channels)
    rows = _kept_indices(pixels.shape[0], p_row, generator).cpu().numpy()
    cols = _kept_indices(pixels.shape[1], p_col, generator).cpu().numpy()
    return PIL.Image.fromarray(np.ascontiguousarray(pixels[np.ix_(rows, cols)]))


class ColOutTransform:
    """The per-sample form of ColOut, for a dataset's ``transform``: ``colout(transform(img), p_row, p_col)``.

    Picklable, so it runs in DataLoader workers, where it draws from torch's per-worker random state (which the
    DataLoader seeds from its own generator).

    Args:
        p_row: Fraction of rows to drop, in ``[0, 1)``. Default: 0.15.
        p_col: Fraction of columns to drop, in ``[0, 1)``. Default: 0.15.
        transform: A transform to run on the sample first (the dataset's existing one), or None.

    Example:
        >>> drop = ColOutTransform(p_row=0.25, p_col=0.5, transform=lambda x: x * 2)
        >>> drop(torch.ones(3, 8, 8)).shape
        torch.Size([3, 6, 4])
    """

    def __init__(self, p_row: float = 0.15, p_col: float = 0.15, transform: Callable[[Any], Any] | None = None):
        _check_fraction("p_row", p_row)
        _check_fraction("p_col", p_col)
        self.p_row = p_row
        self.p_col = p_col
        self.transform = transform

    def __call__(self, img: Any) -> Any:
        """Runs ``transform`` (if any), then drops rows and columns."""
        if self.transform is not None:
            img = self.transform(img)
        return colout(img, self.p_row, self.p_col)

    def __repr__(self) -> str:
        return f"ColOutTransform(p_row={self.p_row!r}, p_col={self.p_col!r}, transform={self.transform!r})"


class ColOut(Algorithm):
    """Drops a fraction of the rows and columns of an input image.

    If the fraction of rows/columns dropped isn't too large, this does not significantly alter the content of the
    image, but reduces its size and provides extra variability.

    With ``batch=True`` it runs on ``Event.AFTER_DATALOADER`` and drops the same rows and columns from every image of
    the batch's inputs (randomness from ``state.rng``; targets untouched). With ``batch=False`` it runs on
    ``Event.FIT_START`` and wraps the training dataset's ``transform`` in a :class:`ColOutTransform`, so each sample
    loses its own rows and columns, in the DataLoader workers; the dataset must have a ``transform`` attribute (as
    torchvision datasets and the built-in datasets of :mod:`composer.datasets` do), and a dataset is wrapped only once however often ``fit`` is called.

    Args:
        p_row: Fraction of rows to drop (drop along H).
        p_col: Fraction of columns to drop (drop along W).
        batch: Run ColOut at the batch level.

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
        ...     algorithms=[ColOut(p_row=0.15, p_col=0.15, batch=True)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    def __init__(self, p_row: float = 0.15, p_col: float = 0.15, batch: bool = True) -> None:
        _check_fraction("p_row", p_row)
        _check_fraction("p_col", p_col)
        if not isinstance(batch, bool):
            raise ValueError(f"ColOut batch={batch!r} must be True (per batch) or False (per sample, in the dataset).")
        self.p_row = p_row
        self.p_col = p_col
        self.batch = batch
        self._wrapped: weakref.WeakSet[Any] = weakref.WeakSet()  # datasets already given the transform

    def match(self, event: Event, state: State) -> bool:
        """Batch mode: after the dataloader; sample mode: at the start of fit."""
        return event == (Event.AFTER_DATALOADER if self.batch else Event.FIT_START)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Drops rows and columns from the batch, or installs the per-sample transform in the dataset."""
        if self.batch:
            inputs, targets = state.batch_pair
            state.batch_pair = (colout(inputs, self.p_row, self.p_col, generator=state.rng), targets)
            return
        dataset = getattr(state.train_dataloader, "dataset", None)
        if dataset is None or not hasattr(dataset, "transform"):
            raise ValueError(
                f"ColOut(batch=False) adds a per-sample transform to the training dataset's `transform` attribute, but "
                f"{type(dataset if dataset is not None else state.train_dataloader).__name__} has none. To fix, use "
                "ColOut(batch=True), or a dataset with a `transform` attribute applied to each image (such as a "
                "torchvision dataset)."
            )
        if dataset not in self._wrapped:
            dataset.transform = ColOutTransform(self.p_row, self.p_col, transform=dataset.transform)
            self._wrapped.add(dataset)


ColOutHparams = hparams_for(ColOut)
"""See :class:`ColOut`; the fields are its arguments (YAML key ``colout``)."""
