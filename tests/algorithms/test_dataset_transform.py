"""add_vision_dataset_transform: where a transform goes in a dataset's pipeline, once."""

from __future__ import annotations

import pytest
import torch
from torchvision import transforms
from torchvision.transforms import v2

from composer.algorithms.utils import add_vision_dataset_transform


class _Dataset:
    def __init__(self, transform):
        self.transform = transform


def _names(pipeline) -> list[str]:
    return [type(step).__name__ for step in pipeline.transforms]


def _augment(img):
    return img


def test_pil_transform_goes_before_the_first_conversion_to_tensor():
    dataset = _Dataset(
        transforms.Compose([transforms.RandomCrop(4), transforms.PILToTensor(), transforms.Normalize(0, 1)])
    )
    assert add_vision_dataset_transform(dataset, _augment)
    assert dataset.transform.transforms[1] is _augment
    assert _names(dataset.transform)[2:] == ["PILToTensor", "Normalize"]


def test_tensor_transform_goes_after_the_conversion_and_v2_compose_keeps_its_class():
    dataset = _Dataset(v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32)]))
    assert add_vision_dataset_transform(dataset, _augment, is_tensor_transform=True)
    assert type(dataset.transform) is v2.Compose
    assert dataset.transform.transforms[1] is _augment and _names(dataset.transform)[0] == "ToImage"


def test_without_a_conversion_the_transform_goes_last():
    dataset = _Dataset(transforms.Compose([transforms.RandomCrop(4)]))
    add_vision_dataset_transform(dataset, _augment)
    assert dataset.transform.transforms[-1] is _augment


def test_a_lone_transform_is_combined_in_order():
    to_tensor, crop = transforms.ToTensor(), transforms.RandomCrop(4)
    before = _Dataset(to_tensor)
    add_vision_dataset_transform(before, _augment)
    assert before.transform.transforms == [_augment, to_tensor]
    after = _Dataset(crop)
    add_vision_dataset_transform(after, _augment)
    assert after.transform.transforms == [crop, _augment]
    tensor = _Dataset(to_tensor)
    add_vision_dataset_transform(tensor, _augment, is_tensor_transform=True)
    assert tensor.transform.transforms == [to_tensor, _augment]


def test_adding_twice_changes_nothing_and_the_original_pipeline_is_not_mutated():
    pipeline = transforms.Compose([transforms.ToTensor()])
    dataset = _Dataset(pipeline)
    assert add_vision_dataset_transform(dataset, _augment)
    first = dataset.transform
    assert not add_vision_dataset_transform(dataset, _augment)
    assert dataset.transform is first and len(pipeline.transforms) == 1
    nested = _Dataset(transforms.Compose([first, transforms.Normalize(0, 1)]))
    assert not add_vision_dataset_transform(nested, _augment)


def test_missing_transform_attribute_or_dataset_raises():
    with pytest.raises(ValueError, match="no `transform` attribute"):
        add_vision_dataset_transform(object(), _augment)
    with pytest.raises(ValueError, match="no dataset"):
        add_vision_dataset_transform(None, _augment)
