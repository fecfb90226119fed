"""Building blocks that several speed-up methods share: image operations and their sets, dataset-transform surgery."""

from composer.algorithms.utils.augmentation_sets import augmentation_sets, get_augmentation_set
from composer.algorithms.utils.dataset_transform import add_vision_dataset_transform
from composer.algorithms.utils.pil_image import is_pil_available

__all__ = ["add_vision_dataset_transform", "augmentation_sets", "get_augmentation_set", "is_pil_available"]
