"""EMA: the average follows the hand-written recursion, evaluation sees it, training keeps the raw weights."""

from __future__ import annotations

import pytest
import torch

from composer import Trainer
from composer.algorithms import EMA, EMAHparams
from composer.algorithms.ema import compute_ema, smoothing_from_half_life
from composer.core import Callback, Logger, State
from composer.models import ComposerClassifier
from tests.common import SimpleModel, make_dataloader


class Weights(Callback):
    """The model's weights (parameters and buffers) after every batch and at every evaluation start."""

    def __init__(self) -> None:
        self.after_batch: list[dict[str, torch.Tensor]] = []
        self.at_eval: list[dict[str, torch.Tensor]] = []

    def batch_end(self, state: State, logger: Logger) -> None:
        self.after_batch.append({k: v.clone() for k, v in state.model.state_dict().items()})

    def eval_start(self, state: State, logger: Logger) -> None:
        self.at_eval.append({k: v.clone() for k, v in state.model.state_dict().items()})


def _bn_model() -> ComposerClassifier:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return ComposerClassifier(net, num_classes=3)


def _trainer(algorithms, model=None, callbacks=(), eval_interval="1ep", **kwargs) -> Trainer:
    model = model if model is not None else _bn_model()
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=8, batch_size=4, seed=1),
        eval_interval=eval_interval,
        max_duration="2ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9),
        algorithms=algorithms,
        callbacks=list(callbacks),
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def _hand_ema(snapshots: list[dict[str, torch.Tensor]], smoothing: float) -> dict[str, torch.Tensor]:
    """ema_1 = w_1; ema_k = smoothing * ema_{k-1} + (1 - smoothing) * w_k (integer buffers: the latest value)."""
    ema = {k: v.clone() for k, v in snapshots[0].items()}
    for snapshot in snapshots[1:]:
        for k, v in snapshot.items():
            ema[k] = smoothing * ema[k] + (1 - smoothing) * v if v.is_floating_point() else v.clone()
    return ema


def test_compute_ema_formula_for_modules_and_mappings():
    torch.manual_seed(0)
    model, ema_model = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    model.weight.data.normal_()
    model.running_mean.normal_()
    model.num_batches_tracked.fill_(7)
    expected_weight = 0.9 * ema_model.weight.detach() + 0.1 * model.weight.detach()
    expected_mean = 0.9 * ema_model.running_mean + 0.1 * model.running_mean
    compute_ema(model, ema_model, smoothing=0.9)
    torch.testing.assert_close(ema_model.weight.detach(), expected_weight)
    torch.testing.assert_close(ema_model.running_mean, expected_mean)
    assert int(ema_model.num_batches_tracked) == 7  # integer buffers are copied

    mapping = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    compute_ema(model, mapping, smoothing=0.75)
    torch.testing.assert_close(mapping["weight"], 0.25 * model.weight.detach())


@pytest.mark.parametrize(("kwargs", "smoothing"), [({"smoothing": 0.5}, 0.5), ({"half_life": "3ba"}, 2 ** (-1 / 3))])
def test_average_matches_the_hand_written_recursion(kwargs, smoothing):
    ema, weights = EMA(**kwargs), Weights()
    trainer = _trainer([ema], callbacks=[weights])
    trainer.fit()
    assert ema.update_smoothing == pytest.approx(smoothing)
    assert ema.ema_weights is not None
    expected = _hand_ema(weights.after_batch, smoothing)
    assert ema.ema_weights.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(ema.ema_weights[name], value, msg=name)


def test_update_interval_and_start():
    ema, weights = EMA(smoothing=0.5, update_interval="2ba", ema_start="4ba"), Weights()
    _trainer([ema], callbacks=[weights]).fit()
    # Updates at batches 4, 6 and 8 (1-based): the first copies the weights.
    expected = _hand_ema([weights.after_batch[i] for i in (3, 5, 7)], 0.5)
    assert ema.ema_weights is not None
    for name, value in expected.items():
        torch.testing.assert_close(ema.ema_weights[name], value)


def test_epoch_half_life_updates_at_epoch_end():
    ema, weights = EMA(half_life="1ep"), Weights()
    _trainer([ema], callbacks=[weights]).fit()
    expected = _hand_ema([weights.after_batch[3], weights.after_batch[7]], 0.5)
    assert ema.ema_weights is not None
    for name, value in expected.items():
        torch.testing.assert_close(ema.ema_weights[name], value)


def test_evaluation_uses_the_average_and_training_keeps_the_raw_weights():
    ema, weights = EMA(smoothing=0.7), Weights()
    trainer = _trainer([ema], callbacks=[weights])
    trainer.fit()
    plain = _trainer([])
    plain.fit()
    # Training is unchanged by EMA: the weights it trained are those of a run without it.
    assert ema.training_weights is not None
    for name, q in plain.state.model.state_dict().items():
        torch.testing.assert_close(ema.training_weights[name], q, msg=name)
    # Each evaluation (end of epochs 1 and 2) ran on the average of the updates so far.
    assert len(weights.at_eval) == 2
    for evaluated, upto in zip(weights.at_eval, (4, 8)):
        for name, value in _hand_ema(weights.after_batch[:upto], 0.7).items():
            torch.testing.assert_close(evaluated[name], value, msg=name)
    # After fit the model holds the average that the last evaluation scored, and Trainer.eval() leaves it there.
    final = {k: v.clone() for k, v in trainer.state.model.state_dict().items()}
    for name, value in weights.at_eval[-1].items():
        assert torch.equal(final[name], value), name
    metrics = trainer.eval()
    averaged = _bn_model()
    averaged.load_state_dict(final)
    averaged.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in make_dataloader(num_samples=8, batch_size=4, seed=1):
            correct += int((averaged.module(x).argmax(1) == y).sum())
            total += len(y)
    assert metrics["metrics/eval/Accuracy"] == pytest.approx(correct / total)
    for name, value in final.items():
        assert torch.equal(trainer.state.model.state_dict()[name], value), name


def test_no_swap_before_the_average_exists():
    ema, weights = EMA(smoothing=0.5, ema_start="1.0dur"), Weights()
    trainer = _trainer([ema], callbacks=[weights], eval_interval="1ba")
    trainer.fit()
    # Every evaluation before the very end saw the raw weights of that moment.
    for evaluated, after in zip(weights.at_eval[:-1], weights.after_batch[:-1]):
        for name, value in after.items():
            assert torch.equal(evaluated[name], value), name


def test_default_half_life_is_1000_batches():
    assert EMA().update_smoothing == pytest.approx(2 ** (-1 / 1000))
    assert EMA(smoothing=0.9).update_smoothing == 0.9


def test_smoothing_from_half_life():
    assert smoothing_from_half_life(4) ** 4 == pytest.approx(0.5)
    assert smoothing_from_half_life(10, update_interval=5) == pytest.approx(2**-0.5)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"half_life": "10ba", "smoothing": 0.9}, "half_life"),
        ({"smoothing": 1.5}, "smoothing"),
        ({"smoothing": -0.1}, "smoothing"),
        ({"half_life": "0ba"}, "half_life"),
        ({"half_life": "100sp"}, "half_life"),
        ({"half_life": "10ba", "update_interval": "1ep"}, "update_interval"),
        ({"half_life": "10ba", "update_interval": "0ba"}, "update_interval"),
        ({"ema_start": "1.5dur"}, "ema_start"),
        ({"ema_start": "10tok"}, "ema_start"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EMA(**kwargs)
    with pytest.raises(ValueError, match=name):
        EMAHparams(**kwargs)


def test_compute_ema_rejects_mismatched_models_and_bad_smoothing():
    with pytest.raises(ValueError, match="ema_model"):
        compute_ema(torch.nn.Linear(1, 1), {}, 0.5)
    with pytest.raises(ValueError, match="smoothing"):
        compute_ema(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), 2.0)


def test_works_with_a_model_without_buffers():
    ema = EMA(half_life="2ba")
    _trainer([ema], model=SimpleModel()).fit()
    assert ema.ema_weights is not None and set(ema.ema_weights) == set(SimpleModel().state_dict())


def test_matches_torch_averaged_model_and_evaluates_with_its_batchnorm_statistics():
    """An independent reference: torch's AveragedModel, an EMA of the parameters and buffers, updated alongside."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    ema = EMA(half_life="3ba")
    model = _bn_model()
    reference = AveragedModel(model.module, multi_avg_fn=get_ema_multi_avg_fn(ema.update_smoothing), use_buffers=True)

    class UpdateReference(Callback):
        def __init__(self) -> None:
            self.eval_outputs: list[torch.Tensor] = []

        def batch_end(self, state: State, logger: Logger) -> None:
            reference.update_parameters(state.model.module)  # its first update copies, as EMA's does

        def eval_after_forward(self, state: State, logger: Logger) -> None:
            self.eval_outputs.append(state.outputs.detach().clone())

    recorder = UpdateReference()
    trainer = _trainer([ema], model=model, callbacks=[recorder])
    trainer.fit()
    assert ema.ema_weights is not None
    # Weights and BatchNorm running statistics are averaged alike (torch also averages the integer batch count,
    # which EMA copies; neither is used in evaluation with the default momentum).
    averaged = {name: value for name, value in reference.module.state_dict().items() if value.is_floating_point()}
    assert {"1.running_mean", "1.running_var", "0.weight"} <= set(averaged)
    for name, value in averaged.items():
        torch.testing.assert_close(ema.ema_weights[f"module.{name}"], value, msg=name)
    # Evaluation runs the averaged weights with the averaged statistics, in eval mode: the same logits.
    recorder.eval_outputs.clear()
    trainer.eval()
    reference.eval()
    with torch.no_grad():
        expected = [reference(x) for x, _ in make_dataloader(num_samples=8, batch_size=4, seed=1)]
    assert len(recorder.eval_outputs) == len(expected) == 2
    for seen, logits in zip(recorder.eval_outputs, expected):
        torch.testing.assert_close(seen, logits)
