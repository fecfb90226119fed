"""RandAugment: the operation sequence, randomness, types, validation, and the dataset-transform wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import FakeData

import composer.functional
from composer.algorithms import ALGORITHMS
from composer.algorithms.randaugment import RandAugment, RandAugmentHparams, RandAugmentTransform, randaugment
from composer.algorithms.utils import augmentation_sets
from composer.algorithms.utils.augmentation_primitives import apply_op
from composer.core.event import Event
from composer.core.state import State
from composer.models import ComposerClassifier
from composer.trainer import Trainer


def _image(mode: str = "RGB", seed: int = 0, size: tuple[int, int] = (12, 10)) -> Image.Image:
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("seed", range(6))
def test_applies_depth_operations_chosen_by_the_documented_draws(seed):
    # Operations that record their order: op k adds k + 1 to every value, so the result tells which ran.
    calls: list[tuple[int, float]] = []

    def make(k):
        def op(img, level):
            calls.append((k, level))
            return Image.fromarray(np.asarray(img) + np.uint8(k + 1))

        return op

    ops = [make(k) for k in range(5)]
    img = Image.fromarray(np.zeros((4, 4), dtype=np.uint8))
    out = randaugment(img, severity=7, depth=3, augmentation_set=ops, generator=_gen(seed))
    uniforms = torch.rand(9, generator=_gen(seed)).tolist()
    expected = [math.floor(uniforms[3 * i] * 5) for i in range(3)]
    assert calls == [(k, 7.0) for k in expected]
    assert np.asarray(out).tolist() == [[sum(k + 1 for k in expected)] * 4] * 4


def test_library_operations_are_applied_with_their_own_draws():
    # apply_op(op, img, level, u_magnitude, u_sign) equals op(img, level) with those two draws (tested with the
    # primitives), so it replays the documented sequence here.
    img = _image()
    ops = augmentation_sets["all"]
    for seed in range(5):
        uniforms = torch.rand(6, generator=_gen(seed)).tolist()
        expected = img
        for i in range(2):
            u_op, u_magnitude, u_sign = uniforms[3 * i : 3 * i + 3]
            expected = apply_op(ops[math.floor(u_op * len(ops))], expected, 9.0, u_magnitude, u_sign)
        assert randaugment(img, 9, 2, generator=_gen(seed)) == expected


def test_depth_zero_returns_the_image_and_depth_counts_operations():
    img = _image()
    assert randaugment(img, 9, 0, generator=_gen(0)) == img
    counter = []

    def count(img, level):
        counter.append(1)
        return img

    randaugment(img, 9, 4, [count], generator=_gen(0))
    assert len(counter) == 4


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_type_mode_and_size_are_preserved(mode):
    img = _image(mode)
    for seed in range(10):
        out = randaugment(img, generator=_gen(seed))
        assert isinstance(out, Image.Image) and out.mode == mode and out.size == img.size


def test_uint8_tensors_come_back_as_tensors():
    img = _image()
    tensor = torch.from_numpy(np.array(img)).permute(2, 0, 1)
    out = randaugment(tensor, generator=_gen(4))
    assert out.dtype == torch.uint8 and out.shape == tensor.shape
    assert torch.equal(out, torch.from_numpy(np.array(randaugment(img, generator=_gen(4)))).permute(2, 0, 1))


def test_seeded_generator_is_reproducible_and_leaves_the_global_rng_alone():
    img = _image()
    before = torch.get_rng_state()
    first = randaugment(img, 9, 3, generator=_gen(5))
    assert torch.equal(torch.get_rng_state(), before)
    assert randaugment(img, 9, 3, generator=_gen(5)) == first
    assert any(randaugment(img, 9, 3, generator=_gen(s)) != first for s in range(6, 10))


def test_set_names_in_both_spellings_give_the_same_images():
    img = _image()
    for short, long in [("all", "augmentations_all"), ("original", "augmentations_original")]:
        for seed in range(3):
            assert randaugment(img, 8, 2, short, generator=_gen(seed)) == randaugment(
                img, 8, 2, long, generator=_gen(seed)
            )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"severity": 10.5}, r"severity=10.5 .*\[0, 10\]"),
        ({"severity": -1}, "severity"),
        ({"depth": -1}, r"depth=-1 .*at least 0"),
        ({"depth": 1.5}, "depth"),
        ({"augmentation_set": "augmentations_safe"}, r"augmentation_set='augmentations_safe'.*'safe'"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        randaugment(_image(), **kwargs)
    with pytest.raises(ValueError, match=match):
        RandAugment(**kwargs)
    with pytest.raises(ValueError, match=match):
        RandAugmentTransform(**kwargs)


def test_bad_images_raise():
    with pytest.raises(ValueError, match=r"mode 'P'.*\['RGB', 'L'\]"):
        randaugment(Image.new("P", (4, 4)))
    with pytest.raises(ValueError, match="uint8"):
        randaugment(torch.zeros(2, 4, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="needs an image"):
        randaugment(None)


def test_exports_and_defaults():
    assert composer.functional.randaugment is randaugment
    assert ALGORITHMS["randaugment"] is RandAugment
    assert RandAugmentHparams() == RandAugmentHparams(severity=9, depth=2, augmentation_set="all")
    assert repr(RandAugmentHparams().initialize_object()) == repr(RandAugment())
    with pytest.raises(ValueError, match="depth"):
        RandAugmentHparams(depth=-3)


def _model() -> ComposerClassifier:
    torch.manual_seed(0)
    return ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2)), num_classes=2)


def test_algorithm_inserts_into_a_lone_transform_and_a_missing_one():
    lone = FakeData(4, (3, 8, 8), num_classes=2, transform=transforms.ToTensor())
    state = State(model=_model(), train_dataloader=DataLoader(lone, batch_size=2), max_duration="1ep")
    algorithm = RandAugment()
    algorithm.apply(Event.FIT_START, state, None)
    assert [type(step).__name__ for step in lone.transform.transforms] == ["RandAugmentTransform", "ToTensor"]
    bare = FakeData(4, (3, 8, 8), num_classes=2)
    state.train_dataloader = DataLoader(bare, batch_size=2)
    algorithm.apply(Event.FIT_START, state, None)
    assert isinstance(bare.transform, RandAugmentTransform)
    assert isinstance(bare[0][0], Image.Image)


def test_training_data_without_a_dataset_raises():
    state = State(model=_model(), train_dataloader=[(torch.zeros(2, 3, 8, 8), torch.zeros(2))], max_duration="1ep")
    with pytest.raises(ValueError, match="no dataset"):
        RandAugment().apply(Event.FIT_START, state, None)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_trains_in_dataloader_workers_and_refits_without_inserting_twice(num_workers):
    dataset = FakeData(8, (3, 8, 8), num_classes=2, transform=transforms.Compose([transforms.ToTensor()]))
    loader = DataLoader(dataset, batch_size=4, num_workers=num_workers, generator=_gen(0))
    trainer = Trainer(
        model=_model(), train_dataloader=loader, max_duration="1ep", algorithms=[RandAugment()], progress_bar=False
    )
    trainer.fit()
    trainer.fit(duration="1ep")
    trainer.close()
    assert int(trainer.state.timer.batch) == 4
    assert sum(isinstance(step, RandAugmentTransform) for step in dataset.transform.transforms) == 1
