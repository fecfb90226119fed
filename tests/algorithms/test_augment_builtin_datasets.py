"""AugMix, RandAugment and ColOut(batch=False) on every built-in image dataset, through the Trainer.

Each algorithm adds a per-sample op to the training dataset's ``transform`` at FIT_START. On the built-in datasets
(digits, synthetic images, CIFAR, image folders) that must work: the op goes before the conversion to float, the
batch the model sees differs from the one a run without the algorithm sees, with the same dtype (and, except for
ColOut, the same shape), and the evaluation data is left alone. A dataset without a ``transform`` gets a clear error.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import AugMix, ColOut, RandAugment
from composer.algorithms.augmix import AugmentAndMixTransform
from composer.algorithms.colout import ColOutTransform
from composer.algorithms.randaugment import RandAugmentTransform
from composer.core import Callback, Logger, State
from composer.core.data_spec import DataSpec
from composer.datasets import (
    SyntheticClassificationDataset,
    ToNormalizedTensor,
    cifar_dataloader,
    digits_datasets,
    image_folder_dataloader,
)
from composer.models import ComposerClassifier, simple_cnn
from tests.datasets.cifar_archive import write_cifar_archive

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("torchvision")

P_DROP = 0.25  # ColOut's fraction of rows and columns


class _Inputs(Callback):
    """The inputs the model sees in each training batch (after device transforms and algorithms)."""

    def __init__(self) -> None:
        self.batches: list[torch.Tensor] = []

    def before_forward(self, state: State, logger: Logger) -> None:
        self.batches.append(state.batch[0].clone())


def _digits(tmp_path: Path) -> tuple[DataLoader[Any], int, int]:
    pytest.importorskip("sklearn")
    train_set, _ = digits_datasets(image_size=16)
    return DataLoader(train_set, batch_size=4), 1, 10


def _synthetic_rgb(tmp_path: Path) -> tuple[DataLoader[Any], int, int]:
    return DataLoader(SyntheticClassificationDataset(8, (3, 16, 16), 4, seed=0), batch_size=4), 3, 4


def _synthetic_gray(tmp_path: Path) -> tuple[DataLoader[Any], int, int]:
    return DataLoader(SyntheticClassificationDataset(8, (1, 12, 12), 3, seed=0), batch_size=4), 1, 3


def _cifar(tmp_path: Path) -> tuple[DataSpec, int, int]:
    archive = tmp_path / "cifar.tar.gz"
    if not archive.exists():
        write_cifar_archive(tmp_path, per_batch=8, random_pixels=True).rename(archive)
    # The test split: no random crop and flip (which would make any two runs differ) and no shuffling, so the only
    # difference between the runs is the algorithm. The dataset is the same CIFARDataset as for training.
    return cifar_dataloader(archive, batch_size=4, train=False), 3, 10


def _image_folder(tmp_path: Path) -> tuple[DataSpec, int, int]:
    root = tmp_path / "folder"
    if not root.exists():
        generator = torch.Generator().manual_seed(0)
        for label in ("cat", "dog"):
            (root / label).mkdir(parents=True)
            for i in range(4):
                pixels = torch.randint(0, 256, (20, 20, 3), dtype=torch.uint8, generator=generator).numpy()
                Image.fromarray(pixels).save(root / label / f"{i}.png")
    spec = image_folder_dataloader(root, batch_size=4, train=False, crop_size=16, resize_size=16, num_workers=0)
    return spec, 3, 2


DATASETS: dict[str, Callable[[Path], tuple[Any, int, int]]] = {
    "digits": _digits,
    "synthetic_rgb": _synthetic_rgb,
    "synthetic_gray": _synthetic_gray,
    "cifar": _cifar,
    "image_folder": _image_folder,
}
ALGORITHMS: dict[str, Callable[[], Any]] = {
    "augmix": lambda: AugMix(severity=3, width=2),
    "randaugment": lambda: RandAugment(severity=9, depth=2),
    "colout": lambda: ColOut(p_row=P_DROP, p_col=P_DROP, batch=False),
}
OP_TYPES = {"augmix": AugmentAndMixTransform, "randaugment": RandAugmentTransform, "colout": ColOutTransform}


def _dataset(loader: Any) -> Any:
    return (loader.dataloader if isinstance(loader, DataSpec) else loader).dataset


def _fit(loader: Any, in_channels: int, num_classes: int, algorithms: list[Any]) -> list[torch.Tensor]:
    inputs = _Inputs()
    torch.manual_seed(0)
    model = simple_cnn(in_channels=in_channels, widths=(4,), num_classes=num_classes)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="2ba",
        algorithms=algorithms,
        callbacks=[inputs],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    return inputs.batches


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
@pytest.mark.parametrize("name", list(DATASETS))
def test_augmentation_changes_what_the_model_sees(name, algorithm, tmp_path):
    baseline = _fit(*DATASETS[name](tmp_path), algorithms=[])
    loader, in_channels, num_classes = DATASETS[name](tmp_path)  # a fresh dataset, same data and order
    untouched_transform = _dataset(loader).transform
    augmented = _fit(loader, in_channels, num_classes, algorithms=[ALGORITHMS[algorithm]()])

    assert len(augmented) == len(baseline) == 2
    for plain, seen in zip(baseline, augmented):
        assert plain.dtype == seen.dtype == torch.float32  # the conversion to float still runs, last
        if algorithm == "colout":
            batch, channels, height, width = plain.shape
            assert seen.shape == (batch, channels, math.floor((1 - P_DROP) * height), math.floor((1 - P_DROP) * width))
        else:
            assert seen.shape == plain.shape
            assert not torch.equal(seen, plain)
    # Where the op went: before the conversion to float for AugMix and RandAugment (they need uint8 or PIL images),
    # around the whole transform for ColOut.
    transform = _dataset(loader).transform
    if algorithm == "colout":
        assert isinstance(transform, ColOutTransform) and transform.transform is untouched_transform
    elif untouched_transform is None:  # CIFAR keeps uint8 samples and normalizes batches on the device
        assert isinstance(transform, OP_TYPES[algorithm])
    else:
        steps = transform.transforms
        converts = [i for i, step in enumerate(steps) if type(step).__name__ in {"ToNormalizedTensor", "PILToTensor"}]
        ops = [i for i, step in enumerate(steps) if isinstance(step, OP_TYPES[algorithm])]
        assert len(ops) == len(converts) == 1 and ops[0] < converts[0]
    # The augmented dataset still pickles, so it runs in DataLoader workers started with spawn.
    assert len(pickle.loads(pickle.dumps(_dataset(loader)))) == len(_dataset(loader))


def test_augmix_on_digits_keeps_the_values_of_a_normalized_image():
    pytest.importorskip("sklearn")
    train_set, eval_set = digits_datasets(image_size=8)
    eval_transform = eval_set.transform
    batches = _fit(DataLoader(train_set, batch_size=8), 1, 10, algorithms=[AugMix(severity=10)])
    for batch in batches:
        assert batch.min() >= 0.0 and batch.max() <= 1.0
        # 8-bit pixels over 255: AugMix blended and rounded them before the conversion.
        torch.testing.assert_close(batch * 255, (batch * 255).round(), atol=1e-4, rtol=0)
    assert eval_set.transform is eval_transform and isinstance(eval_transform, ToNormalizedTensor)


def test_a_second_fit_does_not_add_the_op_twice():
    dataset = SyntheticClassificationDataset(8, (3, 8, 8), 2, seed=0)
    algorithm = RandAugment()
    for _ in range(2):
        _fit(DataLoader(dataset, batch_size=4), 3, 2, algorithms=[algorithm])
    assert [type(step).__name__ for step in dataset.transform.transforms] == [
        "RandAugmentTransform",
        "ToNormalizedTensor",
    ]


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_a_dataset_without_a_transform_gets_a_clear_error(algorithm):
    loader = DataLoader(TensorDataset(torch.zeros(8, 3, 8, 8, dtype=torch.uint8), torch.zeros(8).long()), batch_size=4)
    with pytest.raises(ValueError, match=r"TensorDataset.*`transform`"):
        _fit(loader, 3, 2, algorithms=[ALGORITHMS[algorithm]()])


def test_non_image_synthetic_data_gets_a_clear_error():
    loader = DataLoader(SyntheticClassificationDataset(8, (16,), 2, seed=0), batch_size=4)
    with pytest.raises(ValueError, match=r"uint8 of shape \(3, H, W\) or \(1, H, W\)"):
        trainer = Trainer(
            model=ComposerClassifier(torch.nn.Linear(16, 2), num_classes=2),
            train_dataloader=loader,
            max_duration="1ba",
            algorithms=[AugMix()],
            progress_bar=False,
        )
        trainer.fit()


def test_steps_that_convert_to_tensors_are_found_inside_a_compose():
    from torchvision import transforms

    from composer.algorithms.utils import add_vision_dataset_transform

    crop, to_tensor = transforms.RandomCrop(4), ToNormalizedTensor()
    dataset = SyntheticClassificationDataset(4, (3, 8, 8), 2, seed=0)
    dataset.transform = transforms.Compose([crop, to_tensor])
    op = RandAugmentTransform()
    assert add_vision_dataset_transform(dataset, op)
    assert dataset.transform.transforms == [crop, op, to_tensor]
    assert add_vision_dataset_transform(dataset, ColOutTransform(), is_tensor_transform=True)
    assert type(dataset.transform.transforms[3]) is ColOutTransform  # a tensor transform goes after the conversion
