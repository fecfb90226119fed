"""Progressive resizing: train on downscaled images first, growing them to full size as training goes on.

:func:`resize_inputs` shrinks a batch by a scale factor; :func:`resize_scale` gives the scale at a point of the run;
:class:`ProgressiveResizing` applies both to every training batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = [
    "COMPILED_SCALE_BUCKETS",
    "ProgressiveResizing",
    "ProgressiveResizingHparams",
    "resize_inputs",
    "resize_scale",
    "scaled_size",
]

_MODES = ("resize", "crop")

COMPILED_SCALE_BUCKETS = 4
"""The scales :class:`ProgressiveResizing` takes by default when the model is compiled: 4 sizes, 4 graphs."""


def _check_fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"ProgressiveResizing {name}={value!r} must be a fraction in [0, 1]; for example {name}=0.5 "
            f"(the defaults are initial_scale=0.5, finetune_fraction=0.2)."
        )


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"ProgressiveResizing mode={mode!r} is unknown; expected one of {list(_MODES)}.")


def _check_buckets(name: str, buckets: int | None, zero: bool) -> None:
    if buckets is None or (type(buckets) is int and (buckets >= 2 or (zero and buckets == 0))):
        return
    allowed = "None, 0 (continuous, compiled or not) or" if zero else "None (continuous) or"
    raise ValueError(
        f"{name}={buckets!r} must be {allowed} an int of at least 2: how many scales the schedule steps through, "
        "from initial_scale to 1 (e.g. 4)."
    )


def _check_size_multiple(size_multiple: int) -> None:
    if isinstance(size_multiple, bool) or not isinstance(size_multiple, int) or size_multiple < 1:
        raise ValueError(
            f"size_multiple={size_multiple!r} must be a positive integer: 1 (the default) keeps "
            "int(length * scale_factor), 2 rounds that down to an even number of pixels."
        )


def scaled_size(length: int, scale_factor: float, size_multiple: int = 1) -> int:
    """The side length ``length`` shrinks to at ``scale_factor``: ``int(length * scale_factor)``, rounded down.

    This is the seed's ``H * scale_factor`` rounded down as the original did (``int(H * scale)``), kept to at least
    1 pixel. With ``size_multiple`` above 1 the size is rounded down further to a multiple of it (at least
    ``size_multiple``, at most ``length``): ``2`` gives even sizes, so a schedule that grows the size every batch
    produces half as many distinct shapes, each of which costs a cuDNN autotune (``cudnn.benchmark``) or a
    recompilation (a model compiled with static shapes); it does not make a step faster per pixel (see the method
    card). A scale factor of 1 or more keeps ``length`` exactly.

    Args:
        length: The full side length, in pixels.
        scale_factor: The scale, in [0, 1].
        size_multiple: Round the size down to a multiple of this (1: no further rounding).

    Returns:
        int: The new side length.

    Raises:
        ValueError: If ``size_multiple`` is not a positive integer.

    Example:
        >>> [scaled_size(32, s) for s in (0.5, 0.55, 0.6, 0.99, 1.0)]
        [16, 17, 19, 31, 32]
        >>> [scaled_size(32, s, size_multiple=2) for s in (0.5, 0.55, 0.6, 0.99, 1.0)]
        [16, 16, 18, 30, 32]
    """
    _check_size_multiple(size_multiple)
    if scale_factor >= 1.0:
        return length
    size = int(length * scale_factor)
    if size_multiple > 1:
        size = size - size % size_multiple
    return min(length, max(size_multiple, size, 1))


def resize_scale(
    elapsed_fraction: float, initial_scale: float, finetune_fraction: float, buckets: int | None = None
) -> float:
    """The scale factor at a point of the run: linear from ``initial_scale`` to 1, then 1 for the finetuning part.

    ``initial_scale + (1 - initial_scale) * min(1, elapsed_fraction / (1 - finetune_fraction))``: the scale reaches
    1 when ``1 - finetune_fraction`` of training has run and stays there. With ``finetune_fraction = 1`` the whole run
    is at full size. With ``buckets`` (k >= 2) the scale steps through k evenly spaced values instead,
    ``initial_scale + (1 - initial_scale) * j / (k - 1)``: the linear scale rounded down to the nearest of them, so
    a run sees at most k image sizes (a compiled model compiles a graph per size) and never larger images than the
    linear schedule's.

    Args:
        elapsed_fraction: The fraction of training done, in [0, 1] (``state.get_elapsed_duration()``).
        initial_scale: The scale at the start of training, in [0, 1].
        finetune_fraction: The fraction of training at the end that runs at full size, in [0, 1].
        buckets: None (the default): the linear schedule; an int k >= 2: k steps.

    Returns:
        float: The scale factor, in ``[initial_scale, 1]``.

    Example:
        >>> [resize_scale(e, initial_scale=0.5, finetune_fraction=0.2) for e in (0.0, 0.4, 0.8, 0.9)]
        [0.5, 0.75, 1.0, 1.0]
        >>> [round(resize_scale(e, 0.5, 0.2, buckets=3), 3) for e in (0.0, 0.3, 0.4, 0.79, 0.8)]
        [0.5, 0.5, 0.75, 0.75, 1.0]
    """
    _check_fraction("initial_scale", initial_scale)
    _check_fraction("finetune_fraction", finetune_fraction)
    _check_buckets("buckets", buckets, zero=False)
    if finetune_fraction >= 1.0:
        return 1.0
    progress = min(1.0, max(0.0, elapsed_fraction) / (1.0 - finetune_fraction))
    if buckets is not None:
        steps = buckets - 1
        # A tiny tolerance: 0.4 / 0.8 * 2 is 0.9999999999999999 in floating point, and must be step 1.
        progress = min(steps, int(progress * steps + 1e-9)) / steps
    return initial_scale + (1.0 - initial_scale) * progress


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    if x.is_floating_point():
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    # Integer targets (class masks) cannot be averaged: nearest keeps them valid class indices.
    squeeze = x.ndim == 3  # (N, H, W) masks: give them a channel dimension for interpolate
    resized = F.interpolate((x.unsqueeze(1) if squeeze else x).float(), size=size, mode="nearest")
    resized = resized.to(x.dtype)
    return resized.squeeze(1) if squeeze else resized


def resize_inputs(
    X: torch.Tensor,
    y: torch.Tensor,
    scale_factor: float,
    mode: str = "resize",
    resize_targets: bool = False,
    generator: torch.Generator | None = None,
    size_multiple: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resize inputs and optionally outputs by cropping or interpolating.

    The new height and width are :func:`scaled_size` of the old ones: ``int(H * scale_factor)`` and
    ``int(W * scale_factor)`` (at least 1 pixel), or those rounded down to a multiple of ``size_multiple``. ``'resize'`` is bilinear interpolation (``F.interpolate(mode='bilinear', align_corners=False)``,
    no antialiasing). ``'crop'`` takes one random window of the new size, at the same place in every sample of the
    batch, with its corner drawn from ``generator``. With ``resize_targets``, targets of shape ``(N, C, H', W')`` or
    ``(N, H', W')`` (segmentation) change the same way: the same window (mapped proportionally if their size differs
    from the inputs'), or bilinear interpolation for float targets and nearest for integer class masks.

    Args:
        X: Input tensor of shape ``(N, C, H, W)``.
        y: Targets; resized too if ``resize_targets``, else returned as is.
        scale_factor: Scaling coefficient for the height and width, in [0, 1]. 1.0 keeps the original size; sides
            never shrink below 1 pixel.
        mode: ``'resize'`` (bilinear interpolation) or ``'crop'`` (a random crop).
        resize_targets: Whether to resize the targets ``y`` as well.
        generator: The random generator for the crop's position (``'crop'`` only). Default: torch's global one.
        size_multiple: Round the new sizes down to a multiple of this; 2 gives even sizes (see :func:`scaled_size`).
            Default: 1, the seed's ``int(H * scale_factor)``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: ``X_sized`` of shape ``(N, C, H * scale_factor, W * scale_factor)``
        (rounded down as above) and ``y_sized``, the resized targets if ``resize_targets``, else ``y``.

    Raises:
        ValueError: If ``mode`` is unknown, ``scale_factor`` is outside [0, 1], ``size_multiple`` is not a positive
            integer, or ``X`` (or a resized ``y``) does not have the ``(N, C, H, W)`` layout.

    Example:
        >>> X, y = torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,))
        >>> X_small, y_small = resize_inputs(X, y, scale_factor=0.5, mode="resize")
        >>> X_small.shape, y_small is y
        (torch.Size([4, 3, 16, 16]), True)
        >>> X_crop, _ = resize_inputs(X, y, 0.5, mode="crop", generator=torch.Generator().manual_seed(0))
        >>> X_crop.shape
        torch.Size([4, 3, 16, 16])
        >>> resize_inputs(X, y, 0.55)[0].shape, resize_inputs(X, y, 0.55, size_multiple=2)[0].shape
        (torch.Size([4, 3, 17, 17]), torch.Size([4, 3, 16, 16]))
    """
    _check_mode(mode)
    _check_size_multiple(size_multiple)
    if isinstance(scale_factor, bool) or not isinstance(scale_factor, (int, float)) or not 0.0 <= scale_factor <= 1.0:
        raise ValueError(
            f"resize_inputs scale_factor={scale_factor!r} must be in [0, 1]; 1.0 keeps the size, 0.5 halves it."
        )
    if X.ndim != 4:
        raise ValueError(
            f"resize_inputs expects X of shape (N, C, H, W), got shape {tuple(X.shape)}; progressive resizing works "
            "on batches of images."
        )
    height, width = X.shape[-2:]
    new_height, new_width = (
        scaled_size(height, scale_factor, size_multiple),
        scaled_size(width, scale_factor, size_multiple),
    )
    if (new_height, new_width) == (height, width):
        return X, y
    if resize_targets and y.ndim not in (3, 4):
        raise ValueError(
            f"resize_inputs with resize_targets=True expects y of shape (N, C, H, W) or (N, H, W), got shape "
            f"{tuple(y.shape)}; set resize_targets=False for per-sample labels."
        )

    if mode == "resize":
        X_sized = _resize(X, (new_height, new_width))
        if not resize_targets:
            return X_sized, y
        y_size = (
            scaled_size(y.shape[-2], scale_factor, size_multiple),
            scaled_size(y.shape[-1], scale_factor, size_multiple),
        )
        return X_sized, _resize(y, y_size)

    # One corner for the whole batch: (top, left) uniform over the valid positions.
    top = int(torch.randint(0, height - new_height + 1, (1,), generator=generator))
    left = int(torch.randint(0, width - new_width + 1, (1,), generator=generator))
    X_sized = X[..., top : top + new_height, left : left + new_width]
    if not resize_targets:
        return X_sized, y
    y_height, y_width = y.shape[-2:]
    if (y_height, y_width) == (height, width):
        return X_sized, y[..., top : top + new_height, left : left + new_width]
    # Targets at another resolution: the window at the same relative position and of the same relative size.
    y_new_height = scaled_size(y_height, scale_factor, size_multiple)
    y_new_width = scaled_size(y_width, scale_factor, size_multiple)
    y_top = min(round(top * y_height / height), y_height - y_new_height)
    y_left = min(round(left * y_width / width), y_width - y_new_width)
    return X_sized, y[..., y_top : y_top + y_new_height, y_left : y_left + y_new_width]


class ProgressiveResizing(Algorithm):
    """Apply Fastai's progressive resizing data augmentation to speed up training.

    Progressive resizing initially reduces input resolution to speed up early training. Throughout training, the
    downsampling factor is gradually increased, yielding larger inputs up to the original input size. A final
    finetuning period is then run to finetune the model using the full-sized inputs.

    The scale follows :func:`resize_scale` of ``state.get_elapsed_duration()``, so it grows every batch (not in
    epoch-sized jumps), or, with ``scale_buckets``, in that many steps; each batch is then shrunk with
    :func:`resize_inputs` to ``int(H * scale)`` by ``int(W * scale)`` (or a multiple of ``size_multiple``, see
    :func:`scaled_size`). Runs on ``Event.AFTER_DATALOADER`` and draws crop positions from ``state.rng``. Logs
    ``progressive_resizing/height``, ``/width`` and ``/scale_factor`` every batch. Needs ``(inputs, targets)``
    batches of images ``(N, C, H, W)``. The model must accept inputs of varying size (global pooling before the
    classifier).

    Args:
        mode: ``'resize'`` (bilinear interpolation) or ``'crop'`` (a random crop). Default: ``'resize'``.
        initial_scale: The scale factor at the start of training, in [0, 1]. Default: 0.5.
        finetune_fraction: The fraction of training at the end that runs on full-size inputs, in [0, 1]. Default: 0.2.
        resize_targets: Whether to resize the targets too (segmentation). Default: False.
        size_multiple: Round the sizes down to a multiple of this; 2 gives even sizes, so half as many distinct
            shapes over the run (fewer cuDNN autotunes or static-shape recompilations). Default: 1 (the seed's
            ``int(H * scale)``).
        scale_buckets: How many scales the schedule steps through (see :func:`resize_scale`). None (the default):
            the linear schedule of the original Composer API when the model runs eagerly, and
            :data:`COMPILED_SCALE_BUCKETS` (4) steps when it is compiled (``Trainer(compile_config=...)``), so that a
            compiled model compiles at most 4 graphs for its training sizes; an int k >= 2: k steps, compiled or not
            (train eagerly as a compiled run does); 0: the linear schedule, compiled or not. See the method card.

    Example:
        >>> from composer.core import Event, Logger
        >>> algorithm = ProgressiveResizing(initial_scale=0.5, finetune_fraction=0.2)
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> state.batch = (torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,)))
        >>> algorithm.apply(Event.AFTER_DATALOADER, state, Logger(state))
        >>> state.batch[0].shape  # at the start of training the scale is 0.5
        torch.Size([4, 3, 16, 16])
    """

    def __init__(
        self,
        mode: str = "resize",
        initial_scale: float = 0.5,
        finetune_fraction: float = 0.2,
        resize_targets: bool = False,
        size_multiple: int = 1,
        scale_buckets: int | None = None,
    ) -> None:
        _check_mode(mode)
        _check_fraction("initial_scale", initial_scale)
        _check_fraction("finetune_fraction", finetune_fraction)
        _check_size_multiple(size_multiple)
        _check_buckets("scale_buckets", scale_buckets, zero=True)
        self.mode = mode
        self.initial_scale = initial_scale
        self.finetune_fraction = finetune_fraction
        self.resize_targets = resize_targets
        self.size_multiple = size_multiple
        self.scale_buckets = scale_buckets

    def match(self, event: Event, state: State) -> bool:
        """Runs on every training batch, after the dataloader."""
        return event == Event.AFTER_DATALOADER

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Replaces ``state.batch`` with its resized version."""
        buckets = self.scale_buckets
        if buckets is None:
            buckets = COMPILED_SCALE_BUCKETS if _is_compiled(state.model) else 0
        elapsed = state.get_elapsed_duration().value
        scale = resize_scale(elapsed, self.initial_scale, self.finetune_fraction, buckets=buckets or None)
        X, y = state.batch_pair
        X, y = resize_inputs(
            X, y, scale, self.mode, self.resize_targets, generator=state.rng, size_multiple=self.size_multiple
        )
        state.batch_pair = (X, y)
        logger.metric_batch(
            {
                "progressive_resizing/height": X.shape[-2],
                "progressive_resizing/width": X.shape[-1],
                "progressive_resizing/scale_factor": scale,
            }
        )


def _is_compiled(model: torch.nn.Module) -> bool:
    """Whether ``model`` was compiled in place (``nn.Module.compile``, as ``Trainer(compile_config=...)`` does),
    inside DistributedDataParallel or not."""
    while isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        model = model.module
    return getattr(model, "_compiled_call_impl", None) is not None


ProgressiveResizingHparams = hparams_for(ProgressiveResizing)
"""See :class:`ProgressiveResizing`; the fields are its arguments (YAML key ``progressive_resizing``)."""
