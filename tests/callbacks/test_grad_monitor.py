import math

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import GradMonitor, GradMonitorHparams, grad_norms
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


class RawNorms(Callback):
    """The gradient norm before clipping, by the formula sqrt(sum of squares), and the grads the step uses."""

    def __init__(self):
        self.raw, self.used = [], []

    def after_backward(self, state, logger):
        self.raw.append(math.sqrt(sum(float((p.grad**2).sum()) for p in state.model.parameters())))

    def batch_end(self, state, logger):
        self.used.append({n: p.grad.clone() for n, p in state.model.named_parameters()})


def train(monitor, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    memory, raw = InMemoryLogger(), RawNorms()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        max_duration="3ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
        callbacks=[raw, monitor],
        loggers=[memory],
        progress_bar=False,
        **kwargs,
    ).fit()
    return memory, raw


def test_global_norm_matches_the_formula():
    memory, raw = train(GradMonitor())
    assert memory.steps("grad_l2_norm/step") == [0, 1, 2]
    assert memory.values("grad_l2_norm/step") == pytest.approx(raw.raw, rel=1e-5)


def test_norms_are_taken_after_clipping():
    memory, raw = train(GradMonitor(), grad_clip_norm=0.1)
    assert all(r > 0.1 for r in raw.raw)  # every batch was clipped
    assert memory.values("grad_l2_norm/step") == pytest.approx([0.1] * 3, rel=1e-4)


def test_per_layer_norms_are_the_norms_of_the_gradients_the_step_used():
    memory, raw = train(GradMonitor(log_layer_grad_norms=True))
    for name in ["module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"]:
        expected = [float(grads[name].norm()) for grads in raw.used]
        assert memory.values(f"layer_grad_l2_norm/{name}") == pytest.approx(expected, rel=1e-5), name


def test_values_stay_tensors_until_written():
    memory, _ = train(GradMonitor())
    assert isinstance(memory.data["grad_l2_norm/step"][0][2], torch.Tensor)


def test_grad_norms_function_and_hparams():
    layer = torch.nn.Linear(2, 2)
    assert grad_norms(layer) == {}  # no gradients yet
    layer.weight.grad = torch.full((2, 2), 1.0)
    layer.bias.grad = torch.tensor([2.0, 2.0])
    assert float(grad_norms(layer)["grad_l2_norm/step"]) == pytest.approx(math.sqrt(4 + 8))
    assert GradMonitorHparams(log_layer_grad_norms=True).initialize_object().log_layer_grad_norms
