"""ComposerClassifier, ComposerModel defaults and MLP."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from composer.models import MLP, Accuracy, ComposerClassifier, ComposerModel, CrossEntropy


def _batch(n=8, features=4, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


def _model(seed=0):
    torch.manual_seed(seed)
    return ComposerClassifier(MLP(in_features=4, hidden=(8,), num_classes=3))


def test_forward_and_loss_with_index_targets():
    model = _model()
    x, y = _batch()
    outputs = model((x, y))
    assert torch.equal(outputs, model.module(x))
    assert torch.allclose(model.loss(outputs, (x, y)), F.cross_entropy(outputs, y))


def test_loss_with_soft_targets_and_kwargs():
    model = _model()
    x, y = _batch()
    dense = F.one_hot(y, 3).float()
    outputs = model((x, dense))
    assert torch.allclose(model.loss(outputs, (x, dense)), F.cross_entropy(outputs, y))
    assert model.loss(outputs, (x, y), reduction="none").shape == (8,)


def test_custom_loss_fn():
    model = ComposerClassifier(torch.nn.Linear(4, 3), loss_fn=F.multi_margin_loss)
    x, y = _batch()
    outputs = model((x, y))
    assert torch.allclose(model.loss(outputs, (x, y)), F.multi_margin_loss(outputs, y))


def test_num_classes_from_module_or_argument():
    assert _model().num_classes == 3
    assert ComposerClassifier(torch.nn.Linear(4, 3)).num_classes is None
    assert ComposerClassifier(torch.nn.Linear(4, 3), num_classes=3).num_classes == 3
    with pytest.raises(ValueError, match="num_classes"):
        ComposerClassifier(torch.nn.Linear(4, 3), num_classes=0)


def test_get_metrics_returns_fresh_objects():
    model = _model()
    train = model.get_metrics(is_train=True)
    evaluation = model.get_metrics(is_train=False)
    assert list(train) == ["Accuracy"] and isinstance(train["Accuracy"], Accuracy)
    assert list(evaluation) == ["Accuracy", "CrossEntropy"] and isinstance(evaluation["CrossEntropy"], CrossEntropy)
    assert model.get_metrics()["Accuracy"] is not evaluation["Accuracy"]


def test_update_metric_matches_hand_accuracy():
    model = _model()
    metric = model.get_metrics()["Accuracy"]
    batches = [_batch(seed=1), _batch(n=5, seed=2)]
    correct = total = 0
    with torch.no_grad():
        for batch in batches:
            outputs = model.eval_forward(batch)
            model.update_metric(batch, outputs, metric)
            correct += int((outputs.argmax(1) == batch[1]).sum())
            total += len(batch[1])
    assert metric.compute().item() == pytest.approx(correct / total)


def test_eval_forward_reuses_given_outputs():
    model = _model()
    batch = _batch()
    sentinel = torch.zeros(8, 3)
    assert model.eval_forward(batch, sentinel) is sentinel
    assert torch.equal(model.eval_forward(batch), model(batch))


def test_batch_must_be_a_pair():
    model = _model()
    with pytest.raises(ValueError, match=r"\(inputs, targets\) pair"):
        model({"x": torch.zeros(2, 4)})


def test_trains_on_a_learnable_problem():
    torch.manual_seed(0)
    model = ComposerClassifier(MLP(in_features=4, hidden=(16,), num_classes=2))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 4, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(100):
        optimizer.zero_grad()
        loss = model.loss(model((x, y)), (x, y))
        loss.backward()
        optimizer.step()
    metric = Accuracy()
    model.update_metric((x, y), model((x, y)), metric)
    assert metric.compute().item() > 0.95


# ----- ComposerModel defaults ---------------------------------------------------------------------------------------


class _Minimal(ComposerModel):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, batch):
        return self.linear(batch[0])

    def loss(self, outputs, batch):
        return F.cross_entropy(outputs, self.targets(batch))


def test_composer_model_is_abstract():
    with pytest.raises(TypeError):
        ComposerModel()


def test_composer_model_defaults():
    model = _Minimal()
    batch = _batch()
    assert model.get_metrics() == {} and model.get_metrics(is_train=True) == {}
    assert model.targets(batch) is batch[1]
    assert model.targets({"input_ids": torch.zeros(2), "labels": batch[1]}) is batch[1]
    with pytest.raises(NotImplementedError, match=r"_Minimal.*update_metric.*Accuracy"):
        model.update_metric(batch, model(batch), Accuracy())
    with pytest.raises(ValueError, match="override _Minimal.targets"):
        model.targets(torch.zeros(3))


def test_mlp_shapes_and_validation():
    model = MLP(in_features=256, hidden=(512, 512), num_classes=10)
    assert model(torch.randn(3, 256)).shape == (3, 10)
    assert sum(isinstance(m, torch.nn.Linear) for m in model.modules()) == 3
    assert sum(isinstance(m, torch.nn.Linear) for m in MLP(in_features=2, hidden=(), num_classes=2).modules()) == 1
    with pytest.raises(ValueError, match=r"hidden\[1\]"):
        MLP(in_features=4, hidden=(8, 0), num_classes=2)
    with pytest.raises(ValueError, match="num_classes"):
        MLP(in_features=4, num_classes=0)
