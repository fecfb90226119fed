"""LayerFreezing: the frozen set follows the schedule, frozen weights never move, bad inputs are refused."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import LayerFreezing, LayerFreezingHparams
from composer.algorithms.layer_freezing import freeze_layers
from composer.core import Callback, Event, Logger, State
from composer.models import ComposerClassifier
from composer.optim import DecoupledSGDW

NUM_LAYERS = 6


def _mlp(num_layers: int = NUM_LAYERS) -> torch.nn.Sequential:
    torch.manual_seed(0)
    modules: list[torch.nn.Module] = []
    for _ in range(num_layers - 1):
        modules += [torch.nn.Linear(4, 4), torch.nn.ReLU()]
    modules.append(torch.nn.Linear(4, 3))
    return torch.nn.Sequential(*modules)


def _linears(net: torch.nn.Module) -> list[torch.nn.Linear]:
    return [m for m in net.modules() if isinstance(m, torch.nn.Linear)]


def _frozen_flags(net: torch.nn.Module) -> list[bool]:
    return [not any(p.requires_grad for p in layer.parameters()) for layer in _linears(net)]


def _expected_depth(epoch: int, max_epochs: int, start: float, level: float, num_layers: int) -> int:
    """The schedule, in exact arithmetic: floor(level * (f - start) / (1 - start) * (L - 1)) after start, else 0."""
    # The fractions as the decimals the user wrote (0.6, not the binary float just below it).
    f, start_f, level_f = Fraction(epoch, max_epochs), Fraction(str(start)), Fraction(str(level))
    if f <= start_f:
        return 0
    return math.floor(level_f * (f - start_f) / (1 - start_f) * (num_layers - 1))


@pytest.mark.parametrize(("start", "level"), [(0.5, 1.0), (0.0, 1.0), (0.25, 0.6), (0.5, 0.0), (1.0, 1.0)])
def test_freeze_layers_follows_schedule(start: float, level: float) -> None:
    max_epochs = 8
    net = _mlp()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(max_epochs + 1):
        freeze_layers(net, optimizer, epoch, max_epochs, start, level)
        depth = _expected_depth(epoch, max_epochs, start, level, NUM_LAYERS)
        assert _frozen_flags(net) == [i < depth for i in range(NUM_LAYERS)], f"epoch {epoch}"
    assert not _frozen_flags(net)[-1]  # the last layer is never frozen


def test_frozen_params_leave_optimizer_and_its_state() -> None:
    net = _mlp()
    optimizer = DecoupledSGDW(net.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    net(torch.randn(2, 4)).sum().backward()
    optimizer.step()  # creates momentum buffers for every parameter
    freeze_layers(net, optimizer, current_epoch=1, max_epochs=1, freeze_start=0.0, freeze_level=1.0)
    frozen = [p for layer in _linears(net)[:-1] for p in layer.parameters()]
    kept = list(_linears(net)[-1].parameters())
    in_groups = [p for group in optimizer.param_groups for p in group["params"]]
    assert {id(p) for p in in_groups} == {id(p) for p in kept}
    assert all(p not in optimizer.state for p in frozen)
    assert all(p.grad is None and not p.requires_grad for p in frozen)


class _Snapshots(Callback):
    """At each EPOCH_END (after the algorithm), records which layers are frozen and copies newly frozen weights."""

    def __init__(self) -> None:
        self.flags: list[list[bool]] = []
        self.frozen_at: dict[int, list[torch.Tensor]] = {}

    def epoch_end(self, state: State, logger: Logger) -> None:
        flags = _frozen_flags(state.model)
        self.flags.append(flags)
        for i, frozen in enumerate(flags):
            if frozen and i not in self.frozen_at:
                self.frozen_at[i] = [p.detach().clone() for p in _linears(state.model)[i].parameters()]


def test_trainer_schedule_and_frozen_weights_bitwise_unchanged() -> None:
    max_epochs, start, level = 5, 0.2, 1.0
    model = ComposerClassifier(_mlp(), num_classes=3)
    initial = [p.detach().clone() for p in model.parameters()]
    optimizer = DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)), 4)
    snapshots = _Snapshots()
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{max_epochs}ep",
        optimizers=optimizer,
        algorithms=[LayerFreezing(freeze_start=start, freeze_level=level)],
        callbacks=[snapshots],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()

    expected = [
        [i < _expected_depth(epoch, max_epochs, start, level, NUM_LAYERS) for i in range(NUM_LAYERS)]
        for epoch in range(1, max_epochs + 1)
    ]
    assert snapshots.flags == expected
    assert len(snapshots.frozen_at) == NUM_LAYERS - 1
    for i, saved in snapshots.frozen_at.items():
        for before, after in zip(saved, _linears(model)[i].parameters()):
            assert torch.equal(before, after), f"layer {i} moved after it was frozen"
    # The last layer kept training all along.
    assert not all(torch.equal(a, b) for a, b in zip(initial[-2:], list(model.parameters())[-2:]))


def test_sample_budget_uses_fraction_of_run() -> None:
    # 32 samples = 2 epochs of 16; a budget in samples has no epoch count, so the fraction of the run is used.
    model = ComposerClassifier(_mlp(), num_classes=3)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,))), 4)
    snapshots = _Snapshots()
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration="32sp",
        algorithms=[LayerFreezing(freeze_start=0.0, freeze_level=1.0)],
        callbacks=[snapshots],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()
    # After 1/2 of the run floor(0.5 * 5) = 2 layers are frozen, after all of it 5.
    assert [sum(flags) for flags in snapshots.flags] == [2, 5]


def test_frozen_layers_get_no_gradient() -> None:
    net = _mlp()
    freeze_layers(net, None, current_epoch=1, max_epochs=2, freeze_start=0.0, freeze_level=1.0)
    net(torch.randn(3, 4)).sum().backward()
    grads = [layer.weight.grad is not None for layer in _linears(net)]
    assert grads == [False, False, True, True, True, True]  # floor(0.5 * 5) = 2 frozen


def test_algorithm_events_and_ddp_flag() -> None:
    algorithm = LayerFreezing()
    state = State(model=_mlp(), max_duration="2ep", steps_per_epoch=2)
    assert algorithm.find_unused_parameters
    assert [e for e in Event if algorithm.match(e, state)] == [Event.EPOCH_END]


def test_shared_parameter_counted_once() -> None:
    first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    second.weight = first.weight  # tied: belongs to the first layer
    net = torch.nn.Sequential(first, second, torch.nn.Linear(4, 2))
    freeze_layers(net, None, current_epoch=1, max_epochs=1, freeze_start=0.0, freeze_level=0.5)
    # 3 layers: floor(0.5 * 2) = 1 frozen: the first, with the tied weight; the second keeps its bias trainable.
    assert not first.weight.requires_grad and not first.bias.requires_grad
    assert second.bias.requires_grad


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"freeze_start": 1.5}, "freeze_start"),
        ({"freeze_start": -0.1}, "freeze_start"),
        ({"freeze_level": 2.0}, "freeze_level"),
        ({"freeze_level": -1.0}, "freeze_level"),
    ],
)
def test_bad_fractions_raise(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        LayerFreezing(**kwargs)
    with pytest.raises(ValueError, match=name):
        LayerFreezingHparams(**kwargs)
    args = {"freeze_start": 0.5, "freeze_level": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        freeze_layers(_mlp(), None, 1, 2, **args)


def test_hparams_round_trip() -> None:
    config = LayerFreezingHparams.from_dict({"freeze_start": 0.25, "freeze_level": 0.75})
    algorithm = config.initialize_object()
    assert isinstance(algorithm, LayerFreezing)
    assert (algorithm.freeze_start, algorithm.freeze_level) == (0.25, 0.75)
    assert LayerFreezingHparams().to_dict() == {"freeze_start": 0.5, "freeze_level": 1.0}
