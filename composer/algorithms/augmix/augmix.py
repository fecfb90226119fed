"""AugMix: mix several randomly augmented copies of an image with the image itself.

:func:`augment_and_mix` augments one image; :class:`AugmentAndMixTransform` wraps it as a transform for a torchvision
pipeline; :class:`AugMix` adds that transform to the training dataset when training starts, so that it runs in the
DataLoader workers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from composer.algorithms.utils.augmentation_primitives import AugmentationOp, check_level
from composer.algorithms.utils.augmentation_sets import apply_chain, augmentation_sets, choose, get_augmentation_set
from composer.algorithms.utils.dataset_transform import add_vision_dataset_transform
from composer.algorithms.utils.pil_image import as_pil, require_pil
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["AugMix", "AugMixHparams", "AugmentAndMixTransform", "augment_and_mix", "augmix_image"]

# With depth=-1, each chain draws its length uniformly from 1 to this.
_MAX_RANDOM_DEPTH = 3


def _check_augmix(severity: Any, depth: Any, width: Any, alpha: Any) -> None:
    check_level(severity, "severity")
    if isinstance(depth, bool) or not isinstance(depth, int) or (depth != -1 and depth < 1):
        raise ValueError(
            f"depth={depth!r} must be a positive int (operations per chain) or -1 (a random number of operations, "
            "1 to 3, for each chain)."
        )
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width={width!r} must be a positive int: the number of augmented chains to mix (e.g. 3).")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < math.inf:
        raise ValueError(
            f"alpha={alpha!r} must be a finite number above 0: the Dirichlet and Beta pseudocount (1.0 mixes "
            "uniformly at random; smaller values favour a single chain and either end of the blend)."
        )


def augment_and_mix(
    img: Image | torch.Tensor | None = None,
    severity: int = 3,
    depth: int = -1,
    width: int = 3,
    alpha: float = 1.0,
    augmentation_set: str | Sequence[AugmentationOp] = augmentation_sets["all"],
    generator: torch.Generator | None = None,
) -> Any:
    """Applies AugMix (Hendrycks et al.) data augmentation to an image. See :class:`AugMix` for details.

    Blends the image with a weighted mix of ``width`` chains of random operations (formula: ``README.md``).

    The random draws and their order are listed in the method card (``README.md``). Pass a seeded generator for
    reproducible output; in DataLoader workers leave it None, so that each worker draws from its own seeded default
    generator.

    Introduced in `AugMix: A Simple Data Processing Method to Improve Robustness and Uncertainty
    <https://arxiv.org/abs/1912.02781>`_ (Hendrycks et al. 2020); only the augmentation, not the consistency loss.

    Args:
        img: A PIL image of mode 'RGB' or 'L', or a tensor (3, H, W) or (1, H, W): uint8, or float in [0, 1] as
            ``ToTensor`` gives (quantised to 256 levels for the operations). Required.
        severity: Severity of the operations, 0 (none) to 10 (most severe).
        depth: Operations per chain; -1 draws it uniformly from 1 to 3 for each chain.
        width: Number of augmented chains to mix.
        alpha: Pseudocount of the Dirichlet and Beta distributions, above 0. Higher values mix more evenly; near 0
            the mix approaches a single chain and the blend either the original or the mix.
        augmentation_set: A set name ('all', 'safe', 'original' or the long names 'augmentations_all',
            'augmentations_corruption_safe', 'augmentations_original'), or a sequence of operations
            ``op(pil_img, level) -> pil_img``. Default: the 13 operations of 'all'.
        generator: Source of randomness; torch's default generator if None.

    Returns:
        PIL.Image.Image | torch.Tensor: The augmented image, of the input's kind, mode or dtype, size and device.

    Raises:
        ValueError: If an argument is out of range, or the image's mode, dtype, shape or values are not those above.
        TypeError: If ``img`` is neither a PIL image nor a tensor.

    Example:
        >>> from PIL import Image
        >>> img = Image.new("RGB", (32, 32), (40, 120, 200))
        >>> out = augment_and_mix(img, severity=3, width=3, generator=torch.Generator().manual_seed(0))
        >>> out.mode, out.size
        ('RGB', (32, 32))
        >>> augment_and_mix(img, generator=torch.Generator().manual_seed(0)) == out  # same seed, same image
        True
    """
    _check_augmix(severity, depth, width, alpha)
    ops = get_augmentation_set(augmentation_set)
    pil_img, restore = as_pil(img, "augment_and_mix")
    level = float(severity)

    gammas = torch._standard_gamma(_concentration(width, float(alpha)), generator=generator)
    chain_gammas, blend_gammas = gammas[:width].tolist(), gammas[width:].tolist()
    chain_total, blend_total = sum(chain_gammas), sum(blend_gammas)
    # A tiny alpha can underflow every draw to 0: fall back to even weights rather than divide by zero.
    weights = [g / chain_total for g in chain_gammas] if chain_total > 0 else [1.0 / width] * width
    mix_weight = blend_gammas[0] / blend_total if blend_total > 0 else 0.5

    max_depth = depth if depth > 0 else _MAX_RANDOM_DEPTH
    block = 1 + 3 * max_depth
    uniforms = torch.rand(width * block, generator=generator).tolist()

    # (1 - m) * original + sum_i (m * w_i) * chain_i, accumulated in float32; (H, W) or (H, W, 3).
    mixed = np.array(pil_img, dtype=np.float32)
    mixed *= 1.0 - mix_weight
    for chain_index, weight in enumerate(weights):
        u = uniforms[chain_index * block : (chain_index + 1) * block]
        chain_depth = depth if depth > 0 else 1 + choose(u[0], _MAX_RANDOM_DEPTH)
        chain = apply_chain(pil_img, ops, level, u[1 : 1 + 3 * chain_depth])
        mixed += np.asarray(chain, dtype=np.float32) * np.float32(mix_weight * weight)
    # A convex combination of values in [0, 255] stays in [0, 255]; adding 0.5 and truncating rounds to nearest.
    mixed += 0.5
    return restore(mixed.astype(np.uint8))


@functools.lru_cache(maxsize=8)
def _concentration(width: int, alpha: float) -> torch.Tensor:
    # (width + 2,) float64, all alpha: width Dirichlet components, then the two of the Beta. Read-only, so shareable.
    return torch.full((width + 2,), alpha, dtype=torch.float64)


augmix_image = augment_and_mix
"""Alias of :func:`augment_and_mix` (the name of the functional form in Composer 0.5): the same function, so it takes PIL
images, uint8 tensors and float tensors in [0, 1] alike, and returns the kind it was given."""


class AugmentAndMixTransform:
    """:func:`augment_and_mix` as a transform for a torchvision pipeline (put it before ``ToTensor``).

    Args:
        severity: Severity of the operations, 0 (none) to 10 (most severe).
        depth: Operations per chain; -1 draws it uniformly from 1 to 3 for each chain.
        width: Number of augmented chains to mix.
        alpha: Pseudocount of the Dirichlet and Beta distributions, above 0.
        augmentation_set: A set name ('all', 'safe', 'original' or a long name) or a sequence of operations.
        generator: Source of randomness. Leave it None in a DataLoader: each worker then draws from its own default
            generator, which the DataLoader seeds (a generator given here would be copied into every worker, and the
            workers would repeat each other's augmentations).

    Example:
        >>> from PIL import Image
        >>> from torchvision import transforms
        >>> pipeline = transforms.Compose([AugmentAndMixTransform(severity=3), transforms.ToTensor()])
        >>> pipeline(Image.new("RGB", (8, 8))).shape
        torch.Size([3, 8, 8])
    """

    def __init__(
        self,
        severity: int = 3,
        depth: int = -1,
        width: int = 3,
        alpha: float = 1.0,
        augmentation_set: str | Sequence[AugmentationOp] = "all",
        generator: torch.Generator | None = None,
    ) -> None:
        require_pil("AugmentAndMixTransform")
        _check_augmix(severity, depth, width, alpha)
        self.severity = severity
        self.depth = depth
        self.width = width
        self.alpha = alpha
        self.augmentation_set = augmentation_set
        self.generator = generator
        self._ops = get_augmentation_set(augmentation_set)

    def __call__(self, img: Image | torch.Tensor) -> Any:
        return augment_and_mix(
            img, self.severity, self.depth, self.width, self.alpha, self._ops, generator=self.generator
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(severity={self.severity}, depth={self.depth}, width={self.width}, "
            f"alpha={self.alpha}, augmentation_set={self.augmentation_set!r})"
        )


class AugMix(Algorithm):
    """AugMix trains on each image blended with a random mix of ``width`` chains of ``depth`` augmentations of it.

    The weights of the augmented images are drawn from ``Dirichlet(alpha, ..., alpha)``, the blend with the original
    from ``Beta(alpha, alpha)``. At ``FIT_START`` it adds an :class:`AugmentAndMixTransform` to the training
    dataset's ``transform`` (before ``ToTensor``), so that the DataLoader workers augment the images, each from its
    own seeded generator; the dataset must have a ``transform`` applied to PIL images or uint8 ``(C, H, W)``
    tensors, as torchvision's and :mod:`composer.datasets`' do (details in the method card, ``README.md``).

    Introduced in `AugMix: A Simple Data Processing Method to Improve Robustness and Uncertainty
    <https://arxiv.org/abs/1912.02781>`_ (Hendrycks et al. 2020).

    Args:
        severity: Severity of augmentations; ranges from 0 (no augmentation) to 10 (most severe).
        depth: Number of augmentations per sequence. -1 enables stochastic depth sampled uniformly from [1, 3].
        width: Number of augmentation sequences.
        alpha: Pseudocount for Beta and Dirichlet distributions, above 0; higher values mix more evenly.
        augmentation_set: 'all' (all 13 operations), 'safe' (without those that overlap ImageNet-C/CIFAR-10-C
            corruptions) or 'original' (as in the AugMix repository), or their long names ('augmentations_all', ...).

    Example:
        >>> from composer import Trainer
        >>> from torchvision import transforms
        >>> from torchvision.datasets import FakeData
        >>> from composer.models import ComposerClassifier
        >>> dataset = FakeData(8, (3, 8, 8), num_classes=2, transform=transforms.Compose([transforms.ToTensor()]))
        >>> model = ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2)), 2)
        >>> trainer = Trainer(
        ...     model=model,
        ...     train_dataloader=torch.utils.data.DataLoader(dataset, batch_size=4),
        ...     max_duration="1ep",
        ...     algorithms=[AugMix(severity=3, width=3)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
        >>> dataset.transform
        Compose(
            AugmentAndMixTransform(severity=3, depth=-1, width=3, alpha=1.0, augmentation_set='all')
            ToTensor()
        )
    """

    def __init__(
        self, severity: int = 3, depth: int = -1, width: int = 3, alpha: float = 1.0, augmentation_set: str = "all"
    ) -> None:
        self.severity = severity
        self.depth = depth
        self.width = width
        self.alpha = alpha
        self.augmentation_set = augmentation_set
        self._transform = AugmentAndMixTransform(severity, depth, width, alpha, augmentation_set)

    def match(self, event: Event, state: State) -> bool:
        """Runs when training starts."""
        return event == Event.FIT_START

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Adds the AugMix transform to the training dataset's transform, unless it is already there."""
        add_vision_dataset_transform(getattr(state.train_dataloader, "dataset", None), self._transform)


AugMixHparams = hparams_for(AugMix)
"""See :class:`AugMix`; the fields are its arguments (YAML key ``augmix``)."""
