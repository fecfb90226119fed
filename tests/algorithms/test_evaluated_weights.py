"""One set of weights after fit: what evaluation scored is what predict, an export, the model's state dict and a
checkpoint's weights hold (EMA and SWA), and a run resumed from any checkpoint still ends bitwise equal."""

from __future__ import annotations

import pytest
import torch

from composer import Trainer
from composer.algorithms import EMA, SWA
from composer.callbacks import ExportForInference
from composer.core import Callback, Logger, State
from composer.datasets import digits_dataloaders
from composer.models import MLP, ComposerClassifier
from composer.utils.export import export_for_inference

pytest.importorskip("sklearn")


def _model() -> ComposerClassifier:
    torch.manual_seed(0)
    net = MLP(in_features=64, hidden=(32,), num_classes=10)
    return ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), net), num_classes=10)


def _trainer(algorithm, model=None, batch_size=64, **kwargs) -> Trainer:
    train, evaluation = digits_dataloaders(batch_size=batch_size, seed=0)  # 64: 23 batches an epoch
    model = model if model is not None else _model()
    return Trainer(
        model=model,
        train_dataloader=train,
        eval_dataloader=evaluation,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9),
        algorithms=[algorithm],
        progress_bar=False,
        seed=0,
        **{"max_duration": "1ep", **kwargs},
    )


def _accuracy(network, loader) -> float:
    """The accuracy of ``network`` (a module, or a function of the images) over ``loader``, counted by hand, as the
    float32 the metric computes."""
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += int((torch.as_tensor(network(x)).argmax(1) == y).sum())
            total += len(y)
    return float(torch.tensor(correct / total, dtype=torch.float32))


def _predicted_accuracy(trainer: Trainer, loader) -> float:
    predictions = iter(torch.cat(trainer.predict(loader)))
    return _accuracy(lambda x: torch.stack([next(predictions) for _ in range(len(x))]), loader)


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_after_fit_predict_exports_and_the_state_dict_hold_the_weights_eval_scored(tmp_path):
    export = ExportForInference(tmp_path / "callback", save_format="torchscript")
    ema = EMA(half_life="5ba")
    trainer = _trainer(ema, callbacks=[export])
    trainer.fit()
    evaluation = trainer.state.evaluators[0].dataloader.dataloader
    scored = trainer.eval()["metrics/eval/Accuracy"]
    assert ema.training_weights is not None
    raw = _model()
    raw.load_state_dict(ema.training_weights)
    raw.eval()
    assert _accuracy(raw.module, evaluation) != scored  # the averaged weights score otherwise: this checks something

    assert _predicted_accuracy(trainer, evaluation) == scored

    torch.save(trainer.state.model.state_dict(), tmp_path / "mine.pt")  # the user's own save, into a fresh model
    fresh = _model()
    fresh.load_state_dict(torch.load(tmp_path / "mine.pt"))
    fresh.eval()
    assert _accuracy(fresh.module, evaluation) == scored

    # Exported at FIT_END by the callback, and after fit by hand: TorchScript and ONNX.
    assert _accuracy(torch.jit.load(str(export.results[0].path)), evaluation) == scored
    sample = next(iter(evaluation))[0][:2]
    script = export_for_inference(trainer.state.model, "torchscript", tmp_path / "model.pt", sample)
    assert _accuracy(torch.jit.load(str(script.path)), evaluation) == scored
    pytest.importorskip("onnxruntime")
    import onnxruntime

    onnx = export_for_inference(trainer.state.model, "onnx", tmp_path / "model.onnx", sample, dynamo=False)
    session = onnxruntime.InferenceSession(str(onnx.path))
    name = session.get_inputs()[0].name
    assert _accuracy(lambda x: session.run(None, {name: x.numpy()})[0], evaluation) == scored
    trainer.close()


class EvalAccuracy(Callback):
    """The accuracy of every evaluation, by the batch count it ran at."""

    def __init__(self) -> None:
        self.by_batch: dict[int, float] = {}

    def eval_end(self, state: State, logger: Logger) -> None:
        self.by_batch[int(state.timer.batch)] = float(state.eval_metrics["eval"]["Accuracy"].compute())


def test_every_checkpoint_holds_the_weights_its_evaluation_scored_and_resumes_bitwise(tmp_path):
    def trainer(**kwargs) -> tuple[Trainer, EMA]:
        ema = EMA(half_life="5ba")
        return _trainer(ema, batch_size=128, **kwargs), ema  # 12 batches an epoch

    accuracies = EvalAccuracy()
    whole, ema = trainer(max_duration="2ep", save_folder=str(tmp_path / "ckpt"), callbacks=[accuracies])
    whole.fit()
    evaluation = whole.state.evaluators[0].dataloader.dataloader
    final, final_training = _state(whole.state.model), {k: v.clone() for k, v in (ema.training_weights or {}).items()}
    assert sorted(accuracies.by_batch) == [12, 24]
    for batch in (12, 24):  # a checkpoint from the middle of the run, and the last one
        path = str(tmp_path / "ckpt" / f"ep{batch // 12}-ba{batch}-rank0.pt")
        weights_only, _ = trainer(load_path=path, load_weights_only=True)
        assert weights_only.eval()["metrics/eval/Accuracy"] == accuracies.by_batch[batch]
        weights_only.state.model.eval()
        assert _accuracy(weights_only.state.model.module, evaluation) == accuracies.by_batch[batch]
        weights_only.close()
    # Resumed from the middle: the same training weights, average and final model, bit for bit.
    resumed, resumed_ema = trainer(max_duration="2ep", load_path=str(tmp_path / "ckpt" / "ep1-ba12-rank0.pt"))
    resumed.fit()
    _assert_equal(_state(resumed.state.model), final)
    assert resumed_ema.training_weights is not None
    _assert_equal(resumed_ema.training_weights, final_training)
    # A second fit trains on from the training weights, as one longer fit does.
    whole.fit(duration="1ep")
    longer, _ = trainer(max_duration="3ep")
    longer.fit()
    _assert_equal(_state(whole.state.model), _state(longer.state.model))
    for each in (whole, resumed, longer):
        each.close()


def test_swa_ends_with_the_mean_keeps_the_trained_weights_and_a_second_fit_trains_on_from_them(tmp_path):
    def swa() -> SWA:
        return SWA(swa_start=0.5, anneal_epochs=1, swa_lr=0.05)

    algorithm = swa()
    trainer = _trainer(algorithm, max_duration="2ep", save_folder=str(tmp_path / "ckpt"))
    trainer.fit()
    evaluation = trainer.state.evaluators[0].dataloader.dataloader
    scored = trainer.eval()["metrics/eval/Accuracy"]
    assert _predicted_accuracy(trainer, evaluation) == scored
    trained = algorithm.training_weights
    assert trained is not None and trained.keys() == trainer.state.model.state_dict().keys()
    assert any(not torch.equal(trained[k], v) for k, v in trainer.state.model.state_dict().items())
    # The last checkpoint: the mean as the model's weights, the trained ones in SWA's state.
    last = str(tmp_path / "ckpt" / "ep2-ba46-rank0.pt")
    weights_only = _trainer(swa(), load_path=last, load_weights_only=True)
    assert weights_only.eval()["metrics/eval/Accuracy"] == scored
    # Extending the run in this process or from the checkpoint trains on from the trained weights, alike.
    resumed = _trainer(swa(), max_duration="3ep", load_path=last)
    resumed.fit()
    start = {}

    class AtFitStart(Callback):
        def fit_start(self, state: State, logger: Logger) -> None:
            start.update(_state(state.model))

    trainer.state.callbacks.append(AtFitStart())
    trainer.fit(duration="1ep")
    _assert_equal({k: start[k] for k in trained}, {k: v.clone() for k, v in trained.items()})
    _assert_equal(_state(trainer.state.model), _state(resumed.state.model))
    for each in (trainer, weights_only, resumed):
        each.close()
