"""CutMix: paste a box from another image of the batch into each image, and mix the targets by the box's area.

:func:`cutmix_batch` does it to a batch with known class count; :func:`gen_cutmix_bbox` and :func:`cutmix_inputs` are
its two halves (draw the box, paste it). :class:`CutMix` runs them inside the Trainer, reading the class count from
the model's outputs.
"""

from __future__ import annotations

import math

import torch

from composer.algorithms.mixup.batch_mixing import (
    MixingAlgorithm,
    check_indices,
    check_lambda,
    mix_targets,
    random_permutation,
)
from composer.algorithms.mixup.mixup import check_alpha, gen_interpolation_lambda
from composer.core.hparams import hparams_for

__all__ = ["CutMix", "CutMixHparams", "cutmix_batch", "cutmix_inputs", "gen_cutmix_bbox"]

BBox = tuple[int, int, int, int]
"""A box ``(top, bottom, left, right)`` in pixels, half-open: rows ``top:bottom`` and columns ``left:right``."""


def gen_cutmix_bbox(
    height: int, width: int, interpolation_lambda: float, generator: torch.Generator | None = None
) -> BBox:
    """Draws a box covering about ``1 - lambda`` of an image, centred on a uniformly random pixel.

    The box's sides are ``int(height * sqrt(1 - lambda))`` by ``int(width * sqrt(1 - lambda))``; its centre is a
    uniformly random pixel, and the parts that fall outside the image are cut off (so boxes near the border are
    smaller: :func:`cutmix_inputs` weighs the targets by the area actually pasted).

    Args:
        height: The image height in pixels.
        width: The image width in pixels.
        interpolation_lambda: The intended fraction of each image to keep, in ``[0, 1]``.
        generator: Where the randomness comes from; default: torch's default generator.

    Returns:
        tuple[int, int, int, int]: ``(top, bottom, left, right)``: rows ``top:bottom`` and columns ``left:right``.

    Example:
        >>> top, bottom, left, right = gen_cutmix_bbox(32, 32, 0.75, torch.Generator().manual_seed(0))
        >>> bottom - top <= 16 and right - left <= 16
        True
    """
    check_lambda(interpolation_lambda)
    for name, size in (("height", height), ("width", width)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"gen_cutmix_bbox {name} must be a positive int (pixels), got {size!r}.")
    side = math.sqrt(1.0 - interpolation_lambda)
    cut_h, cut_w = int(height * side), int(width * side)
    device = generator.device if generator is not None else torch.device("cpu")
    centre_y = int(torch.randint(0, height, (1,), generator=generator, device=device).item())
    centre_x = int(torch.randint(0, width, (1,), generator=generator, device=device).item())
    top, left = centre_y - cut_h // 2, centre_x - cut_w // 2
    return (max(top, 0), min(top + cut_h, height), max(left, 0), min(left + cut_w, width))


def cutmix_inputs(x: torch.Tensor, bbox: BBox, indices: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Pastes the box ``bbox`` of each sample's partner ``x[indices[i]]`` into sample ``i``.

    The same box is used for the whole batch (one slice copy, no per-sample work). This is the input half of
    :func:`cutmix_batch`, for when the targets are mixed later (see :class:`CutMix`).

    Args:
        x: Images of shape ``(B, C, H, W)`` (any tensor ``(B, ..., H, W)`` works).
        bbox: ``(top, bottom, left, right)``, rows ``top:bottom`` and columns ``left:right``.
        indices: The partner of each sample, an integer tensor of shape ``(B,)``.

    Returns:
        tuple[torch.Tensor, float]: The mixed images (a new tensor), and the weight of each sample's own target:
        ``1 - box area / image area``.

    Example:
        >>> x = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4)])
        >>> x_mix, own_weight = cutmix_inputs(x, (0, 2, 0, 4), torch.tensor([1, 0]))
        >>> x_mix[0, 0]
        tensor([[1., 1., 1., 1.],
                [1., 1., 1., 1.],
                [0., 0., 0., 0.],
                [0., 0., 0., 0.]])
        >>> own_weight
        0.5
    """
    if not isinstance(x, torch.Tensor) or x.ndim < 3:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"CutMix x must be a batch of images of shape (B, C, H, W), got {got}. To fix, add the batch dimension "
            "(x.unsqueeze(0)) or the channel dimension."
        )
    height, width = x.shape[-2], x.shape[-1]
    check_indices(indices, x.shape[0])
    top, bottom, left, right = _check_bbox(bbox, height, width)
    mixed = x.clone()
    # Gather only the box of each partner: (B, C, bottom - top, right - left).
    mixed[..., top:bottom, left:right] = x[..., top:bottom, left:right][indices.to(x.device)]
    return mixed, 1.0 - (bottom - top) * (right - left) / (height * width)


def _check_bbox(bbox: BBox, height: int, width: int) -> BBox:
    ok = (
        isinstance(bbox, (tuple, list))
        and len(bbox) == 4
        and all(isinstance(v, int) and not isinstance(v, bool) for v in bbox)
        and 0 <= bbox[0] <= bbox[1] <= height
        and 0 <= bbox[2] <= bbox[3] <= width
    )
    if not ok:
        raise ValueError(
            f"bbox must be (top, bottom, left, right) in pixels with 0 <= top <= bottom <= {height} and "
            f"0 <= left <= right <= {width}, got {bbox!r}. Draw one with gen_cutmix_bbox(height, width, lambda)."
        )
    top, bottom, left, right = bbox
    return top, bottom, left, right


def cutmix_batch(
    x: torch.Tensor,
    y: torch.Tensor,
    n_classes: int,
    alpha: float = 1.0,
    interpolation_lambda: float | None = None,
    indices: torch.Tensor | None = None,
    bbox: BBox | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Replaces a box of each image with the same box of another image of the batch, and mixes the targets to match.

    ``lambda`` is drawn from ``Beta(alpha, alpha)`` (or given); a box of about ``1 - lambda`` of the image, centred on
    a random pixel and cut off at the borders, is taken from each sample's partner ``perm[i]``. The targets are
    mixed by the area actually pasted: ``y_mix = lam' * one_hot(y) + (1 - lam') * one_hot(y)[perm]`` with ``lam' = 1 -
    box area / image area``. The targets come back dense, so the loss must accept dense targets.

    Introduced in `CutMix: Regularization Strategy to Train Strong Classifiers with Localizable Features
    <https://arxiv.org/abs/1905.04899>`_ (Yun et al. 2019).

    Args:
        x: Images of shape ``(B, C, H, W)``.
        y: Class indices (an integer tensor of shape ``(B,)``) or dense targets (a floating tensor ``(B,
            n_classes)``).
        n_classes: The total number of classes.
        alpha: The pseudocount of the Beta distribution of ``lambda``; ignored if ``interpolation_lambda`` or
            ``bbox`` is given. Default: 1.0 (``lambda`` uniform on ``[0, 1]``).
        interpolation_lambda: The intended fraction of each image to keep, in ``[0, 1]``; default: drawn.
        indices: The permutation of the batch to take boxes from; default: a random one.
        bbox: The box ``(top, bottom, left, right)``; default: drawn with :func:`gen_cutmix_bbox`.
        generator: Where the randomness comes from; default: torch's default generator.

    Returns:
        tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ``(x_mix, y_mix, perm)``: the mixed images, the dense mixed
        targets ``(B, n_classes)`` and the permutation used.

    Raises:
        ValueError: If ``alpha`` is negative, ``interpolation_lambda`` is outside ``[0, 1]``, ``x`` is not a batch of
            images, or the shapes or the box do not fit.

    Example:
        >>> x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
        >>> x_mix, y_mix, perm = cutmix_batch(x, y, n_classes=10, bbox=(0, 8, 0, 16))
        >>> y_mix.shape, y_mix.max() <= 1.0
        (torch.Size([8, 10]), tensor(True))
        >>> torch.equal(x_mix[:, :, 8:], x[:, :, 8:]) and torch.equal(x_mix[:, :, :8], x[perm][:, :, :8])
        True
    """
    if not isinstance(x, torch.Tensor) or x.ndim < 3:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"CutMix x must be a batch of images of shape (B, C, H, W), got {got}.")
    if not isinstance(y, torch.Tensor) or y.ndim < 1 or y.shape[0] != x.shape[0]:
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"CutMix y must hold one target per image of x ({x.shape[0]}), got {got}.")
    perm = random_permutation(x.shape[0], generator, x.device) if indices is None else indices
    if bbox is None:
        if interpolation_lambda is None:
            interpolation_lambda = gen_interpolation_lambda(alpha, generator)
        bbox = gen_cutmix_bbox(x.shape[-2], x.shape[-1], interpolation_lambda, generator)
    x_mix, own_weight = cutmix_inputs(x, bbox, perm)
    return x_mix, mix_targets(y, own_weight, n_classes, perm), perm


class CutMix(MixingAlgorithm):
    """Pastes a box of another image of the batch into each image and mixes the targets by the box's area.

    A form of data augmentation that, like MixUp, trains on blends of two samples, but keeps every pixel natural:
    a box from the partner replaces the same box of each image. ``lambda`` is drawn from ``Beta(alpha, alpha)``,
    and the box covers about ``1 - lambda`` of the image (see :func:`cutmix_batch`). One box and one permutation per
    batch, drawn from ``state.rng``. Like :class:`~composer.algorithms.mixup.MixUp`, it reads the class count from
    the model's outputs, so it mixes the inputs of the whole batch at ``AFTER_DATALOADER`` (recording the step in the
    batch's :class:`~composer.algorithms.mixup.batch_mixing.MixedTargets`) and replaces each microbatch's record with
    dense mixed targets at ``AFTER_FORWARD``. The model's loss must accept dense targets. It composes with every other method in either order (see
    :class:`~composer.algorithms.mixup.batch_mixing.MixingAlgorithm`): LabelSmoothing smooths the mixed targets
    whichever comes first, and with MixUp both apply to every batch, in the order listed.

    Introduced in `CutMix: Regularization Strategy to Train Strong Classifiers with Localizable Features
    <https://arxiv.org/abs/1905.04899>`_ (Yun et al. 2019).

    Args:
        alpha: The pseudocount of the Beta distribution of ``lambda``, at least 0 (0 turns CutMix off). Default: 1.0,
            for which ``lambda`` is uniform on ``[0, 1]``.

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
        ...     algorithms=[CutMix(alpha=1.0)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    def __init__(self, alpha: float = 1.0) -> None:
        check_alpha(alpha, "CutMix")
        super().__init__()
        self.alpha = alpha

    def mix_inputs(self, inputs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Pastes a box of each image's partner into it; the targets keep the share of the image left uncovered."""
        lam = gen_interpolation_lambda(self.alpha, generator)
        bbox = gen_cutmix_bbox(inputs.shape[-2], inputs.shape[-1], lam, generator)
        perm = random_permutation(inputs.shape[0], generator, inputs.device)
        mixed, own_weight = cutmix_inputs(inputs, bbox, perm)
        return mixed, own_weight, perm


CutMixHparams = hparams_for(CutMix)
"""See :class:`CutMix`; the fields are its arguments (YAML key ``cutmix``)."""
