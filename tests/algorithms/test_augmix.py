"""AugMix: the mixing formula, randomness, types, validation, and the dataset-transform wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import FakeData

import composer.functional
from composer.algorithms import ALGORITHMS
from composer.algorithms.augmix import AugmentAndMixTransform, AugMix, AugMixHparams, augment_and_mix
from composer.algorithms.utils import augmentation_sets
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


def _invert(img: Image.Image, level: float) -> Image.Image:
    return ImageOps.invert(img)


def _keep(img: Image.Image, level: float) -> Image.Image:
    return img.copy()


def _expected_draws(seed: int, width: int, alpha: float, max_depth: int) -> tuple[list[float], float, list[float]]:
    """Chain weights, blend weight and uniforms, drawn in the documented order with Dirichlet/Beta via Gamma."""
    g = _gen(seed)
    gammas = torch._standard_gamma(torch.full((width + 2,), alpha, dtype=torch.float64), generator=g).tolist()
    weights = [x / sum(gammas[:width]) for x in gammas[:width]]
    m = gammas[width] / (gammas[width] + gammas[width + 1])
    uniforms = torch.rand(width * (1 + 3 * max_depth), generator=g).tolist()
    return weights, m, uniforms


# ---- the function ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_width_one_blends_the_chain_with_the_original_by_a_beta_weight(seed):
    img = _image(seed=seed)
    out = np.asarray(augment_and_mix(img, 3, 1, 1, 1.0, [_invert], generator=_gen(seed))).astype(float)
    _, m, _ = _expected_draws(seed, width=1, alpha=1.0, max_depth=1)
    pixels = np.asarray(img).astype(float)
    expected = (1 - m) * pixels + m * (255 - pixels)
    assert np.abs(out - expected).max() <= 0.5 + 1e-3  # rounded to nearest
    # The blend weight is one number for the whole image: solve for it where the two images differ most.
    far = np.abs(255 - 2 * pixels) > 200
    solved = (out[far] - pixels[far]) / (255 - 2 * pixels[far])
    assert solved.max() - solved.min() < 0.02 and abs(solved.mean() - m) < 0.01


@pytest.mark.parametrize("seed", range(4))
def test_chains_are_mixed_with_dirichlet_weights(seed):
    # Two deterministic operations, depth 1, width 3: each chain is either the inverted or the unchanged image.
    img = _image(seed=seed)
    ops = [_invert, _keep]
    out = np.asarray(augment_and_mix(img, 3, 1, 3, 0.7, ops, generator=_gen(seed))).astype(float)
    weights, m, uniforms = _expected_draws(seed, width=3, alpha=0.7, max_depth=1)
    pixels = np.asarray(img).astype(float)
    chains = [255 - pixels if math.floor(uniforms[4 * c + 1] * 2) == 0 else pixels for c in range(3)]
    expected = (1 - m) * pixels + m * sum(w * chain for w, chain in zip(weights, chains))
    assert abs(sum(weights) - 1) < 1e-12
    assert np.abs(out - expected).max() <= 0.5 + 1e-3


def test_random_depth_draws_one_to_three_operations_per_chain():
    counts = []

    def count(img, level):
        counts[-1] += 1
        return img

    for seed in range(40):
        counts.append(0)
        augment_and_mix(_image(), 3, -1, 1, 1.0, [count], generator=_gen(seed))
    assert set(counts) == {1, 2, 3}
    counts.clear()
    for seed in range(5):
        counts.append(0)
        augment_and_mix(_image(), 3, 2, 4, 1.0, [count], generator=_gen(seed))
    assert counts == [8] * 5  # width 4 x depth 2


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_type_mode_and_size_are_preserved(mode):
    img = _image(mode)
    out = augment_and_mix(img, generator=_gen(0))
    assert isinstance(out, Image.Image) and out.mode == mode and out.size == img.size


@pytest.mark.parametrize("channels", [3, 1])
def test_uint8_tensors_come_back_as_tensors(channels):
    img = _image("RGB" if channels == 3 else "L")
    tensor = torch.from_numpy(np.array(img)).reshape(img.size[1], img.size[0], channels).permute(2, 0, 1)
    out = augment_and_mix(tensor, generator=_gen(1))
    assert out.dtype == torch.uint8 and out.shape == tensor.shape
    expected = np.array(augment_and_mix(img, generator=_gen(1))).reshape(img.size[1], img.size[0], channels)
    assert torch.equal(out, torch.from_numpy(expected).permute(2, 0, 1))


def test_seeded_generator_is_reproducible_and_leaves_the_global_rng_alone():
    img = _image()
    before = torch.get_rng_state()
    first = augment_and_mix(img, 5, generator=_gen(7))
    assert torch.equal(torch.get_rng_state(), before)
    assert augment_and_mix(img, 5, generator=_gen(7)) == first
    assert any(augment_and_mix(img, 5, generator=_gen(s)) != first for s in range(8, 11))


def test_set_names_in_both_spellings_give_the_same_images():
    img = _image()
    for short, long in [("all", "augmentations_all"), ("safe", "augmentations_corruption_safe")]:
        assert augment_and_mix(img, 6, augmentation_set=short, generator=_gen(2)) == augment_and_mix(
            img, 6, augmentation_set=long, generator=_gen(2)
        )
    default = augment_and_mix(img, 6, generator=_gen(2))
    assert default == augment_and_mix(img, 6, augmentation_set="all", generator=_gen(2))
    original = augment_and_mix(img, 6, augmentation_set="augmentations_original", generator=_gen(2))
    assert original.size == img.size


def test_tiny_alpha_still_gives_a_valid_image():
    out = augment_and_mix(_image(), 3, alpha=1e-4, generator=_gen(0))
    assert out.size == (12, 10)


def test_severity_zero_with_identity_operations_returns_the_image():
    img = _image()
    ops = augmentation_sets["all"][3:4] + augmentation_sets["all"][5:]  # rotate, shear, translate, enhancers
    assert augment_and_mix(img, 0, augmentation_set=ops, generator=_gen(0)) == img


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"severity": 11}, r"severity=11 .*\[0, 10\]"),
        ({"severity": -1}, "severity"),
        ({"severity": "3"}, "severity"),
        ({"depth": 0}, r"depth=0 .*-1"),
        ({"depth": -2}, "depth"),
        ({"width": 0}, "width=0"),
        ({"alpha": 0.0}, r"alpha=0.0 .*above 0"),
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"augmentation_set": "bogus"}, r"augmentation_set='bogus'.*'all', 'safe', 'original'"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        augment_and_mix(_image(), **kwargs)
    with pytest.raises(ValueError, match=match):
        AugMix(**kwargs)
    if kwargs != {"severity": "3"}:  # a config coerces the string "3" to the int 3
        with pytest.raises(ValueError, match=match):
            AugMixHparams(**kwargs)


def test_bad_images_raise():
    with pytest.raises(ValueError, match=r"mode 'RGBA'.*\['RGB', 'L'\]"):
        augment_and_mix(Image.new("RGBA", (4, 4)))
    with pytest.raises(ValueError, match=r"float images must lie in \[0, 1\]"):
        augment_and_mix(torch.rand(3, 4, 4) + 1.0)  # float tensors are accepted, but only in [0, 1]
    with pytest.raises(ValueError, match="uint8"):
        augment_and_mix(torch.zeros(3, 4, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="PIL image"):
        augment_and_mix(np.zeros((4, 4, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="needs an image"):
        augment_and_mix()


def test_exports_and_defaults():
    assert composer.functional.augment_and_mix is augment_and_mix
    assert ALGORITHMS["augmix"] is AugMix
    assert AugMixHparams() == AugMixHparams(severity=3, depth=-1, width=3, alpha=1.0, augmentation_set="all")
    assert repr(AugMixHparams().initialize_object()) == repr(AugMix())
    assert repr(AugMix()) == "AugMix(severity=3, depth=-1, width=3, alpha=1.0, augmentation_set='all')"


# ---- the transform and the algorithm --------------------------------------------------------------------------------


def _dataset(transform=None) -> FakeData:
    if transform is None:
        transform = transforms.Compose([transforms.ToTensor()])
    return FakeData(8, (3, 8, 8), num_classes=2, transform=transform)


def _model() -> ComposerClassifier:
    torch.manual_seed(0)
    return ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 2)), num_classes=2)


def _count(pipeline, cls) -> int:
    steps = getattr(pipeline, "transforms", [pipeline])
    return sum(isinstance(step, cls) for step in steps)


def test_transform_works_in_a_compose_and_has_a_readable_repr():
    transform = AugmentAndMixTransform(severity=2, width=2, augmentation_set="safe", generator=_gen(0))
    out = transforms.Compose([transform, transforms.ToTensor()])(_image())
    assert out.shape == (3, 10, 12) and out.dtype == torch.float32
    assert (
        repr(transform) == "AugmentAndMixTransform(severity=2, depth=-1, width=2, alpha=1.0, augmentation_set='safe')"
    )


def test_algorithm_inserts_before_to_tensor_once_and_leaves_a_shared_pipeline_alone():
    shared = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    train, evaluation = _dataset(shared), _dataset(shared)
    algorithm = AugMix()
    state = State(model=_model(), train_dataloader=DataLoader(train, batch_size=4), max_duration="1ep")
    assert algorithm.match(Event.FIT_START, state)
    assert not any(algorithm.match(event, state) for event in Event if event != Event.FIT_START)
    algorithm.apply(Event.FIT_START, state, None)
    algorithm.apply(Event.FIT_START, state, None)  # a second fit
    names = [type(step).__name__ for step in train.transform.transforms]
    assert names == ["RandomHorizontalFlip", "AugmentAndMixTransform", "ToTensor"]
    assert evaluation.transform is shared and len(shared.transforms) == 2


def test_dataset_without_transform_attribute_raises():
    data = torch.utils.data.TensorDataset(torch.zeros(4, 3, 8, 8), torch.zeros(4, dtype=torch.long))
    state = State(model=_model(), train_dataloader=DataLoader(data, batch_size=2), max_duration="1ep")
    with pytest.raises(ValueError, match="no `transform` attribute"):
        AugMix().apply(Event.FIT_START, state, None)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_trains_in_dataloader_workers_and_refits_without_inserting_twice(num_workers):
    dataset = _dataset()
    loader = DataLoader(dataset, batch_size=4, num_workers=num_workers, generator=_gen(0))
    trainer = Trainer(
        model=_model(), train_dataloader=loader, max_duration="1ep", algorithms=[AugMix()], progress_bar=False, seed=0
    )
    trainer.fit()
    trainer.fit(duration="1ep")
    trainer.close()
    assert int(trainer.state.timer.batch) == 4
    assert _count(dataset.transform, AugmentAndMixTransform) == 1


def test_workers_are_seeded_by_the_dataloader_generator():
    # Same DataLoader seed, same augmented batches; the two workers do not repeat each other.
    dataset = _dataset()
    dataset.transform = transforms.Compose([AugmentAndMixTransform(severity=10), transforms.ToTensor()])
    dataset_copy = FakeData(8, (3, 8, 8), num_classes=2, transform=transforms.Compose([transforms.ToTensor()]))

    def batches(seed):
        return [x for x, _ in DataLoader(dataset, batch_size=2, num_workers=2, generator=_gen(seed))]

    first, again, other = batches(0), batches(0), batches(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))
    plain = [x for x, _ in DataLoader(dataset_copy, batch_size=2)]
    assert not any(torch.equal(a, b) for a, b in zip(first, plain))
