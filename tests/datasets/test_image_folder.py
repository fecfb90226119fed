"""image_folder_dataloader: class folders become labels, uint8 crops are normalized on device; path errors."""

from __future__ import annotations

import pytest
import torch

from composer.datasets import Normalize, image_folder_dataloader

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("torchvision")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "train"
    for label, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (root / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (40 + i, 30), color).save(root / label / f"{i}.png")
    return root


def test_eval_split_crops_and_labels(folder):
    spec = image_folder_dataloader(folder, batch_size=6, train=False, crop_size=16, resize_size=20, num_workers=0)
    images, labels = next(iter(spec.dataloader))
    assert images.shape == (6, 3, 16, 16) and images.dtype == torch.uint8
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]  # sorted class folders: cat, dog
    assert images[0, :, 8, 8].tolist() == [255, 0, 0] and images[5, :, 8, 8].tolist() == [0, 0, 255]
    assert isinstance(spec.device_transforms, Normalize)
    normalized, _ = spec.device_transforms((images, labels))
    assert normalized.dtype == torch.float32 and normalized.shape == images.shape


def test_train_split_is_random_crops_in_a_seeded_order(folder):
    first = image_folder_dataloader(folder, batch_size=2, train=True, crop_size=8, seed=3, num_workers=0)
    second = image_folder_dataloader(folder, batch_size=2, train=True, crop_size=8, seed=3, num_workers=0)
    labels = [torch.cat([y for _, y in spec.dataloader]) for spec in (first, second)]
    assert torch.equal(labels[0], labels[1]) and len(labels[0]) == 6
    assert next(iter(first.dataloader))[0].shape == (2, 3, 8, 8)


def test_path_errors(tmp_path, folder):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        image_folder_dataloader(tmp_path / "nowhere", batch_size=2)
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(b"")
    with pytest.raises(ValueError, match="no class sub-folders"):
        image_folder_dataloader(tmp_path / "flat", batch_size=2)
    (tmp_path / "textonly" / "a").mkdir(parents=True)
    (tmp_path / "textonly" / "a" / "notes.txt").write_text("no images here")
    with pytest.raises(ValueError, match="holds no readable images"):
        image_folder_dataloader(tmp_path / "textonly", batch_size=2)
