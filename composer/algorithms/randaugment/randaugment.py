"""RandAugment: apply a short random sequence of image operations at one shared severity.

:func:`randaugment` augments one image; :class:`RandAugmentTransform` wraps it as a transform for a torchvision
pipeline; :class:`RandAugment` adds that transform to the training dataset when training starts, so that it runs in
the DataLoader workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from composer.algorithms.utils.augmentation_primitives import AugmentationOp, check_level
from composer.algorithms.utils.augmentation_sets import apply_chain, augmentation_sets, get_augmentation_set
from composer.algorithms.utils.dataset_transform import add_vision_dataset_transform
from composer.algorithms.utils.pil_image import as_pil, require_pil
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["RandAugment", "RandAugmentHparams", "RandAugmentTransform", "randaugment", "randaugment_image"]


def _check_randaugment(severity: Any, depth: Any) -> None:
    check_level(severity, "severity")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(
            f"depth={depth!r} must be an int of at least 0: the number of operations applied to each image "
            "(N in the paper; 2 is typical)."
        )


def randaugment(
    img: Image | torch.Tensor | None = None,
    severity: int = 9,
    depth: int = 2,
    augmentation_set: str | Sequence[AugmentationOp] = augmentation_sets["all"],
    generator: torch.Generator | None = None,
) -> Any:
    """Randomly applies a sequence of image data augmentations (Cubuk et al. 2019). See :class:`RandAugment`.

    Applies ``depth`` operations in sequence, each chosen uniformly, with replacement, from ``augmentation_set`` and
    applied at ``severity`` (each operation draws its magnitude from ``[0.1, severity]`` and its sign, as described
    in :mod:`~composer.algorithms.utils.augmentation_primitives`).

    Pass a seeded generator for reproducible output (the draws are listed in the method card, ``README.md``); in
    DataLoader workers leave it None, so that each worker draws from its own seeded default generator.

    Introduced in `RandAugment: Practical automated data augmentation with a reduced search space
    <https://arxiv.org/abs/1909.13719>`_ (Cubuk et al. 2020).

    Args:
        img: A PIL image of mode 'RGB' or 'L', or a tensor (3, H, W) or (1, H, W): uint8, or float in [0, 1] as
            ``ToTensor`` gives (quantised to 256 levels for the operations). Required.
        severity: Severity of the operations, 0 to 10 (M in the paper).
        depth: Number of operations applied in sequence (N in the paper); 0 returns the image unchanged.
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
        >>> out = randaugment(img, severity=9, depth=2, generator=torch.Generator().manual_seed(0))
        >>> out.mode, out.size
        ('RGB', (32, 32))
        >>> randaugment(img, depth=0) == img
        True
    """
    _check_randaugment(severity, depth)
    ops = get_augmentation_set(augmentation_set)
    pil_img, restore = as_pil(img, "randaugment")
    uniforms = torch.rand(3 * depth, generator=generator).tolist()
    augmented = apply_chain(pil_img, ops, float(severity), uniforms)
    # A PIL input gets the augmented PIL image itself; a tensor input a tensor of its own dtype and device.
    return restore(np.array(augmented)) if isinstance(img, torch.Tensor) else augmented


randaugment_image = randaugment
"""Alias of :func:`randaugment` (the name of the functional form in Composer 0.5): the same function, so it takes PIL
images, uint8 tensors and float tensors in [0, 1] alike, and returns the kind it was given."""


class RandAugmentTransform:
    """:func:`randaugment` as a transform for a torchvision pipeline (put it before ``ToTensor``).

    Args:
        severity: Severity of the operations, 0 to 10.
        depth: Number of operations applied in sequence.
        augmentation_set: A set name ('all', 'safe', 'original' or a long name) or a sequence of operations.
        generator: Source of randomness. Leave it None in a DataLoader: each worker then draws from its own default
            generator, which the DataLoader seeds (a generator given here would be copied into every worker, and the
            workers would repeat each other's augmentations).

    Example:
        >>> from PIL import Image
        >>> from torchvision import transforms
        >>> pipeline = transforms.Compose([RandAugmentTransform(severity=9, depth=2), transforms.ToTensor()])
        >>> pipeline(Image.new("RGB", (8, 8))).shape
        torch.Size([3, 8, 8])
    """

    def __init__(
        self,
        severity: int = 9,
        depth: int = 2,
        augmentation_set: str | Sequence[AugmentationOp] = "all",
        generator: torch.Generator | None = None,
    ) -> None:
        require_pil("RandAugmentTransform")
        _check_randaugment(severity, depth)
        self.severity = severity
        self.depth = depth
        self.augmentation_set = augmentation_set
        self.generator = generator
        self._ops = get_augmentation_set(augmentation_set)

    def __call__(self, img: Image | torch.Tensor) -> Any:
        return randaugment(img, self.severity, self.depth, self._ops, generator=self.generator)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(severity={self.severity}, depth={self.depth}, "
            f"augmentation_set={self.augmentation_set!r})"
        )


class RandAugment(Algorithm):
    """Randomly applies a sequence of image data augmentations (Cubuk et al. 2019).

    Each training image gets ``depth`` operations, each chosen uniformly at random from ``augmentation_set`` and
    applied at ``severity``. At ``FIT_START`` it adds a :class:`RandAugmentTransform` to the training dataset's
    ``transform`` (before ``ToTensor``), so that the DataLoader workers augment the images, each from its own seeded
    generator; the dataset must have a ``transform`` applied to PIL images or uint8 ``(C, H, W)`` tensors, as
    torchvision's and :mod:`composer.datasets`' do (details in the method card, ``README.md``).

    Introduced in `RandAugment: Practical automated data augmentation with a reduced search space
    <https://arxiv.org/abs/1909.13719>`_ (Cubuk et al. 2020).

    Args:
        severity: Severity of augmentation operators (between 1 to 10). M in the original paper. Default = 9.
        depth: Depth of augmentation chain. N in the original paper. Default = 2.
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
        ...     algorithms=[RandAugment(severity=9, depth=2)],
        ...     progress_bar=False,
        ... )
        >>> trainer.fit()
        >>> dataset.transform
        Compose(
            RandAugmentTransform(severity=9, depth=2, augmentation_set='all')
            ToTensor()
        )
    """

    def __init__(self, severity: int = 9, depth: int = 2, augmentation_set: str = "all") -> None:
        self.severity = severity
        self.depth = depth
        self.augmentation_set = augmentation_set
        self._transform = RandAugmentTransform(severity, depth, augmentation_set)

    def match(self, event: Event, state: State) -> bool:
        """Runs when training starts."""
        return event == Event.FIT_START

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Adds the RandAugment transform to the training dataset's transform, unless it is already there."""
        add_vision_dataset_transform(getattr(state.train_dataloader, "dataset", None), self._transform)


RandAugmentHparams = hparams_for(RandAugment)
"""See :class:`RandAugment`; the fields are its arguments (YAML key ``randaugment``)."""
