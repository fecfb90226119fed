"""Evaluator: label, data, metric names, interval and subset validation."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer.core.data_spec import DataSpec
from composer.core.evaluator import Evaluator
from composer.core.time import Time, TimeUnit


@pytest.fixture
def loader():
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(8, 3, generator=g), torch.randint(0, 2, (8,), generator=g)), 4)


def test_defaults(loader):
    evaluator = Evaluator(label="eval", dataloader=loader)
    assert evaluator.label == "eval"
    assert isinstance(evaluator.dataloader, DataSpec) and evaluator.dataloader.dataloader is loader
    assert evaluator.dataloader.num_samples == 8
    assert evaluator.metric_names is None
    assert evaluator.eval_interval == Time(1, TimeUnit.EPOCH)
    assert evaluator.subset_num_batches is None


def test_keeps_a_given_data_spec(loader):
    spec = DataSpec(loader, num_samples=3)
    assert Evaluator(label="eval", dataloader=spec).dataloader is spec


def test_metric_names_are_copied(loader):
    names = ["Accuracy"]
    evaluator = Evaluator(label="eval", dataloader=loader, metric_names=names)
    names.append("CrossEntropy")
    assert evaluator.metric_names == ["Accuracy"]


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        (None, Time(1, TimeUnit.EPOCH)),
        (3, Time(3, TimeUnit.EPOCH)),
        ("2ep", Time(2, TimeUnit.EPOCH)),
        ("500ba", Time(500, TimeUnit.BATCH)),
        (Time(7, TimeUnit.BATCH), Time(7, TimeUnit.BATCH)),
    ],
)
def test_eval_interval_parsing(loader, interval, expected):
    evaluator = Evaluator(label="eval", dataloader=loader, eval_interval=interval)
    assert evaluator.eval_interval == expected
    assert evaluator.eval_interval.unit == expected.unit


@pytest.mark.parametrize("interval", ["100sp", "2048tok", "0.5dur"])
def test_eval_interval_rejects_other_units(loader, interval):
    with pytest.raises(ValueError, match=r"expected one of \['ep', 'ba'\]"):
        Evaluator(label="eval", dataloader=loader, eval_interval=interval)


@pytest.mark.parametrize("interval", [0, "0ba"])
def test_eval_interval_must_be_positive(loader, interval):
    with pytest.raises(ValueError, match="positive"):
        Evaluator(label="eval", dataloader=loader, eval_interval=interval)


def test_eval_interval_rejects_bad_strings(loader):
    with pytest.raises(ValueError):
        Evaluator(label="eval", dataloader=loader, eval_interval="often")


@pytest.mark.parametrize("label", ["", "   ", None, 3])
def test_label_must_be_a_non_empty_string(loader, label):
    with pytest.raises(ValueError, match="label"):
        Evaluator(label=label, dataloader=loader)


def test_metric_names_must_be_strings(loader):
    with pytest.raises(TypeError, match="metric_names"):
        Evaluator(label="eval", dataloader=loader, metric_names="Accuracy")
    with pytest.raises(TypeError, match="metric_names"):
        Evaluator(label="eval", dataloader=loader, metric_names=[1])


@pytest.mark.parametrize("subset", [0, -1, 1.5, True])
def test_subset_num_batches_must_be_positive_int(loader, subset):
    with pytest.raises(ValueError, match="subset_num_batches"):
        Evaluator(label="eval", dataloader=loader, subset_num_batches=subset)


def test_arguments_are_keyword_only(loader):
    with pytest.raises(TypeError):
        Evaluator("eval", loader)


def test_rejects_non_iterable_data():
    with pytest.raises(TypeError, match="iterable"):
        Evaluator(label="eval", dataloader=42)
