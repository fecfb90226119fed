"""NoOpModel: the stand-in's outputs have the shape the model's loss and metrics expect; the Trainer trains the one
parameter instead of the model; what happens with model-surgery methods before and after it."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import Algorithm, BlurPool, NoOpModel, NoOpModelHparams
from composer.algorithms.no_op_model import NoOpModelClass
from composer.core import Event
from composer.functional import no_op_model
from composer.models import GPT, ComposerClassifier, GPTConfig
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def _data(num_classes: int = 10) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, num_classes, (8,), generator=g)
    return DataLoader(TensorDataset(images, labels), batch_size=4)


def test_classifier_stand_in_returns_scaled_one_hot_logits_and_uses_the_models_loss():
    model = ComposerClassifier(nn.Linear(4, 5), num_classes=5)
    stand_in = no_op_model(model)
    targets = torch.tensor([4, 0, 2])
    batch = (torch.randn(3, 4), targets)
    outputs = stand_in(batch)
    torch.testing.assert_close(outputs, 1.5 * torch.eye(5)[targets])
    torch.testing.assert_close(stand_in.loss(outputs, batch), F.cross_entropy(1.5 * torch.eye(5)[targets], targets))
    assert [name for name, _ in stand_in.named_parameters()] == ["weights"]
    assert list(stand_in.state_dict()) == ["weights"]
    assert set(stand_in.get_metrics(is_train=False)) == set(model.get_metrics(is_train=False))


def test_dense_targets_and_unknown_class_counts_come_back_as_floats():
    model = ComposerClassifier(nn.Linear(4, 3), num_classes=3)
    soft = torch.tensor([[0.2, 0.8, 0.0]])  # MixUp-style dense targets
    torch.testing.assert_close(no_op_model(model)((torch.randn(1, 4), soft)), 1.5 * soft)
    no_classes = ComposerClassifier(nn.Linear(4, 3))  # num_classes unknown
    torch.testing.assert_close(
        no_op_model(no_classes)((torch.randn(2, 4), torch.tensor([2, 1]))), torch.tensor([3.0, 1.5])
    )


def test_language_model_stand_in_returns_vocabulary_sized_outputs_for_ignored_labels_too():
    model = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8, vocab_size=11, max_sequence_length=8))
    labels = torch.tensor([[3, 10, -100]])
    outputs = no_op_model(model)({"input_ids": labels.clamp(min=0), "labels": labels})
    assert outputs.shape == (1, 3, 11)
    torch.testing.assert_close(outputs.argmax(-1), torch.tensor([[3, 10, 0]]))  # -100 (ignored) counts as class 0


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="stands in for a ComposerModel"):
        NoOpModelClass(nn.Linear(2, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_classes=0 must be a positive int"):
        no_op_model(ComposerClassifier(nn.Linear(2, 2)), num_classes=0)


def test_trainer_trains_the_stand_in_and_leaves_the_model_alone():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8, num_classes=10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(
        model=model,
        train_dataloader=_data(),
        eval_dataloader=_data(),
        max_duration="2ba",
        algorithms=[NoOpModel()],
        optimizers=optimizer,
        progress_bar=False,
        log_to_console=False,
        seed=0,
    )
    stand_in = trainer.state.model
    assert isinstance(stand_in, NoOpModelClass)
    assert [p for group in optimizer.param_groups for p in group["params"]] == [stand_in.weights]
    trainer.fit()
    assert stand_in.weights.item() != 1.5  # stepped
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the real model: untouched
    assert trainer.state.eval_metrics  # evaluation ran with the model's own metrics
    trainer.close()


def _surgery_then_no_op(algorithms: list[Algorithm]) -> tuple[Trainer, list[warnings.WarningMessage]]:
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(
            model=cifar_resnet(depth=8, num_classes=10),
            train_dataloader=_data(),
            max_duration="2ba",
            algorithms=algorithms,
            progress_bar=False,
            log_to_console=False,
            seed=0,
        )
        trainer.fit()
    trainer.close()
    return trainer, list(caught)


def test_surgery_after_no_op_model_finds_nothing_and_warns():
    blurpool = BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)
    trainer, caught = _surgery_then_no_op([NoOpModel(), blurpool])
    assert isinstance(trainer.state.model, NoOpModelClass)
    messages = [str(w.message) for w in caught]
    assert any("replaced nothing in NoOpModelClass" in m and "found no module of those classes" in m for m in messages)
    assert sum(p.numel() for p in trainer.state.model.parameters()) == 1


def test_surgery_before_no_op_model_changes_the_model_that_is_then_not_trained():
    blurpool = BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)
    trainer, _ = _surgery_then_no_op([blurpool, NoOpModel()])
    assert isinstance(trainer.state.model, NoOpModelClass)
    params = [p for group in trainer.state.optimizers[0].param_groups for p in group["params"]]
    assert params == [trainer.state.model.weights]


def test_an_algorithm_that_swaps_in_a_non_composer_model_is_refused():
    class Swap(Algorithm):
        def match(self, event, state):
            return event == Event.INIT

        def apply(self, event, state, logger):
            state.model = nn.Linear(2, 2)

    with pytest.raises(TypeError, match="replaced the model at Event.INIT with a Linear"):
        Trainer(model=cifar_resnet(depth=8), train_dataloader=_data(), max_duration="1ba", algorithms=[Swap()])


def test_hparams():
    assert repr(NoOpModelHparams.from_dict({}).initialize_object()) == "NoOpModel()"
