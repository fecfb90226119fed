import math

import pytest
import torch

import composer.callbacks.optimizer_monitor as optimizer_monitor_module
from composer import Callback, Trainer
from composer.callbacks import (
    OptimizerMonitor,
    OptimizerMonitorHparams,
    optimizer_norms,
    parameter_updates,
    snapshot_parameters,
)
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


def norm(tensor):
    """The L2 norm by the formula, in Python floats: sqrt(sum of squares)."""
    return math.sqrt(sum(v * v for v in tensor.detach().flatten().tolist()))


def test_norms_match_a_hand_computation_of_a_manual_sgd_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model(torch.randn(5, 3)).square().sum().backward()
    before = snapshot_parameters(model)
    old = [t.clone() for t in before]
    lr = 0.1
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    values = optimizer_norms(model, parameter_updates(model, before))

    names = [n for n, _ in model.named_parameters()]
    grads = {n: p.grad for n, p in model.named_parameters()}
    params = dict(model.named_parameters())
    for n in names:
        assert values[f"l2_norm/grad/{n}"] == pytest.approx(norm(grads[n]), rel=1e-5)
        assert values[f"l2_norm/param/{n}"] == pytest.approx(norm(params[n]), rel=1e-5)
        # SGD moves each parameter by lr * grad.
        assert values[f"l2_norm/update/{n}"] == pytest.approx(lr * norm(grads[n]), rel=1e-4)
        assert values[f"l2_norm_ratio/update_param/{n}"] == pytest.approx(
            lr * norm(grads[n]) / norm(params[n]), rel=1e-4
        )
    total = lambda ts: math.sqrt(sum(norm(t) ** 2 for t in ts))  # noqa: E731
    assert values["l2_norm/grad/global"] == pytest.approx(total(grads.values()), rel=1e-5)
    assert values["l2_norm/param/global"] == pytest.approx(total(params.values()), rel=1e-5)
    assert values["l2_norm/update/global"] == pytest.approx(lr * total(grads.values()), rel=1e-4)
    assert values["l2_norm_ratio/update_param/global"] == pytest.approx(
        lr * total(grads.values()) / total(params.values()), rel=1e-4
    )
    assert all(type(v) is float for v in values.values())
    assert all(torch.equal(-u, p.detach() - o) for u, p, o in zip(before, model.parameters(), old))  # reused memory


def test_only_global_no_gradients_and_bad_snapshot():
    layer = torch.nn.Linear(2, 2)
    assert set(optimizer_norms(layer)) == {"l2_norm/param/weight", "l2_norm/param/bias", "l2_norm/param/global"}
    unchanged = optimizer_norms(layer, parameter_updates(layer, snapshot_parameters(layer)), only_global=True)
    assert unchanged["l2_norm/update/global"] == 0.0 and unchanged["l2_norm_ratio/update_param/global"] == 0.0
    assert set(unchanged) == {
        "l2_norm/param/global",
        "l2_norm/update/global",
        "l2_norm_ratio/update_param/global",
    }
    with pytest.raises(ValueError, match="updates holds 1 tensors .* parameter_updates"):
        optimizer_norms(layer, [torch.zeros(2, 2)])
    with pytest.raises(ValueError, match="before holds 2 tensors .* snapshot_parameters"):
        parameter_updates(layer, [torch.zeros(2, 2), torch.zeros(3)])


class Reference(Callback):
    """Records, per batch, the parameters before the step and the gradients and parameters after it."""

    def __init__(self):
        self.before, self.grads, self.after = [], [], []

    def after_train_batch(self, state, logger):
        self.before.append({n: p.detach().clone() for n, p in state.model.named_parameters()})

    def batch_end(self, state, logger):
        self.grads.append({n: p.grad.clone() for n, p in state.model.named_parameters()})
        self.after.append({n: p.detach().clone() for n, p in state.model.named_parameters()})


def train(monitor, duration="4ba", lr=0.5):
    torch.manual_seed(0)
    model = SimpleModel()
    memory, reference = InMemoryLogger(), Reference()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=lr),
        callbacks=[reference, monitor],
        loggers=[memory],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return memory, reference


def test_logs_every_interval_the_norms_of_the_step_taken():
    memory, ref = train(OptimizerMonitor(log_interval="2ba"))
    assert memory.steps("l2_norm/update/global") == [2, 4]
    for name in ["module.0.weight", "module.2.bias"]:
        for position, batch in enumerate([1, 3]):  # batches 1 and 3 complete 2 and 4 batches
            grad, before, after = ref.grads[batch][name], ref.before[batch][name], ref.after[batch][name]
            assert memory.values(f"l2_norm/grad/{name}")[position] == pytest.approx(norm(grad), rel=1e-5)
            assert memory.values(f"l2_norm/param/{name}")[position] == pytest.approx(norm(after), rel=1e-5)
            assert memory.values(f"l2_norm/update/{name}")[position] == pytest.approx(0.5 * norm(grad), rel=1e-4)
            assert memory.values(f"l2_norm_ratio/update_param/{name}")[position] == pytest.approx(
                norm(after - before) / norm(after), rel=1e-4
            )


def test_nothing_is_copied_or_computed_between_intervals(monkeypatch):
    calls = {"snapshot": 0, "norms": 0}

    def counting(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(
        optimizer_monitor_module,
        "snapshot_parameters",
        counting("snapshot", optimizer_monitor_module.snapshot_parameters),
    )
    monkeypatch.setattr(
        optimizer_monitor_module, "optimizer_norms", counting("norms", optimizer_monitor_module.optimizer_norms)
    )
    memory, _ = train(OptimizerMonitor(log_interval=3, only_global=True), duration="7ba")
    assert calls == {"snapshot": 2, "norms": 2}
    assert memory.steps("l2_norm/grad/global") == [3, 6]
    assert "l2_norm/grad/module.0.weight" not in memory.data


def test_epoch_interval_and_without_update_norms():
    memory, _ = train(OptimizerMonitor(log_interval="1ep", log_update_norms=False), duration="2ep")
    assert memory.steps("l2_norm/grad/global") == [1, 5]  # after the first batch of each 4-batch epoch
    assert "l2_norm/update/global" not in memory.data


@pytest.mark.parametrize("interval", ["0ba", "0.5dur", "ten", 1.5])
def test_bad_interval_names_the_argument(interval):
    with pytest.raises(ValueError, match="log_interval="):
        OptimizerMonitor(log_interval=interval)
    with pytest.raises(ValueError, match="log_interval"):
        OptimizerMonitorHparams(log_interval=str(interval))


def test_hparams_build_the_callback():
    monitor = OptimizerMonitorHparams.from_dict({"log_interval": "5ba", "only_global": True}).initialize_object()
    assert isinstance(monitor, OptimizerMonitor) and monitor.only_global and monitor.log_interval.value == 5
