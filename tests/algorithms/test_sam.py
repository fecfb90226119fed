"""SAM: the step equals the two-pass formula, the wrapper shares its optimizer's state, the Trainer re-runs the batch."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch
import torch.nn.functional as F

from composer import Trainer
from composer.algorithms import SAM, SAMHparams, SAMOptimizer
from composer.algorithms.sam import sam_perturbation
from composer.core import Event
from tests.common import EventRecorder, SimpleModel, make_dataloader


def _quadratic_step(w: list[float], a: list[float], lr: float, rho: float) -> list[float]:
    """One SAM step by hand on f(w) = 0.5 * sum(a_i * w_i^2): gradient a * w, SGD on the perturbed gradient."""
    g = [ai * wi for ai, wi in zip(a, w)]
    norm = math.sqrt(sum(gi * gi for gi in g))
    w_adv = [wi + rho * gi / norm for wi, gi in zip(w, g)]
    g_adv = [ai * wi for ai, wi in zip(a, w_adv)]
    return [wi - lr * gi for wi, gi in zip(w, g_adv)]


def _quadratic(w0: list[float], a: list[float], rho: float, interval: int = 1):
    """The parameter, a SAM-wrapped SGD (lr 0.1, epsilon 0) and the closure for f(w) = 0.5 * sum(a_i * w_i^2)."""
    w = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float64))
    curvature = torch.tensor(a, dtype=torch.float64)
    sam = SAMOptimizer(torch.optim.SGD([w], lr=0.1), rho=rho, epsilon=0.0, interval=interval)

    def closure() -> torch.Tensor:
        sam.zero_grad()
        loss = 0.5 * (curvature * w * w).sum()
        loss.backward()
        return loss

    return w, sam, closure


def test_sam_perturbation_is_rho_times_unit_gradient():
    grads = [torch.tensor([3.0, 0.0]), torch.tensor([[4.0]])]
    e = sam_perturbation(grads, rho=2.0, epsilon=0.0)
    torch.testing.assert_close(e[0], torch.tensor([1.2, 0.0]))  # 2 * 3 / 5
    torch.testing.assert_close(e[1], torch.tensor([[1.6]]))
    assert sam_perturbation([torch.zeros(3)], rho=1.0)[0].abs().sum() == 0  # epsilon keeps 0 / 0 away


def test_sam_step_equals_two_step_formula_on_a_quadratic():
    w0, a, rho = [1.0, -2.0], [1.0, 3.0], 0.3
    w, sam, closure = _quadratic(w0, a, rho)
    expected = w0
    for _ in range(3):
        loss = sam.step(closure)
        expected = _quadratic_step(expected, a, lr=0.1, rho=rho)
        torch.testing.assert_close(w.detach(), torch.tensor(expected, dtype=torch.float64))
    # The returned loss is the first pass's: f at the weights before the last step.
    assert isinstance(loss, torch.Tensor)


def test_interval_runs_sam_every_kth_step():
    w0, a, rho = [1.0, -2.0], [1.0, 3.0], 0.3
    w, sam, closure = _quadratic(w0, a, rho, interval=2)
    sam.step(closure)
    plain = [wi - 0.1 * ai * wi for wi, ai in zip(w0, a)]  # step 1: plain SGD
    torch.testing.assert_close(w.detach(), torch.tensor(plain, dtype=torch.float64))
    sam.step(closure)
    torch.testing.assert_close(w.detach(), torch.tensor(_quadratic_step(plain, a, 0.1, rho), dtype=torch.float64))
    assert sam.global_step == 2


def test_weights_are_restored_exactly_before_the_base_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    seen = []

    class Recorder(torch.optim.SGD):
        def step(self, closure=None):  # the weights the base optimizer updates
            seen.append([p.detach().clone() for p in model.parameters()])
            return super().step(closure)

    before = [p.detach().clone() for p in model.parameters()]
    sam = SAMOptimizer(Recorder(model.parameters(), lr=0.1), rho=0.5)

    def closure():
        sam.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    sam.step(closure)
    for p, q in zip(seen[0], before):
        assert torch.equal(p, q)


def test_shares_param_groups_and_state_with_base_optimizer():
    model = torch.nn.Linear(2, 1)
    base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sam = SAMOptimizer(base)
    assert sam.param_groups is base.param_groups and sam.state is base.state
    scheduler = torch.optim.lr_scheduler.StepLR(base, step_size=1, gamma=0.5)  # attached to the base optimizer
    x, y = torch.randn(4, 2), torch.randn(4, 1)

    def closure():
        sam.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    sam.step(closure)
    scheduler.step()
    assert sam.param_groups[0]["lr"] == pytest.approx(0.05)
    assert "momentum_buffer" in sam.state[model.weight]


def test_state_dict_round_trips_through_a_weights_only_checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    sam = SAMOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), interval=3)
    x, y = torch.randn(4, 2), torch.randn(4, 1)

    def closure():
        sam.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(2):
        sam.step(closure)
    buffer = io.BytesIO()
    torch.save(sam.state_dict(), buffer)
    buffer.seek(0)
    clone = copy.deepcopy(model)
    fresh = SAMOptimizer(torch.optim.SGD(clone.parameters(), lr=0.5, momentum=0.9), interval=3)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.global_step == 2
    assert fresh.param_groups is fresh.base_optimizer.param_groups and fresh.state is fresh.base_optimizer.state
    assert fresh.param_groups[0]["lr"] == 0.1
    torch.testing.assert_close(fresh.state[clone.weight]["momentum_buffer"], sam.state[model.weight]["momentum_buffer"])
    # A plain base optimizer accepts the same state dict.
    torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.1, momentum=0.9).load_state_dict(sam.state_dict())


def test_step_without_closure_is_refused():
    sam = SAMOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1))
    with pytest.raises(ValueError, match="closure"):
        sam.step()


def test_trainer_run_equals_a_hand_written_sam_loop():
    torch.manual_seed(0)
    reference = SimpleModel()
    model = copy.deepcopy(reference)
    loader = make_dataloader(num_samples=16, batch_size=4)
    sam = SAMOptimizer(torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9), rho=0.1)
    for x, y in loader:

        def closure(x=x, y=y):
            sam.zero_grad()
            loss = F.cross_entropy(reference.module(x), y)
            loss.backward()
            return loss

        sam.step(closure)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="1ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        algorithms=[SAM(rho=0.1)],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize("interval", [1, 2])
def test_train_batch_events_fire_twice_on_sam_steps(interval: int):
    recorder = EventRecorder()
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration="1ep",
        algorithms=[SAM(interval=interval)],
        callbacks=[recorder],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    sam_steps = 4 // interval
    assert recorder.events.count(Event.BATCH_START) == 4
    for event in (Event.BEFORE_TRAIN_BATCH, Event.BEFORE_FORWARD, Event.AFTER_BACKWARD, Event.AFTER_TRAIN_BATCH):
        assert recorder.events.count(event) == 4 + sam_steps, event


def test_default_optimizer_is_wrapped_at_fit_start():
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(),
        max_duration="1ba",
        algorithms=[SAM()],
        progress_bar=False,
    )
    assert not isinstance(trainer.state.optimizers[0], SAMOptimizer)  # built after INIT
    trainer.fit()
    assert isinstance(trainer.state.optimizers[0], SAMOptimizer)
    trainer.fit(duration="1ba")  # a second fit does not wrap twice
    assert not isinstance(trainer.state.optimizers[0].base_optimizer, SAMOptimizer)


def test_several_optimizers_are_refused():
    model = SimpleModel()
    first, second = model.module[0], model.module[2]
    optimizers = [torch.optim.SGD(first.parameters(), lr=0.1), torch.optim.SGD(second.parameters(), lr=0.1)]
    with pytest.raises(ValueError, match="single optimizer"):
        Trainer(
            model=model,
            train_dataloader=make_dataloader(),
            max_duration="1ba",
            optimizers=optimizers,
            algorithms=[SAM()],
            progress_bar=False,
        )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"rho": 0.0}, "rho"), ({"rho": -1.0}, "rho"), ({"epsilon": -1e-3}, "epsilon"), ({"interval": 0}, "interval")],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SAM(**kwargs)
    with pytest.raises(ValueError, match=name):
        SAMHparams(**kwargs)
    with pytest.raises(ValueError, match=name):
        SAMOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1), **kwargs)


def test_double_wrapping_and_non_optimizers_are_refused():
    sam = SAMOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1))
    with pytest.raises(ValueError, match="already"):
        SAMOptimizer(sam)
    with pytest.raises(TypeError, match="base_optimizer"):
        SAMOptimizer("sgd")  # type: ignore[arg-type]
