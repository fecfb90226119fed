"""digits_dataloaders: shapes, determinism and split sizes (with scikit-learn, or a stand-in for it)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from composer.datasets import digits_dataloaders
from composer.datasets.digits import _digits_file, _read_digits_file, _stratified_split


def _all(loader):
    images, labels = zip(*loader)
    return torch.cat(images), torch.cat(labels)


@pytest.fixture
def fake_sklearn(monkeypatch):
    """Stands in for scikit-learn's digits: 10 classes of 8x8 integer images 0..16, uneven class sizes."""
    g = torch.Generator().manual_seed(0)
    target = torch.arange(10).repeat_interleave(torch.tensor([18, 20, 17, 19, 20, 21, 18, 18, 17, 20]))
    images = torch.randint(0, 17, (len(target), 8, 8), generator=g).double()
    datasets = types.ModuleType("sklearn.datasets")
    datasets.load_digits = lambda: types.SimpleNamespace(images=images.numpy(), target=target.numpy())
    sklearn = types.ModuleType("sklearn")
    sklearn.datasets = datasets
    monkeypatch.setitem(sys.modules, "sklearn", sklearn)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", datasets)
    return images, target


def test_shapes_scaling_and_split(fake_sklearn):
    images, target = fake_sklearn
    train_dl, eval_dl = digits_dataloaders(batch_size=16, eval_batch_size=32)
    x, y = next(iter(train_dl))
    assert x.shape == (16, 1, 8, 8) and x.dtype == torch.float32 and y.dtype == torch.int64
    train_x, train_y = _all(train_dl)
    eval_x, eval_y = _all(eval_dl)
    assert len(train_y) + len(eval_y) == len(target)
    assert train_x.min() >= 0.0 and train_x.max() <= 1.0
    # stratified: each class gives round(20%) of its samples to eval
    for label in range(10):
        assert (eval_y == label).sum() == round(0.2 * (target == label).sum().item())
    # the split is a partition of the data: every image appears once, with its label; the datasets keep 8-bit
    # pixels (intensity / 16 * 255, rounded) and hand out pixel / 255
    all_x = torch.cat([train_x, eval_x]).flatten(1)
    expected = (images * 255 / 16).round().to(torch.uint8).float().div(255).flatten(1)
    assert sorted(map(tuple, all_x.tolist())) == sorted(map(tuple, expected.tolist()))


def test_deterministic_per_seed(fake_sklearn):
    first = [_all(dl) for dl in digits_dataloaders(seed=1)]
    second = [_all(dl) for dl in digits_dataloaders(seed=1)]
    other = [_all(dl) for dl in digits_dataloaders(seed=2)]
    for (xa, ya), (xb, yb) in zip(first, second):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert not torch.equal(first[1][0], other[1][0])  # another seed, another eval set


def test_train_order_reshuffles_each_epoch(fake_sklearn):
    train_dl, eval_dl = digits_dataloaders(batch_size=8)
    assert not torch.equal(_all(train_dl)[1], _all(train_dl)[1])
    assert torch.equal(_all(eval_dl)[1], _all(eval_dl)[1])


def test_missing_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"opencomposer\[data\]"):
        digits_dataloaders()


def test_validation():
    with pytest.raises(ValueError, match="batch_size"):
        digits_dataloaders(batch_size=0)
    with pytest.raises(ValueError, match="num_workers"):
        digits_dataloaders(num_workers=-1)


def test_stratified_split_partitions_every_class():
    labels = torch.tensor([0] * 10 + [1] * 5 + [2] * 3)
    train, evaluation = _stratified_split(labels, 0.2, torch.Generator().manual_seed(0))
    assert sorted(train.tolist() + evaluation.tolist()) == list(range(18))
    assert torch.bincount(labels[evaluation], minlength=3).tolist() == [2, 1, 1]


def test_real_digits():
    pytest.importorskip("sklearn")
    train_dl, eval_dl = digits_dataloaders(batch_size=64, eval_batch_size=256, seed=0)
    assert len(train_dl.dataset) + len(eval_dl.dataset) == 1797
    assert abs(len(eval_dl.dataset) - 0.2 * 1797) <= 10
    x, _ = next(iter(eval_dl))
    assert x.shape == (256, 1, 8, 8) and x.dtype == torch.float32 and x.min() >= 0.0 and x.max() <= 1.0
    assert set(_all(eval_dl)[1].tolist()) == set(range(10))
    assert torch.equal(_all(train_dl)[1], _all(digits_dataloaders(seed=0)[0])[1])


def test_the_digits_file_is_read_as_scikit_learn_reads_it(monkeypatch):
    """Without importing scikit-learn (seconds, with pandas), the same images and targets as its load_digits."""
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    monkeypatch.delitem(sys.modules, "sklearn")  # found on the path, as in a fresh process
    path = _digits_file()
    assert path is not None and path.name == "digits.csv.gz"
    images, targets = _read_digits_file(path)
    reference = sklearn_datasets.load_digits()
    assert images.shape == (1797, 8, 8) and (images == reference.images).all()
    assert targets.dtype == reference.target.dtype and (targets == reference.target).all()
