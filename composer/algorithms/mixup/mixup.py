"""MixUp: train on convex combinations of pairs of examples and of their targets.

:func:`mixup_batch` mixes a batch with a permuted copy of itself (inputs and dense targets, with the same weight);
:func:`gen_interpolation_lambda` draws that weight from a Beta distribution. :class:`MixUp` does both inside the
Trainer, reading the class count from the model's outputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from composer.algorithms.mixup.batch_mixing import (
    MixingAlgorithm,
    check_indices,
    check_lambda,
    mix_targets,
    random_permutation,
)
from composer.core.hparams import hparams_for

__all__ = ["MixUp", "MixUpHparams", "check_alpha", "gen_interpolation_lambda", "mixup_batch", "mixup_inputs"]


def check_alpha(alpha: Any, method: str = "MixUp") -> None:
    """Raises ValueError naming ``method`` unless ``alpha`` is a finite number >= 0 (MixUp's and CutMix's check)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha < math.inf:
        raise ValueError(
            f"{method} alpha={alpha!r} must be a finite number >= 0: the pseudocount of the Beta(alpha, alpha) "
            "distribution of the mixing weight (0 turns mixing off). Typical values: 0.2 for MixUp, 1.0 for CutMix."
        )


def gen_interpolation_lambda(alpha: float, generator: torch.Generator | None = None) -> float:
    """Draws a mixing weight from ``Beta(alpha, alpha)``.

    As ``alpha`` grows the weights concentrate around 0.5 (both samples count equally); as it approaches 0 they
    concentrate at 0 and 1 (one sample dominates). ``alpha=0`` returns 1.0: no mixing at all.

    Args:
        alpha: The pseudocount of the Beta distribution, at least 0.
        generator: Where the randomness comes from; default: torch's default generator. The draw is reproducible
            from the generator's state.

    Returns:
        float: The weight, in ``[0, 1]``.

    Raises:
        ValueError: If ``alpha`` is negative or not finite.

    Example:
        >>> lam = gen_interpolation_lambda(0.2, torch.Generator().manual_seed(0))
        >>> 0.0 <= lam <= 1.0
        True
        >>> lam == gen_interpolation_lambda(0.2, torch.Generator().manual_seed(0))
        True
        >>> gen_interpolation_lambda(0.0)
        1.0
    """
    check_alpha(alpha)
    if alpha == 0:
        return 1.0
    # torch has no Beta sampler that takes a generator: seed a local NumPy generator from the torch one instead, so
    # the draw still comes from (and advances) the generator it was given.
    device = generator.device if generator is not None else torch.device("cpu")
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=device).item())
    return float(np.random.default_rng(seed).beta(alpha, alpha))


def mixup_inputs(x: torch.Tensor, interpolation_lambda: float, indices: torch.Tensor) -> torch.Tensor:
    """Returns ``lambda * x + (1 - lambda) * x[indices]``: each sample blended with its partner.

    This is the input half of :func:`mixup_batch`, for when the targets are mixed later (see :class:`MixUp`).

    Args:
        x: A floating tensor of shape ``(B, d1, ..., dn)``.
        interpolation_lambda: The weight of each sample itself, in ``[0, 1]``.
        indices: The partner of each sample, an integer tensor of shape ``(B,)``.

    Returns:
        torch.Tensor: The mixed inputs, the shape and dtype of ``x``.

    Example:
        >>> mixup_inputs(torch.tensor([[0.0], [4.0]]), 0.75, torch.tensor([1, 0]))
        tensor([[1.],
                [3.]])
    """
    check_lambda(interpolation_lambda)
    if not isinstance(x, torch.Tensor) or x.ndim < 1:
        raise ValueError(f"x must be a tensor of shape (B, d1, ..., dn) with a batch dimension, got {x!r}.")
    if not x.is_floating_point():
        raise TypeError(
            f"MixUp blends inputs, which needs a floating tensor, but x has dtype {x.dtype}. To fix, convert it "
            "first, for example x.float() / 255 for uint8 images."
        )
    check_indices(indices, x.shape[0])
    # lerp(partner, own, lam) = lam * own + (1 - lam) * partner, in one pass over the gathered partners.
    return torch.lerp(x[indices.to(x.device)], x, float(interpolation_lambda))


def mixup_batch(
    x: torch.Tensor,
    y: torch.Tensor,
    interpolation_lambda: float,
    n_classes: int,
    indices: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Create new samples using convex combinations of pairs of samples.

    Each sample ``i`` is blended with sample ``perm[i]`` of the same batch: ``x_mix = lambda * x + (1 - lambda) *
    x[perm]`` and ``y_mix = lambda * one_hot(y) + (1 - lambda) * one_hot(y)[perm]``, with the same ``lambda`` for
    every sample, inputs and targets alike. ``lambda`` should be drawn from ``Beta(alpha, alpha)`` for some
    ``alpha > 0`` (:func:`gen_interpolation_lambda`). The targets come back dense, so the loss must accept dense
    targets, as :func:`~composer.models.loss.soft_cross_entropy` does.

    Introduced in `mixup: Beyond Empirical Risk Minimization <https://arxiv.org/abs/1710.09412>`_ (Zhang et al.
    2018).

    Args:
        x: Input tensor of shape ``(B, d1, d2, ..., dn)``, B is the batch size, d1-dn are feature dimensions.
        y: Target tensor: class indices (an integer tensor of shape ``(B, f1, ..., fm)``) or dense targets (a floating
            tensor of shape ``(B, n_classes, f1, ..., fm)``).
        interpolation_lambda: The weight of each sample itself, in ``[0, 1]``.
        n_classes: The total number of classes.
        indices: The permutation of the batch indices ``0..B-1`` to pair samples with; default: a random one from
            ``generator``. Pass it to mix without randomness.
        generator: Where the random permutation comes from; default: torch's default generator.

    Returns:
        tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ``(x_mix, y_mix, perm)``: the batch of inputs after mixup,
        the dense mixed targets of shape ``(B, n_classes, f1, ..., fm)``, and the permutation used.

    Raises:
        ValueError: If ``interpolation_lambda`` is outside ``[0, 1]``, ``n_classes`` is not positive, or the shapes of
            ``x``, ``y`` and ``indices`` disagree.

    Example:
        >>> from composer import functional as CF
        >>> X, y = torch.randn(8, 3, 4, 4), torch.randint(0, 10, (8,))
        >>> lam = CF.gen_interpolation_lambda(alpha=0.2)
        >>> X_mix, y_mix, perm = CF.mixup_batch(X, y, lam, n_classes=10)
        >>> X_mix.shape, y_mix.shape
        (torch.Size([8, 3, 4, 4]), torch.Size([8, 10]))
        >>> torch.allclose(y_mix.sum(dim=1), torch.ones(8))
        True
    """
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.ndim < 1 or y.ndim < 1:
        raise ValueError(
            "mixup_batch needs tensors x of shape (B, ...) and y of shape (B, ...) with a batch dimension."
        )
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and y must hold the same number of samples, got x of shape {tuple(x.shape)} and y of shape "
            f"{tuple(y.shape)}."
        )
    perm = random_permutation(x.shape[0], generator, x.device) if indices is None else indices
    return mixup_inputs(x, interpolation_lambda, perm), mix_targets(y, interpolation_lambda, n_classes, perm), perm


class MixUp(MixingAlgorithm):
    """MixUp trains the network on convex combinations of pairs of examples and targets rather than individual examples and targets.

    This is done by taking a convex combination of a given batch X with a randomly permuted copy of X. The mixing
    coefficient is drawn from a Beta(alpha, alpha) distribution. Training in this fashion reduces generalization
    error.

    The class count is read from the model's outputs, so MixUp works with any
    :class:`~composer.models.ComposerModel` whose loss accepts dense targets and whose batches are ``(inputs,
    targets)`` pairs: it mixes the whole batch's inputs at ``AFTER_DATALOADER`` and each microbatch's targets at
    ``AFTER_FORWARD`` (see :class:`~composer.algorithms.mixup.batch_mixing.MixingAlgorithm`). It composes with every
    other method in either order, CutMix and LabelSmoothing included; the method card (``README.md``) says how.

    Introduced in `mixup: Beyond Empirical Risk Minimization <https://arxiv.org/abs/1710.09412>`_ (Zhang et al.
    2018).

    Args:
        alpha: the psuedocount for the Beta distribution used to sample interpolation parameters. As alpha grows,
            the two samples in each pair tend to be weighted more equally. As alpha approaches 0 from above, the
            combination approaches only using one element of the pair.

    Example:
        >>> from composer import Trainer
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(
        ...     model=model,
        ...     train_dataloader=train_dataloader,
        ...     max_duration="1ep",
        ...     algorithms=[MixUp(alpha=0.2)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
    """

    def __init__(self, alpha: float) -> None:
        check_alpha(alpha)
        super().__init__()
        self.alpha = alpha

    def mix_inputs(self, inputs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Blends the batch with a permuted copy, with a weight drawn from ``Beta(alpha, alpha)``."""
        lam = gen_interpolation_lambda(self.alpha, generator)
        perm = random_permutation(inputs.shape[0], generator, inputs.device)
        return mixup_inputs(inputs, lam, perm), lam, perm


MixUpHparams = hparams_for(MixUp)
"""See :class:`MixUp`; the fields are its arguments (YAML key ``mixup``)."""
