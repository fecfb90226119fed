"""CIFAR from the standard archive: layout, splits, labels, the loader's augmentation and normalization, and errors."""

from __future__ import annotations

import pickle
import tarfile

import pytest
import torch

from composer.core.data_spec import DataSpec
from composer.datasets import CIFARDataset, Normalize, cifar_dataloader, load_cifar
from composer.datasets.normalization import CIFAR10_MEAN, CIFAR10_STD
from tests.datasets.cifar_archive import write_cifar_archive


@pytest.fixture
def cifar10(tmp_path):
    return write_cifar_archive(tmp_path, num_classes=10, per_batch=4)


def test_reads_both_splits_and_the_channel_planes(cifar10):
    images, labels = load_cifar(cifar10, train=True)
    assert images.shape == (20, 3, 32, 32) and images.dtype == torch.uint8  # five batches of four
    assert labels.tolist() == [0, 1, 2, 3] * 5 and labels.dtype == torch.int64
    # image i of batch b has plane c filled with 10 * i + c + b: the R, G and B planes land in channels 0, 1, 2
    assert images[1, :, 5, 7].tolist() == [10, 11, 12]
    assert images[4 + 2, :, 0, 0].tolist() == [21, 22, 23]  # batch 1, image 2
    test_images, _ = load_cifar(cifar10, train=False)
    assert test_images.shape == (4, 3, 32, 32) and test_images[0, :, 0, 0].tolist() == [5, 6, 7]


def test_reads_the_unpacked_folder_and_its_parent(cifar10, tmp_path):
    with tarfile.open(cifar10) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    folder = tmp_path / "unpacked" / "cifar-10-batches-py"
    for path in (folder, folder.parent, tmp_path):  # the folder, a folder holding it, a folder holding the archive
        images, _ = load_cifar(path, train=False)
        assert images.shape == (4, 3, 32, 32)


def test_cifar100_fine_labels(tmp_path):
    path = write_cifar_archive(tmp_path, num_classes=100, per_batch=6)
    _, labels = load_cifar(path, num_classes=100, train=True)
    assert labels.tolist() == list(range(6))


def test_dataloader_normalizes_on_device_and_shuffles_with_its_seed(cifar10):
    spec = cifar_dataloader(cifar10, batch_size=8, train=True, seed=0)
    assert isinstance(spec, DataSpec) and isinstance(spec.device_transforms, Normalize)
    images, labels = next(iter(spec.dataloader))
    assert images.dtype == torch.uint8 and images.shape == (8, 3, 32, 32)
    normalized, same_labels = spec.device_transforms((images, labels))
    mean = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    assert torch.allclose(normalized, (images.float() - mean) / std) and same_labels is labels
    assert len(spec.dataloader) == 20 // 8  # the partial batch is dropped in training
    orders = [torch.cat([y for _, y in cifar_dataloader(cifar10, 4, seed=s).dataloader]) for s in (0, 0, 1)]
    assert torch.equal(orders[0], orders[1])
    evaluation = cifar_dataloader(cifar10, batch_size=3, train=False)
    assert [len(y) for _, y in evaluation.dataloader] == [3, 1]  # every test image, in order


def test_augmentation_is_a_padded_crop_and_flip():
    torch.manual_seed(0)
    image = torch.arange(3 * 32 * 32, dtype=torch.int64).remainder(251).to(torch.uint8).view(1, 3, 32, 32)
    dataset = CIFARDataset(image, torch.tensor([7]), augment=True)
    padded = torch.nn.functional.pad(image[0], (4, 4, 4, 4))
    windows = [padded[:, t : t + 32, s : s + 32] for t in range(9) for s in range(9)]
    candidates = windows + [w.flip(-1) for w in windows]
    for _ in range(20):
        out, label = dataset[0]
        assert int(label) == 7 and any(torch.equal(out, c) for c in candidates)
    assert torch.equal(CIFARDataset(image, torch.tensor([7]))[0][0], image[0])  # no augmentation: unchanged


def test_missing_path_and_wrong_formats(tmp_path, cifar10):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cifar(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no CIFAR batches"):
        load_cifar(tmp_path / "empty")
    not_tar = tmp_path / "notes.txt"
    not_tar.write_text("hello")
    with pytest.raises(ValueError, match="not a readable tar archive"):
        load_cifar(not_tar)
    with pytest.raises(ValueError, match="lacks"):
        load_cifar(cifar10, num_classes=100)  # a CIFAR-10 archive has no 'train' member
    with pytest.raises(ValueError, match="10 .* or 100"):
        load_cifar(cifar10, num_classes=20)


def test_refuses_pickles_that_run_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    evil = pickle.dumps({b"data": print, b"labels": []})  # rebuilding it needs builtins.print
    for name in ["test_batch"]:
        (folder / name).write_bytes(evil)
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        load_cifar(folder, train=False)
