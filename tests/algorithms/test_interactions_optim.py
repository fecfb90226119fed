"""SAM, SWA, EMA, ScaleSchedule and GradientClipping together: with each other, accumulation, precision, checkpoints."""

from __future__ import annotations

import io

import pytest
import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import EMA, SAM, SWA, GradientClipping, ScaleSchedule
from composer.core import Callback, Event, Logger, State
from composer.models import ComposerClassifier
from tests.common import EventRecorder, SimpleModel, make_dataloader


def _bn_model() -> ComposerClassifier:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return ComposerClassifier(net, num_classes=3)


def _trainer(model, algorithms, loader: DataLoader | None = None, **kwargs) -> Trainer:
    kwargs.setdefault("max_duration", "2ep")
    return Trainer(
        model=model,
        train_dataloader=loader if loader is not None else make_dataloader(num_samples=16, batch_size=4),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9),
        algorithms=algorithms,
        progress_bar=False,
        seed=0,
        **kwargs,
    )


class Checkpointer(Callback):
    """Saves ``state.state_dict()`` (to bytes, as a checkpoint file would hold it) at one epoch's checkpoint event."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.saved: bytes | None = None

    def epoch_checkpoint(self, state: State, logger: Logger) -> None:
        if int(state.timer.epoch) == self.epoch:
            buffer = io.BytesIO()
            torch.save(state.state_dict(), buffer)
            self.saved = buffer.getvalue()

    def load(self) -> dict:
        assert self.saved is not None
        return torch.load(io.BytesIO(self.saved), weights_only=True)


class EvalWeights(Callback):
    """The model's parameters at every evaluation start."""

    def __init__(self) -> None:
        self.weights: list[list[torch.Tensor]] = []

    def eval_start(self, state: State, logger: Logger) -> None:
        self.weights.append([p.detach().clone() for p in state.model.parameters()])


# ---- SAM ----------------------------------------------------------------------------------------------------------


def test_sam_with_grad_accum_equals_sam_on_the_whole_batch():
    loader = make_dataloader(num_samples=16, batch_size=8)
    torch.manual_seed(0)
    whole, split = SimpleModel(), SimpleModel()
    split.load_state_dict(whole.state_dict())
    _trainer(whole, [SAM(rho=0.2)], loader).fit()
    _trainer(split, [SAM(rho=0.2)], loader, grad_accum=2).fit()
    for p, q in zip(whole.parameters(), split.parameters()):
        torch.testing.assert_close(p, q)


def test_sam_with_bf16_reruns_the_batch_under_autocast():
    output_dtypes: list[torch.dtype] = []

    class OutputDtype(Callback):
        def after_forward(self, state: State, logger: Logger) -> None:
            output_dtypes.append(state.outputs.dtype)

    recorder = EventRecorder()
    trainer = _trainer(
        SimpleModel(), [SAM(rho=0.05)], precision="bf16", grad_accum=2, callbacks=[recorder, OutputDtype()]
    )
    trainer.fit()
    batches = 8
    assert recorder.events.count(Event.BATCH_START) == batches
    assert recorder.events.count(Event.BEFORE_TRAIN_BATCH) == 2 * batches  # both passes
    assert recorder.events.count(Event.BEFORE_FORWARD) == 2 * 2 * batches  # both passes, two microbatches each
    assert output_dtypes == [torch.bfloat16] * (4 * batches)
    assert torch.isfinite(trainer.state.loss).all()
    assert all(torch.isfinite(p).all() for p in trainer.state.model.parameters())


def test_sam_with_amp_fails_at_init():
    with pytest.raises(ValueError, match="amp"):
        _trainer(SimpleModel(), [SAM()], precision="amp", device="cpu")


def test_gradient_clipping_applies_to_both_sam_passes():
    norms: list[float] = []

    class GradNorm(Callback):
        def after_train_batch(self, state: State, logger: Logger) -> None:
            grads = [p.grad for p in state.model.parameters() if p.grad is not None]
            norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    _trainer(SimpleModel(), [SAM(), GradientClipping("norm", 0.01)], callbacks=[GradNorm()]).fit()
    assert len(norms) == 16 and max(norms) <= 0.01 + 1e-6


def test_ema_updates_once_per_sam_step():
    ema, after = EMA(smoothing=0.5), []

    class AfterBatch(Callback):
        def batch_end(self, state: State, logger: Logger) -> None:
            after.append([p.detach().clone() for p in state.model.parameters()])

    trainer = _trainer(SimpleModel(), [SAM(), ema], callbacks=[AfterBatch()])
    trainer.fit()
    expected = after[0]
    for weights in after[1:]:
        expected = [0.5 * e + 0.5 * w for e, w in zip(expected, weights)]
    assert ema.ema_weights is not None
    for (name, _), e in zip(trainer.state.model.named_parameters(), expected):
        torch.testing.assert_close(ema.ema_weights[name], e)


# ---- SWA and EMA with checkpoints and evaluation ------------------------------------------------------------------


def test_swa_resumes_from_a_weights_only_checkpoint_and_evaluates_the_average():
    def run(callbacks, checkpoint=None) -> tuple[Trainer, SWA]:
        swa = SWA(swa_start=0.5, anneal_epochs=1, swa_lr=0.05)
        trainer = _trainer(
            _bn_model(),
            [swa],
            max_duration="4ep",
            eval_dataloader=make_dataloader(num_samples=8, batch_size=4, seed=1),
            callbacks=callbacks,
        )
        if checkpoint is not None:
            trainer.state.load_state_dict(checkpoint)
        trainer.fit()
        return trainer, swa

    checkpointer, evaluated = Checkpointer(epoch=3), EvalWeights()
    whole, swa = run([checkpointer, evaluated])
    assert swa.num_averaged == 3
    # The last evaluation ran on the averaged weights (copied in at the last EPOCH_END, before the evaluation).
    assert swa.swa_weights is not None
    for p, (name, _) in zip(evaluated.weights[-1], whole.state.model.named_parameters()):
        torch.testing.assert_close(p, swa.swa_weights[name])

    checkpoint = checkpointer.load()
    swa_state = next(a["state"] for a in checkpoint["algorithms"] if a["class"] == "SWA")
    assert swa_state["num_averaged"] == 2 and swa_state["swa_weights"]

    resumed, resumed_swa = run([], checkpoint)
    assert resumed_swa.num_averaged == 3
    for (name, p), q in zip(resumed.state.model.state_dict().items(), whole.state.model.state_dict().values()):
        torch.testing.assert_close(p, q, msg=name)  # averaged weights and recomputed BN statistics
    assert resumed.eval() == whole.eval()


def test_ema_resumes_from_a_weights_only_checkpoint_and_evaluates_the_average():
    def run(callbacks, checkpoint=None) -> tuple[Trainer, EMA]:
        ema = EMA(half_life="2ba")
        trainer = _trainer(
            _bn_model(),
            [ema],
            max_duration="3ep",
            eval_dataloader=make_dataloader(num_samples=8, batch_size=4, seed=1),
            callbacks=callbacks,
        )
        if checkpoint is not None:
            trainer.state.load_state_dict(checkpoint)
        trainer.fit()
        return trainer, ema

    checkpointer, evaluated = Checkpointer(epoch=1), EvalWeights()
    whole, ema = run([checkpointer, evaluated])
    assert ema.ema_weights is not None
    for p, (name, _) in zip(evaluated.weights[-1], whole.state.model.named_parameters()):
        torch.testing.assert_close(p, ema.ema_weights[name])

    # The checkpoint holds both: the raw weights in the model state, the average in the algorithm state.
    checkpoint = checkpointer.load()
    ema_state = next(a["state"] for a in checkpoint["algorithms"] if a["class"] == "EMA")
    assert set(ema_state["ema_weights"]) == set(checkpoint["model"])
    assert not torch.equal(ema_state["ema_weights"]["module.0.weight"], checkpoint["model"]["module.0.weight"])

    resumed, resumed_ema = run([], checkpoint)
    assert resumed_ema.ema_weights is not None
    for name, value in whole.state.model.state_dict().items():
        torch.testing.assert_close(resumed.state.model.state_dict()[name], value, msg=name)
        torch.testing.assert_close(resumed_ema.ema_weights[name], ema.ema_weights[name], msg=name)
    assert resumed.eval() == whole.eval()


@pytest.mark.parametrize("order", ["swa_first", "ema_first"])
def test_swa_and_ema_together_fail_at_init(order: str):
    algorithms = [SWA(), EMA()] if order == "swa_first" else [EMA(), SWA()]
    with pytest.raises(ValueError, match=r"EMA and SWA"):
        _trainer(SimpleModel(), algorithms)


# ---- ScaleSchedule with the run-fraction methods ------------------------------------------------------------------


def test_swa_start_follows_the_scaled_run():
    swa = SWA(swa_start=0.5)
    trainer = _trainer(SimpleModel(), [ScaleSchedule(0.5), swa], max_duration="4ep")
    trainer.fit()
    assert int(trainer.state.timer.epoch) == 2 and swa.num_averaged == 2  # epoch ends at 0.5 and 1.0 of 2 epochs
