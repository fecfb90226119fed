"""Gyro Dropout: the statistics of the mask pool, the groups of a batch, the scaling, the schedule of the paper, the
surgery and the algorithm in the Trainer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import GyroDropout, GyroDropoutHparams
from composer.algorithms.gyro_dropout import GyroDropoutLayer, gyro_dropout_interval, gyro_dropout_masks
from composer.core import Callback, Logger, State
from composer.functional import apply_gyro_dropout
from composer.models import ComposerClassifier


def _pool_index(layer: GyroDropoutLayer, mask: torch.Tensor) -> int:
    assert layer.masks is not None
    (index,) = (layer.masks == mask).all(dim=1).nonzero().flatten().tolist()
    return index


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_the_pool_keeps_one_minus_p_within_the_binomial_bound_and_has_sigma_distinct_masks(p: float):
    sigma, features = 256, 64
    masks = gyro_dropout_masks(features, p, sigma, generator=torch.Generator().manual_seed(0))
    assert masks.shape == (sigma, features) and masks.dtype == torch.bool
    assert len(torch.unique(masks, dim=0)) == sigma
    n = sigma * features  # Bernoulli(1 - p) draws
    assert abs(masks.float().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)


def test_repeated_masks_are_drawn_again_until_the_pool_is_distinct():
    # Over 4 features there are exactly 16 masks: a pool of 16 must hold every one of them.
    masks = gyro_dropout_masks(4, 0.5, 16, generator=torch.Generator().manual_seed(0))
    assert len(torch.unique(masks, dim=0)) == 16
    with pytest.raises(ValueError, match=r"sigma=17 distinct masks cannot be drawn over 4 features"):
        gyro_dropout_masks(4, 0.5, 17)


def test_each_of_tau_groups_uses_one_active_mask_scaled_by_one_over_keep():
    p, sigma, tau, batch = 0.25, 32, 4, 12
    layer = GyroDropoutLayer(p, sigma, tau, iterations_per_selection=5, seed=3)
    x = torch.randn(batch, 3, 40, generator=torch.Generator().manual_seed(1))  # (B, S, F): masks over F, shared by S
    out = layer(x)
    active = layer.active_masks(40)
    assert layer.iteration == 1  # advanced by the call; still selection 0
    for sample in range(batch):
        group = sample * tau // batch  # consecutive groups of 3
        expected = x[sample] * active[group].float() / (1 - p)
        torch.testing.assert_close(out[sample], expected)
    assert len({_pool_index(layer, m) for m in active}) == tau  # tau different masks of the pool


def test_the_expectation_is_kept_over_the_pool():
    p = 0.5
    layer = GyroDropoutLayer(p, sigma=64, tau=4, iterations_per_selection=1, seed=0)
    ones = torch.ones(4, 128)
    # One cycle of sigma / tau = 16 selections uses every mask of the pool once: the mean output is the pool's keep
    # rate over (1 - p), which is 1 within the binomial bound of 64 * 128 draws.
    mean = torch.stack([layer(ones) for _ in range(16)]).mean().item()
    assert abs(mean - 1.0) < 5 * math.sqrt(p * (1 - p) / (64 * 128)) / (1 - p)


def test_the_schedule_trains_every_mask_for_the_same_number_of_iterations():
    sigma, tau, total = 16, 4, 80
    interval = gyro_dropout_interval(total, sigma, tau)
    assert interval == total * tau // sigma == 20
    layer = GyroDropoutLayer(0.5, sigma, tau, iterations_per_selection=interval, seed=1)
    counts = torch.zeros(sigma, dtype=torch.long)
    previous: list[int] = []
    for iteration in range(total):
        layer(torch.ones(8, 32))
        layer.iteration = iteration  # look at the masks that call used
        used = [_pool_index(layer, m) for m in layer.active_masks(32)]
        if iteration % interval:
            assert used == previous  # the active set changes only every `interval` iterations
        counts[used] += 1
        previous = used
        layer.iteration = iteration + 1
    assert counts.tolist() == [interval] * sigma  # each subnetwork trained total * tau / sigma iterations


def test_evaluation_and_p_zero_are_the_identity_and_the_seed_fixes_the_pool():
    x = torch.randn(4, 16)
    layer = GyroDropoutLayer(0.5, 8, 2, seed=0)
    assert layer.eval()(x) is x
    assert GyroDropoutLayer(0.0, 8, 2)(x) is x
    a, b = GyroDropoutLayer(0.5, 8, 2, seed=5), GyroDropoutLayer(0.5, 8, 2, seed=5)
    assert torch.equal(a(x), b(x))
    with pytest.raises(ValueError, match="drew its masks for 16 features"):
        a(torch.randn(4, 8))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"p": 1.0}, "p=1.0"), ({"tau": 9, "sigma": 8}, "tau=9 must be at most sigma=8"), ({"sigma": 0}, "sigma=0")],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict, message: str):
    with pytest.raises(ValueError, match=message):
        GyroDropout(**kwargs)
    with pytest.raises(ValueError, match=message):
        GyroDropoutHparams(**kwargs)


def test_surgery_replaces_every_dropout_with_seeded_layers():
    def model() -> nn.Module:
        return nn.Sequential(nn.Linear(4, 32), nn.Dropout(0.1), nn.Linear(32, 32), nn.Dropout(0.2), nn.Linear(32, 2))

    one = apply_gyro_dropout(model(), total_iterations=100, p=0.5, sigma=32, tau=4, seed=0)
    two = apply_gyro_dropout(model(), total_iterations=100, p=0.5, sigma=32, tau=4, seed=0)
    layers = [m for m in one.modules() if isinstance(m, GyroDropoutLayer)]
    assert len(layers) == 2 and all(m.p == 0.5 and m.iterations_per_selection == 12 for m in layers)
    assert layers[0].seed != layers[1].seed  # different subnetworks in each layer ...
    assert [m.seed for m in two.modules() if isinstance(m, GyroDropoutLayer)] == [m.seed for m in layers]  # ... seeded
    assert not any(isinstance(m, nn.Dropout) for m in one.modules())


class _RecordGyroOutputs(Callback):
    """Hooks the Gyro Dropout layer once the algorithm has put it in (algorithms run before callbacks at FIT_START)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, torch.Tensor]] = []
        self.layers: list[GyroDropoutLayer] = []

    def fit_start(self, state: State, logger: Logger) -> None:
        self.layers = [m for m in state.model.modules() if isinstance(m, GyroDropoutLayer)]
        for layer in self.layers:
            layer.register_forward_hook(self._record)

    def _record(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        assert isinstance(module, GyroDropoutLayer)
        self.seen.append((module.iteration, module.active_masks(output.shape[-1])[0]))  # the mask this call used


def test_the_algorithm_schedules_by_batch_and_microbatches_share_masks():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 3))
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
    recorder = _RecordGyroOutputs()
    trainer = Trainer(
        model=ComposerClassifier(net, num_classes=3),
        train_dataloader=DataLoader(data, batch_size=8),
        max_duration="3ep",
        algorithms=[GyroDropout(p=0.5, sigma=8, tau=1)],
        callbacks=[recorder],
        grad_accum=2,
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    (layer,) = recorder.layers
    assert layer is net[2] and layer.iterations_per_selection == 1  # 6 batches * tau 1 // sigma 8, at least 1
    assert not layer.advance
    # 6 batches of two microbatches; the layer is set to the batch count, so both microbatches share the batch's mask.
    assert [it for it, _ in recorder.seen] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    for (_, first), (_, second) in zip(recorder.seen[::2], recorder.seen[1::2]):
        assert torch.equal(first, second)
    assert not torch.equal(recorder.seen[0][1], recorder.seen[2][1])  # interval 1: a new mask every batch
