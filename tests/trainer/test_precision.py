"""fp16 with a GradScaler (run on CPU here; the same path runs on CUDA), bf16, and the CUDA checks."""

import pytest
import torch

from composer import Trainer
from composer.core import Callback
from composer.trainer.precision import make_grad_scaler
from tests.common import SimpleModel, make_dataloader

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def make_trainer(precision, device="cpu", **kwargs):
    torch.manual_seed(0)
    model = kwargs.pop("model", None) or SimpleModel()
    kwargs.setdefault("max_duration", "2ba")
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        precision=precision,
        device=device,
        progress_bar=False,
        seed=0,
        **kwargs,
    )


class InfOnFirstBatch(SimpleModel):
    """Produces an infinite loss on the first training batch only."""

    def loss(self, outputs, batch):
        loss = super().loss(outputs, batch)
        self.calls = getattr(self, "calls", 0) + 1
        return loss * float("inf") if self.calls == 1 else loss


def test_amp_skips_steps_with_inf_gradients_and_backs_off_the_scale():
    model = InfOnFirstBatch()
    # The scaler's skip is what is tested; the default check_finite would stop the run at the infinite loss.
    trainer = make_trainer("amp", model=model, max_duration="1ba", check_finite=False)
    before = [p.detach().clone() for p in model.parameters()]
    initial_scale = trainer.state.scaler.get_scale()
    trainer.fit()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # step skipped
    assert trainer.state.scaler.get_scale() == initial_scale * 0.5
    trainer.fit(duration="1ba")  # a finite batch now updates the weights
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


class GradNorm(Callback):
    def __init__(self):
        self.norms = []

    def after_train_batch(self, state, logger):
        grads = [p.grad.flatten() for p in state.model.parameters() if p.grad is not None]
        self.norms.append(torch.cat(grads).norm().item())


def test_amp_unscales_before_clipping_and_before_after_train_batch():
    clipped, unclipped = GradNorm(), GradNorm()
    make_trainer("amp", grad_clip_norm=0.01, callbacks=[clipped]).fit()
    make_trainer("amp", callbacks=[unclipped]).fit()
    # Unscaled gradients are O(1), not x65536; clipping then brings them to the norm asked for.
    assert all(0.05 < n < 100 for n in unclipped.norms)
    assert clipped.norms == pytest.approx([0.01, 0.01], rel=1e-3)


def test_amp_update_close_to_fp32_update():
    a, b = make_trainer("fp32"), make_trainer("amp")
    a.fit()
    b.fit()
    for p, q in zip(a.state.model.parameters(), b.state.model.parameters()):
        torch.testing.assert_close(p, q, atol=2e-3, rtol=1e-2)


def test_grad_scaler_state_is_checkpointed():
    trainer = make_trainer("amp")
    trainer.fit()
    saved = trainer.state.state_dict()["scaler"]
    assert saved["scale"] == trainer.state.scaler.get_scale()


def test_no_scaler_outside_amp():
    assert make_trainer("bf16").state.scaler is None
    assert make_grad_scaler(make_trainer("fp32").state.precision, torch.device("cpu")) is None


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "amp", "bf16"])
def test_cuda_training_puts_batches_and_model_on_the_device(precision):
    devices = []

    class WhereIsTheBatch(Callback):
        def after_dataloader(self, state, logger):
            devices.append(state.batch[0].device.type)

    trainer = make_trainer(precision, device="cuda", callbacks=[WhereIsTheBatch()])
    trainer.fit()
    assert devices == ["cuda", "cuda"]
    assert all(p.device.type == "cuda" for p in trainer.state.model.parameters())
    assert (trainer.state.scaler is not None) == (precision == "amp")


@needs_cuda
@pytest.mark.gpu
def test_cuda_amp_skips_inf_steps():
    model = InfOnFirstBatch()
    trainer = make_trainer("amp", device="cuda", model=model, max_duration="1ba")
    before = [p.detach().clone() for p in model.parameters()]
    trainer.fit()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
