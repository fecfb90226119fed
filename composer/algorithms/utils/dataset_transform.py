"""Adds a per-sample transform to a vision dataset's pipeline, so that it runs in the DataLoader workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["add_vision_dataset_transform"]

# Transforms that turn a PIL image into a tensor: a PIL transform must run before them, a tensor transform after.
_TO_TENSOR_NAMES = frozenset({"ToTensor", "PILToTensor", "ToImage", "ToImageTensor"})


def _is_torchvision(transform: Any, names: frozenset[str] | set[str]) -> bool:
    # By class name and module, so that torchvision.transforms.v2 (a slow import) need not be imported to check.
    cls = type(transform)
    return cls.__name__ in names and cls.__module__.startswith("torchvision.")


def _is_to_tensor(step: Any) -> bool:
    # torchvision's conversions, and any step whose class says it converts images to (float) tensors, such as
    # composer.datasets' ToNormalizedTensor (the datasets package sits beside this one, so it is not imported).
    return _is_torchvision(step, _TO_TENSOR_NAMES) or getattr(type(step), "converts_to_tensor", False) is True


def _contains(pipeline: Any, transform: Any) -> bool:
    if pipeline is transform:
        return True
    steps = getattr(pipeline, "transforms", None) if _is_torchvision(pipeline, {"Compose"}) else None
    return isinstance(steps, list) and any(_contains(step, transform) for step in steps)


def add_vision_dataset_transform(
    dataset: Any, transform: Callable[[Any], Any], is_tensor_transform: bool = False
) -> bool:
    """Adds ``transform`` to ``dataset.transform``, before the conversion to a tensor (or after it), once.

    Per-sample augmentations such as AugMix and RandAugment belong in the dataset's transform pipeline: there they
    run in the DataLoader's worker processes, in parallel with training. A torchvision ``Compose`` gets
    ``transform`` just before its first conversion to a tensor (after it with ``is_tensor_transform``); the guide
    (``docs/guides/speedup-methods.md``) gives every case.

    A new ``Compose`` is built rather than the existing one changed, because the same pipeline object is often shared
    with the evaluation dataset, which must not be augmented. Adding is idempotent: if ``transform`` (this very
    object) is already in the pipeline, nothing changes, so a second ``fit`` does not add it twice.

    Args:
        dataset: A dataset with a ``transform`` attribute that it applies to each image (torchvision datasets do).
        transform: The callable to add.
        is_tensor_transform: Whether ``transform`` works on tensors (goes after the conversion) rather than on PIL
            images (goes before it).

    Returns:
        bool: True if ``transform`` was added, False if it was already there.

    Raises:
        ValueError: If ``dataset`` has no ``transform`` attribute.
        ImportError: If a new ``Compose`` is needed and torchvision is not installed.

    Example:
        >>> from torchvision import transforms
        >>> from torchvision.datasets import FakeData
        >>> dataset = FakeData(size=4, image_size=(3, 8, 8), transform=transforms.Compose([transforms.ToTensor()]))
        >>> flip = transforms.RandomHorizontalFlip()
        >>> add_vision_dataset_transform(dataset, flip)
        True
        >>> [type(step).__name__ for step in dataset.transform.transforms]
        ['RandomHorizontalFlip', 'ToTensor']
        >>> add_vision_dataset_transform(dataset, flip)  # already there
        False
    """
    if dataset is None:
        raise ValueError(
            f"Cannot add {transform!r}: there is no dataset to add it to. To fix, train with a torch DataLoader "
            "over a dataset with a `transform` attribute (a torchvision dataset, for example)."
        )
    if not hasattr(dataset, "transform"):
        raise ValueError(
            f"Cannot add {transform!r} to a dataset of type {type(dataset).__name__}: it has no `transform` "
            "attribute. To fix, train on a dataset that applies `self.transform` to each image, as torchvision "
            "datasets do (for a Subset or a wrapper, give the underlying dataset the transform), or add the "
            "transform to your own pipeline."
        )
    current = dataset.transform
    if _contains(current, transform):
        return False
    if current is None:
        dataset.transform = transform
        return True
    if _is_torchvision(current, {"Compose"}) and isinstance(getattr(current, "transforms", None), list):
        steps = list(current.transforms)
        position = next((i for i, step in enumerate(steps) if _is_to_tensor(step)), None)
        if position is None:
            steps.append(transform)
        else:
            steps.insert(position + 1 if is_tensor_transform else position, transform)
        dataset.transform = type(current)(steps)
        return True
    try:
        from torchvision.transforms import Compose
    except ImportError as error:
        raise ImportError(
            "add_vision_dataset_transform needs torchvision to combine two transforms. To fix, install the vision "
            "extra: pip install 'opencomposer[vision]'."
        ) from error
    transform_first = _is_to_tensor(current) and not is_tensor_transform
    dataset.transform = Compose([transform, current] if transform_first else [current, transform])
    return True
