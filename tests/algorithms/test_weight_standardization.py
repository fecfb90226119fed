"""Weight standardization against its formula; the invariance it buys (a conv's output does not change when its raw
weight is rescaled and shifted per output channel); which convolutions it touches; checkpoints through the Trainer."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import WeightStandardization, WeightStandardizationHparams
from composer.algorithms.weight_standardization import WeightStandardizer, standardize_weight
from composer.functional import apply_weight_standardization
from composer.models import ComposerClassifier, simple_cnn
from composer.trainer import Trainer


def test_standardized_weight_matches_a_hand_written_loop():
    torch.manual_seed(0)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64) * 2 + 1
    expected = torch.empty_like(w)
    for c in range(4):
        values = w[c].flatten().tolist()
        mean = sum(values) / len(values)
        std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5  # population std
        expected[c] = (w[c] - mean) / (std + 1e-5)
    torch.testing.assert_close(standardize_weight(w, eps=1e-5), expected)


@pytest.mark.parametrize("conv", [nn.Conv1d(3, 5, 3), nn.Conv2d(3, 5, 3, groups=1), nn.Conv3d(2, 4, 2)])
def test_each_output_channel_has_zero_mean_and_unit_std(conv: nn.Module):
    torch.manual_seed(0)
    apply_weight_standardization(nn.Sequential(conv))
    w = conv.weight.detach().flatten(1)
    torch.testing.assert_close(w.mean(dim=1), torch.zeros(w.shape[0]), atol=1e-6, rtol=0)
    torch.testing.assert_close(w.std(dim=1, correction=0), torch.ones(w.shape[0]), atol=1e-3, rtol=0)


def test_conv_output_is_invariant_to_affine_rescaling_of_the_raw_weight_per_channel():
    g = torch.Generator().manual_seed(0)
    # float64: a shift large against the weights cancels in the mean, exactly only up to rounding.
    conv = nn.Conv2d(3, 4, 3, padding=1).double()
    parametrize.register_parametrization(conv, "weight", WeightStandardizer(eps=0.0))
    x = torch.randn(2, 3, 7, 7, generator=g, dtype=torch.float64)
    before = conv(x)
    a = torch.rand(4, 1, 1, 1, generator=g, dtype=torch.float64) * 5 + 0.2  # positive per-channel scales
    b = torch.randn(4, 1, 1, 1, generator=g, dtype=torch.float64) * 3  # per-channel shifts
    with torch.no_grad():
        raw = conv.parametrizations.weight.original
        raw.copy_(a * raw + b)
    torch.testing.assert_close(conv(x), before, atol=1e-10, rtol=1e-10)
    # With eps > 0 the invariance holds up to eps: (W - m) / (s + eps / a), so the outputs move by a relative
    # amount of about eps / (a * s) at most.
    conv_eps = nn.Conv2d(3, 4, 3, padding=1).double()
    parametrize.register_parametrization(conv_eps, "weight", WeightStandardizer(eps=1e-5))
    start = conv_eps(x)
    with torch.no_grad():
        original = conv_eps.parametrizations.weight.original
        original.copy_(a * original + b)
    torch.testing.assert_close(conv_eps(x), start, atol=1e-3, rtol=1e-3)


def test_gradients_reach_the_raw_weight_and_an_existing_optimizer_keeps_training_it():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    raw = model[0].weight
    apply_weight_standardization(model)
    assert model[0].parametrizations.weight.original is raw  # the same Parameter: the optimizer still holds it
    model(torch.randn(2, 2, 6, 6)).sum().backward()
    assert raw.grad is not None and raw.grad.abs().sum() > 0
    before = raw.detach().clone()
    optimizer.step()
    assert not torch.equal(raw, before)


def test_n_last_layers_ignore_leaves_the_last_convolutions_and_reapplying_changes_nothing():
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ConvTranspose2d(4, 4, 2), nn.Conv2d(4, 2, 1)
    )
    apply_weight_standardization(model, n_last_layers_ignore=1)
    flags = [parametrize.is_parametrized(m) for m in model]
    assert flags == [True, False, True, False, False]  # the transposed conv is never touched; the classifier left
    apply_weight_standardization(model, n_last_layers_ignore=1)
    assert len(model[0].parametrizations.weight) == 1  # not stacked twice


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="n_last_layers_ignore=-1 must be an int >= 0"):
        apply_weight_standardization(nn.Conv2d(1, 1, 1), n_last_layers_ignore=-1)
    with pytest.raises(ValueError, match="eps=-0.1 must be a finite number >= 0"):
        WeightStandardization(eps=-0.1)
    with pytest.raises(ValueError, match="eps=nan"):
        WeightStandardizer(eps=float("nan"))
    with pytest.raises(ValueError, match="n_last_layers_ignore=-2"):
        WeightStandardizationHparams.from_dict({"n_last_layers_ignore": -2})


def _trainer(model: ComposerClassifier, **kwargs) -> Trainer:
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)), 4)
    return Trainer(
        model=model,
        train_dataloader=data,
        algorithms=[WeightStandardization()],
        progress_bar=False,
        log_to_console=False,
        seed=0,
        **kwargs,
    )


def test_checkpoint_round_trip_through_the_trainer(tmp_path):
    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(4, 8), num_classes=10)
    trainer = _trainer(model, max_duration="2ba", save_folder=str(tmp_path), save_interval="2ba")
    trainer.fit()
    trainer.close()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    assert "module.features.0.parametrizations.weight.original" in saved and "module.features.0.weight" not in saved
    checkpoints = sorted(tmp_path.rglob("*.pt"))
    assert checkpoints, f"no checkpoint written under {tmp_path}"

    torch.manual_seed(1)  # other initial weights: the load must bring the saved ones
    fresh = simple_cnn(in_channels=1, widths=(4, 8), num_classes=10)
    resumed = _trainer(fresh, max_duration="2ba", load_path=str(checkpoints[-1]))
    for key, value in fresh.state_dict().items():
        torch.testing.assert_close(value, saved[key], msg=key)
    x = torch.randn(3, 1, 8, 8)
    model.eval(), fresh.eval()
    torch.testing.assert_close(fresh.module(x), model.module(x))
    resumed.close()
