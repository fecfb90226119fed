"""A grid of the images the model trains on, after every augmentation, logged for a look now and then."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Time, TimeUnit

__all__ = ["ImageVisualizer", "ImageVisualizerHparams", "log_images", "make_image_grid"]


def make_image_grid(images: torch.Tensor, nrow: int = 8, padding: int = 2, normalize: bool = True) -> torch.Tensor:
    """Tiles a batch of images into one image, ``nrow`` images per row.

    Args:
        images (torch.Tensor): (N, C, H, W) images; C is 1 or 3 for a viewable result.
        nrow (int): Images per row.
        padding (int): Pixels between images (filled with 0).
        normalize (bool): Rescale each image to [0, 1] by its own minimum and maximum (inputs after normalisation
            and augmentation are seldom in [0, 1]); else clamp to [0, 1].

    Returns:
        torch.Tensor: (C, rows * (H + padding) + padding, nrow' * (W + padding) + padding) float32 image in [0, 1],
        on the CPU, where ``nrow' = min(nrow, N)`` and ``rows = ceil(N / nrow')``.

    Example:
        >>> grid = make_image_grid(torch.rand(5, 3, 4, 4), nrow=4, padding=1)
        >>> tuple(grid.shape)
        (3, 11, 21)
    """
    if images.ndim != 4:
        raise ValueError(f"images must be a (N, C, H, W) batch; got shape {tuple(images.shape)}.")
    if nrow < 1 or padding < 0:
        raise ValueError(f"nrow={nrow} must be at least 1 and padding={padding} at least 0.")
    x = images.detach().to("cpu", torch.float32)
    n, c, h, w = x.shape
    if normalize:
        low = x.amin(dim=(1, 2, 3), keepdim=True)  # (N, 1, 1, 1)
        high = x.amax(dim=(1, 2, 3), keepdim=True)
        x = (x - low) / (high - low).clamp_min(1e-12)
    else:
        x = x.clamp(0, 1)
    cols = min(nrow, n)
    rows = math.ceil(n / cols)
    grid = torch.zeros(c, rows * (h + padding) + padding, cols * (w + padding) + padding)
    for i in range(n):
        top = padding + (i // cols) * (h + padding)
        left = padding + (i % cols) * (w + padding)
        grid[:, top : top + h, left : left + w] = x[i]
    return grid


def log_images(state: State, logger: Logger, name: str, images: torch.Tensor) -> bool:
    """Hands ``images`` to every destination that takes images and logs BATCH values now.

    A destination takes images when it has a ``log_images(timestamp, log_level, name, images)`` method (the
    TensorBoard, MLflow, W&B and in-memory destinations do).

    Returns:
        bool: Whether any destination took them.

    Args:
        state: The training state (the destinations' ``will_log`` reads it, and its timer stamps the images).
        logger: The run's logger, whose destinations receive the images.
        name: The images' name, such as ``'images/train'``.
        images: One image ``(C, H, W)`` or a batch ``(N, C, H, W)``, floats in ``[0, 1]``.
    """
    takers = _image_destinations(state, logger)
    if not takers:
        return False
    timestamp = state.timer.get_timestamp()
    for destination in takers:
        destination.log_images(timestamp, LogLevel.BATCH, name, images)
    return True


def _image_destinations(state: State, logger: Logger) -> list[Any]:
    # A destination takes images when its class defines log_images (beyond a no-op default on the base class).
    default = getattr(LoggerDestination, "log_images", None)
    return [
        d
        for d in logger.destinations
        if callable(getattr(d, "log_images", None))
        and getattr(type(d), "log_images", None) is not default
        and d.will_log(state, LogLevel.BATCH)
    ]


class ImageVisualizer(Callback):
    """Logs a grid of the training inputs as the model sees them: after every augmentation, every ``interval``.

    It looks at the batch at ``BEFORE_FORWARD`` (after the algorithms that transform the batch at
    ``AFTER_DATALOADER`` and ``BEFORE_FORWARD`` ran; with gradient accumulation, the first microbatch), takes the
    first ``num_images`` inputs, tiles them with :func:`make_image_grid` and logs the grid under ``name`` to the
    destinations that take images (:func:`log_images`). Nothing is copied when none of them will log at that batch.

    Args:
        interval (str | Time | int): How often: ``'100ba'`` (every 100 batches), ``'1ep'`` (the first batch of every
            epoch); an int means batches.
        num_images (int): How many images of the batch to show.
        nrow (int): Images per row of the grid.
        name (str): The name the grid is logged under.
        input_key (str, optional): For dict batches, the key of the images (default: the first element of a
            (inputs, targets) batch).
        channels_last (bool): The inputs are (N, H, W, C) rather than (N, C, H, W).
        normalize (bool): Rescale each image to [0, 1] (see :func:`make_image_grid`).

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> from composer.models import ComposerClassifier
        >>> images = DataLoader(TensorDataset(torch.rand(8, 3, 4, 4), torch.arange(8) % 2), batch_size=4)
        >>> net = ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2)), num_classes=2)
        >>> memory = InMemoryLogger()
        >>> trainer = Trainer(model=net, train_dataloader=images, max_duration="2ba", loggers=[memory],
        ...                   callbacks=[ImageVisualizer(interval="1ba", num_images=2)], progress_bar=False)
        >>> trainer.fit()
        >>> [(int(t.batch), tuple(grid.shape)) for t, grid in memory.images["images/train"]]
        [(0, (3, 8, 14)), (1, (3, 8, 14))]
        >>> trainer.close()
    """

    def __init__(
        self,
        interval: str | Time[Any] | int = "100ba",
        num_images: int = 8,
        nrow: int = 8,
        name: str = "images/train",
        input_key: str | None = None,
        channels_last: bool = False,
        normalize: bool = True,
    ) -> None:
        parsed = Time.from_input(interval, default_unit=TimeUnit.BATCH)
        if parsed.unit not in (TimeUnit.BATCH, TimeUnit.EPOCH) or not isinstance(parsed.value, int) or parsed.value < 1:
            raise ValueError(f"interval={interval!r} must be a whole number of batches or epochs, e.g. '100ba'.")
        if num_images < 1 or nrow < 1:
            raise ValueError(f"num_images={num_images} and nrow={nrow} must be at least 1.")
        self.interval: Time[int] = parsed
        self.num_images = num_images
        self.nrow = nrow
        self.name = name
        self.input_key = input_key
        self.channels_last = channels_last
        self.normalize = normalize
        self._last_batch = -1

    def _due(self, state: State) -> bool:
        timer, n = state.timer, self.interval.value
        if self.interval.unit == TimeUnit.BATCH:
            return timer.batch.value % n == 0
        return timer.batch_in_epoch.value == 0 and timer.epoch.value % n == 0

    def _inputs(self, state: State) -> torch.Tensor:
        batch = state.batch
        if isinstance(batch, Mapping):
            if self.input_key is None or self.input_key not in batch:
                raise ValueError(
                    f"ImageVisualizer: the batch is a dict with keys {sorted(batch)}; pass input_key= naming the "
                    "images."
                )
            inputs = batch[self.input_key]
        elif isinstance(batch, Sequence) and not isinstance(batch, str):
            inputs = batch[0]
        else:
            inputs = batch
        if not isinstance(inputs, torch.Tensor) or inputs.ndim != 4:
            shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise ValueError(
                f"ImageVisualizer needs a batch of images (N, C, H, W); the inputs are {shape}. Set channels_last=True "
                "for (N, H, W, C) images, or input_key= for dict batches."
            )
        return inputs.permute(0, 3, 1, 2) if self.channels_last else inputs

    def before_forward(self, state: State, logger: Logger) -> None:
        batch = state.timer.batch.value
        if batch == self._last_batch or not self._due(state):
            return
        self._last_batch = batch  # one grid per batch, from the first microbatch
        if not _image_destinations(state, logger):
            return
        images = self._inputs(state)[: self.num_images]
        log_images(state, logger, self.name, make_image_grid(images, self.nrow, normalize=self.normalize))

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._last_batch = -1


ImageVisualizerHparams = hparams_for(ImageVisualizer)
"""See :class:`ImageVisualizer`; the fields are its arguments (YAML key ``image_visualizer``)."""
