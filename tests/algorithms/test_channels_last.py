"""apply_channels_last changes strides only (values, shapes and parameter objects stay); ChannelsLast in the Trainer."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import ChannelsLast, ChannelsLastHparams
from composer.core.event import Event
from composer.functional import apply_channels_last
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer


def _conv_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]


def test_converts_4d_weights_keeping_values_and_parameter_objects():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8).module.eval()
    params = list(model.parameters())
    values = [p.detach().clone() for p in params]
    x = torch.randn(2, 3, 16, 16)
    before = model(x)
    apply_channels_last(model)
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in _conv_weights(model))
    assert all(p is q for p, q in zip(params, model.parameters()))  # optimizers keep working
    assert all(torch.equal(p, v) for p, v in zip(model.parameters(), values))
    after = model(x)
    assert after.shape == before.shape and torch.allclose(after, before, atol=1e-5)


def test_activations_come_out_channels_last():
    conv = apply_channels_last(torch.nn.Conv2d(3, 8, 3))
    out = conv(torch.randn(2, 3, 8, 8))  # an NCHW input
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous()


def test_channels_last_runs_at_fit_start_and_trains_a_resnet():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,))), batch_size=4)
    algorithm = ChannelsLast()
    assert algorithm.match(Event.FIT_START, None) and not algorithm.match(Event.INIT, None)  # type: ignore[arg-type]
    trainer = Trainer(
        model=model, train_dataloader=data, max_duration="2ba", algorithms=[algorithm], progress_bar=False
    )
    assert not all(w.is_contiguous(memory_format=torch.channels_last) for w in _conv_weights(model))
    before = [w.detach().clone() for w in _conv_weights(model)]
    trainer.fit()
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in _conv_weights(model))
    assert all(not torch.equal(b, w) for b, w in zip(before, _conv_weights(model)))  # still trained


def test_takes_no_arguments():
    assert ChannelsLastHparams().to_dict() == {}
    assert isinstance(ChannelsLastHparams().initialize_object(), ChannelsLast)
    with pytest.raises(TypeError, match="takes no arguments"):
        ChannelsLast(1)
