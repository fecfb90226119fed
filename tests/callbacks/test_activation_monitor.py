import math

import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import ActivationMonitor, ActivationMonitorHparams, activation_stats, select_modules
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


def hand_stats(values):
    """The statistics by their definitions, over a flat list of Python floats."""
    finite = [v for v in values if math.isfinite(v)]
    mean = sum(finite) / len(finite)
    return {
        "mean": mean,
        "std": math.sqrt(sum((v - mean) ** 2 for v in finite) / len(finite)),
        "max": max(finite),
        "zero_fraction": sum(v == 0 for v in values) / len(values),
        "inf_count": sum(math.isinf(v) for v in values),
        "nan_count": sum(math.isnan(v) for v in values),
    }


def test_stats_of_known_values():
    values = [0.0, 1.0, 2.0, -3.0, math.inf, -math.inf, math.nan, 0.0, 5.5]
    stats = activation_stats(torch.tensor(values).reshape(3, 3))
    expected = hand_stats(values)
    assert stats.keys() == expected.keys()
    for key, value in expected.items():
        assert stats[key] == pytest.approx(value, rel=1e-6), key
    no_finite = activation_stats(torch.tensor([math.nan, math.inf]))
    assert math.isnan(no_finite["mean"]) and no_finite["nan_count"] == 1 and no_finite["inf_count"] == 1
    with pytest.raises(ValueError, match="tensor must be a non-empty floating-point tensor"):
        activation_stats(torch.tensor([1, 2]))


class HookProbe(Callback):
    """Counts the forward hooks on the model at each event, and computes each batch's layer outputs by hand."""

    def __init__(self):
        self.hooks = []  # (batch, event, number of forward hooks on all modules)
        self.reference = {}

    def run_event(self, event, state, logger):
        count = sum(len(m._forward_hooks) for m in state.model.modules())
        self.hooks.append((int(state.timer.batch), event.value, count))
        if event.value == "before_forward":
            x, _ = state.batch
            linear1, linear2 = state.model.module[0], state.model.module[2]
            h = x @ linear1.weight.T + linear1.bias  # Linear by its formula
            r = torch.where(h > 0, h, torch.zeros_like(h))
            out = r @ linear2.weight.T + linear2.bias
            self.reference[int(state.timer.batch)] = {"module.0": h, "module.1": r, "module.2": out}


def train(monitor, duration="5ba"):
    torch.manual_seed(0)
    model = SimpleModel()
    memory, probe = InMemoryLogger(), HookProbe()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=20, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=8, batch_size=4, seed=1),
        eval_interval="2ba",
        max_duration=duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
        callbacks=[monitor, probe],
        loggers=[memory],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return memory, probe, model


def test_stats_equal_a_hand_computation_and_hooks_exist_only_during_the_logged_forward():
    memory, probe, model = train(ActivationMonitor(interval="2ba"))
    for name in ["module.0", "module.1", "module.2"]:
        assert memory.steps(f"activations/mean/{name}") == [0, 2, 4]
        for position, batch in enumerate([0, 2, 4]):
            expected = hand_stats(probe.reference[batch][name].detach().flatten().tolist())
            for stat, value in expected.items():
                logged = memory.values(f"activations/{stat}/{name}")[position]
                assert logged == pytest.approx(value, rel=1e-5, abs=1e-6), (name, stat, batch)
    # The ReLU's output has zeros; the logits have none.
    assert all(v > 0 for v in memory.values("activations/zero_fraction/module.1"))
    # Three leaf modules hooked between BEFORE_FORWARD and AFTER_FORWARD of batches 0, 2 and 4; none anywhere else
    # (evaluation included).
    hooked = {(batch, event) for batch, event, count in probe.hooks if count}
    assert {count for _, _, count in probe.hooks} == {0, 3}
    assert hooked == {(b, e) for b in (0, 2, 4) for e in ("before_forward",)}
    assert any(event == "eval_before_forward" for _, event, _ in probe.hooks)
    assert all(not m._forward_hooks for m in model.modules())


def test_module_filters():
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(2, 2)))
    assert [n for n, _ in select_modules(net)] == ["0", "1", "2.0"]
    assert [n for n, _ in select_modules(net, [torch.nn.Conv2d, "Linear"])] == ["0", "2.0"]
    assert [n for n, _ in select_modules(net, ["Sequential"])] == ["2"]
    assert [n for n, _ in select_modules(net, name_pattern=r"^2")] == ["2.0"]
    memory, _, _ = train(ActivationMonitor(interval="1ep", module_types=["ReLU"]), duration="1ep")
    assert sorted(k for k in memory.data if k.startswith("activations/")) == [
        f"activations/{s}/module.1" for s in sorted(["mean", "std", "max", "zero_fraction", "inf_count", "nan_count"])
    ]


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="interval='2sp'"):
        ActivationMonitor(interval="2sp")
    with pytest.raises(ValueError, match="name_pattern='\\('"):
        ActivationMonitor(name_pattern="(")
    with pytest.raises(ValueError, match="module_types=\\[3\\]"):
        ActivationMonitor(module_types=[3])
    with pytest.raises(ValueError, match="selects no module .* module classes are"):
        train(ActivationMonitor(module_types=["Conv2d"]))
    with pytest.raises(ValueError, match="interval"):
        ActivationMonitorHparams(interval="0ba")
    built = ActivationMonitorHparams.from_dict({"interval": "5ba", "module_types": ["Linear"]}).initialize_object()
    assert built.module_types == ["Linear"] and built.interval.value == 5
