"""Stochastic depth: per-layer drop rates (uniform and linear), block drops that follow the generator, sample mode
keeping the expected scale, deterministic evaluation, the surgery on our ResNets and torchvision's, bad input, and
StochasticDepth in the Trainer (drops, warmup, checkpointed generator)."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import StochasticDepth, StochasticDepthHparams
from composer.algorithms.stochastic_depth import (
    STOCHASTIC_LAYER_MAPPING,
    StochasticBasicBlock,
    StochasticBottleneck,
)
from composer.core import Callback
from composer.functional import apply_stochastic_depth
from composer.models import BasicBlock, Bottleneck, ResNet, imagenet_resnet
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer
from tests.common.torchvision_models import torchvision_resnet_copy

STOCHASTIC = (StochasticBasicBlock, StochasticBottleneck)


def _stochastic_blocks(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, STOCHASTIC)]


# ---- drop rates ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", ["uniform", "linear"])
def test_per_layer_drop_rates(distribution: str):
    model = cifar_resnet(depth=32)  # 15 basic blocks
    apply_stochastic_depth(model, "block", "ResNetBasicBlock", drop_rate=0.3, drop_distribution=distribution)
    blocks = _stochastic_blocks(model)
    m = len(blocks)
    assert m == 15 and [b.module_id for b in blocks] == list(range(m))
    expected = [0.3] * m if distribution == "uniform" else [0.3 * (i + 1) / m for i in range(m)]
    assert [b.drop_rate for b in blocks] == pytest.approx(expected)


# ---- the block method ------------------------------------------------------------------------------------------------


def _block(drop_rate: float, method: str, seed: int = 0, in_channels: int = 4, stride: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    original = BasicBlock(in_channels, 4, stride=stride)
    return StochasticBasicBlock.from_target_layer(
        original,
        drop_rate=drop_rate,
        module_id=0,
        module_count=1,
        rand_generator=torch.Generator().manual_seed(seed),
        stochastic_method=method,
    )


@pytest.mark.parametrize(("in_channels", "stride"), [(4, 1), (2, 2)])
def test_block_mode_drops_exactly_when_the_generator_says(in_channels: int, stride: int):
    block = _block(0.4, "block", seed=3, in_channels=in_channels, stride=stride).train()
    replay = torch.Generator().manual_seed(3)  # the same stream the block draws from, one number per forward
    x = torch.randn(2, in_channels, 6, 6)
    shortcut = x if block.downsample is None else block.downsample(x)
    drops = 0
    for _ in range(40):
        dropped = torch.rand((), generator=replay).item() < 0.4
        expected = F.relu(shortcut) if dropped else F.relu(block.residual(x) + shortcut)
        assert torch.allclose(block(x), expected, atol=1e-6)
        drops += dropped
    assert 0 < drops < 40


def test_block_mode_evaluation_scales_the_branch_by_the_survival_probability_and_is_deterministic():
    block = _block(0.25, "block").eval()
    x = torch.randn(2, 4, 5, 5)
    state = block.rand_generator.get_state()
    out = block(x)
    assert torch.allclose(out, F.relu(0.75 * block.residual(x) + x), atol=1e-6)
    assert torch.equal(block(x), out)
    assert torch.equal(block.rand_generator.get_state(), state)  # evaluation draws nothing


# ---- the sample method -----------------------------------------------------------------------------------------------


def test_sample_mode_keeps_the_expected_scale():
    rate = 0.3
    block = _block(rate, "sample").train()
    x = torch.randn(400, 4, 3, 3, generator=torch.Generator().manual_seed(1))
    out = block(x)
    branch = block.residual(x)  # batch-norm statistics depend on the batch only, so this is the same branch
    kept = F.relu(branch / (1 - rate) + x)
    dropped = F.relu(x)
    is_kept = torch.tensor([torch.allclose(o, k, atol=1e-5) for o, k in zip(out, kept)])
    is_dropped = torch.tensor([torch.allclose(o, d, atol=1e-6) for o, d in zip(out, dropped)])
    assert bool((is_kept ^ is_dropped).all())  # each sample: the whole branch, rescaled, or none of it
    keep_fraction = is_kept.double().mean().item()
    assert keep_fraction == pytest.approx(1 - rate, abs=0.07)
    # E[mask / (1 - rate)] = 1: on average the branch contributes what it does at evaluation time.
    assert keep_fraction / (1 - rate) == pytest.approx(1.0, abs=0.1)


def test_sample_mode_evaluation_is_the_ordinary_block():
    block = _block(0.5, "sample").eval()
    x = torch.randn(3, 4, 5, 5)
    assert torch.allclose(block(x), F.relu(block.residual(x) + x), atol=1e-6)


@pytest.mark.parametrize("method", ["block", "sample"])
def test_rate_one_always_drops_and_rate_zero_never_does(method: str):
    x = torch.rand(3, 4, 5, 5)
    assert torch.equal(_block(1.0, method).train()(x), x)
    block = _block(0.0, method).train()
    assert torch.allclose(block(x), F.relu(block.residual(x) + x), atol=1e-6)


# ---- the surgery -----------------------------------------------------------------------------------------------------


def test_stochastic_blocks_adopt_the_original_layers():
    model = cifar_resnet(depth=8).module
    params = list(model.parameters())
    apply_stochastic_depth(model, "block", "ResNetBasicBlock")
    assert all(p is q for p, q in zip(params, model.parameters()))
    assert len(_stochastic_blocks(model)) == 3
    with pytest.warns(UserWarning, match="replaced nothing"):
        apply_stochastic_depth(model, "block", "ResNetBasicBlock")  # already stochastic: nothing more to do


def _changes_outputs_keeping_shapes(model: nn.Module, target: str, size: int, batch: int = 2) -> int:
    model.eval()
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0))
    before = model(x)
    generator = torch.Generator().manual_seed(0)
    apply_stochastic_depth(model, "block", target, drop_rate=0.5, drop_distribution="uniform", generator=generator)
    after = model(x)  # evaluation: every branch scaled by 0.5
    assert after.shape == before.shape
    assert not torch.allclose(after, before, atol=1e-4)
    return len(_stochastic_blocks(model))


def test_surgery_changes_outputs_of_our_resnets_keeping_shapes():
    torch.manual_seed(0)
    assert _changes_outputs_keeping_shapes(cifar_resnet(depth=8).module, "ResNetBasicBlock", 16) == 3
    assert _changes_outputs_keeping_shapes(imagenet_resnet(depth=18).module, "ResNetBasicBlock", 32) == 8
    small_bottleneck_net = ResNet(Bottleneck, (1, 1, 1, 1), num_classes=10)
    assert _changes_outputs_keeping_shapes(small_bottleneck_net, "ResNetBottleneck", 32) == 4


@pytest.fixture(
    params=[
        ("resnet18", "TorchvisionBasicBlock"),
        pytest.param(("resnet50", "TorchvisionBottleneck"), marks=pytest.mark.slow),
    ]
)
def torchvision_resnet(request: pytest.FixtureRequest) -> tuple[nn.Module, str]:
    name, target = request.param
    return torchvision_resnet_copy(name), target


def test_surgery_on_torchvision_resnets_at_64_pixels(torchvision_resnet: tuple[nn.Module, str]):
    model, target = torchvision_resnet
    expected = {"TorchvisionBasicBlock": 8, "TorchvisionBottleneck": 16}[target]
    assert _changes_outputs_keeping_shapes(model, target, 64) == expected
    # In training, dropping happens: two forward passes with different draws differ.
    model.train()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    outs = {tuple(model(x).flatten()[:4].tolist()) for _ in range(2)}
    assert len(outs) > 1


def test_mapping_maps_each_name_to_one_target_class_and_its_stochastic_class():
    # Seed 001: each name is registered "with the target layer class and the stochastic layer class", a pair.
    expected: dict[str, tuple[type[nn.Module], type[nn.Module]]] = {
        "ResNetBottleneck": (Bottleneck, StochasticBottleneck),
        "ResNetBasicBlock": (BasicBlock, StochasticBasicBlock),
    }
    if importlib.util.find_spec("torchvision") is not None:
        from torchvision.models import resnet as tv

        expected["TorchvisionBottleneck"] = (tv.Bottleneck, StochasticBottleneck)
        expected["TorchvisionBasicBlock"] = (tv.BasicBlock, StochasticBasicBlock)
    assert dict(STOCHASTIC_LAYER_MAPPING) == expected
    for target_class, stochastic_class in STOCHASTIC_LAYER_MAPPING.values():
        assert isinstance(target_class, type) and issubclass(target_class, nn.Module)
        assert isinstance(stochastic_class, type) and issubclass(stochastic_class, nn.Module)


def test_each_name_replaces_only_its_own_class():
    # A model holding our BasicBlock and torchvision's: each name swaps its own class and leaves the other alone.
    pytest.importorskip("torchvision")
    from torchvision.models import resnet as tv

    torch.manual_seed(0)
    model = nn.Sequential(BasicBlock(4, 4), tv.BasicBlock(4, 4))
    apply_stochastic_depth(model, "block", "TorchvisionBasicBlock")
    assert type(model[0]) is BasicBlock and type(model[1]) is StochasticBasicBlock
    apply_stochastic_depth(model, "block", "ResNetBasicBlock")
    assert [type(m) for m in model] == [StochasticBasicBlock, StochasticBasicBlock]
    assert [m.module_count for m in model] == [1, 1]


@pytest.mark.parametrize(
    ("name", "wrong", "right"),
    [
        ("resnet18", "ResNetBasicBlock", "TorchvisionBasicBlock"),
        ("resnet18", "ResNetBottleneck", "TorchvisionBasicBlock"),
    ],
)
def test_a_name_that_matches_no_block_of_the_model_names_the_one_that_does(name: str, wrong: str, right: str):
    # v0.5 called torchvision's Bottleneck "ResNetBottleneck": such a call now says which name to use instead of
    # silently replacing nothing.
    model = torchvision_resnet_copy(name)
    with pytest.raises(ValueError, match=rf"target_layer_name={wrong!r} .* To fix, pass target_layer_name={right!r}"):
        apply_stochastic_depth(model, "block", wrong)
    assert not _stochastic_blocks(model)
    with pytest.raises(ValueError, match=r"To fix, pass target_layer_name='ResNetBasicBlock'"):
        apply_stochastic_depth(cifar_resnet(depth=8), "block", "ResNetBottleneck")


def test_torchvision_names_without_torchvision_ask_for_the_vision_extra(monkeypatch: pytest.MonkeyPatch):
    for name in ("TorchvisionBottleneck", "TorchvisionBasicBlock"):
        monkeypatch.delitem(STOCHASTIC_LAYER_MAPPING, name, raising=False)
    with pytest.raises(ImportError, match=r"target_layer_name='TorchvisionBottleneck' .*opencomposer\[vision\]"):
        StochasticDepth("block", "TorchvisionBottleneck")


# ---- bad input -------------------------------------------------------------------------------------------------------


def test_bad_input_raises_value_error_naming_the_argument_and_the_choices():
    model = cifar_resnet(depth=8)
    with pytest.raises(ValueError, match=r"target_layer_name='ResNetBlock' .*") as error:
        apply_stochastic_depth(model, "block", "ResNetBlock")
    assert str(sorted(STOCHASTIC_LAYER_MAPPING)) in str(error.value)
    with pytest.raises(ValueError, match=r"drop_rate=1.5 must be a probability in \[0.0, 1.0\]"):
        StochasticDepth("block", "ResNetBasicBlock", drop_rate=1.5)
    with pytest.raises(ValueError, match=r"drop_distribution='exponential' .* \['uniform', 'linear'\]"):
        StochasticDepth("block", "ResNetBasicBlock", drop_distribution="exponential")
    with pytest.raises(ValueError, match=r"stochastic_method='row' .* \['block', 'sample'\]"):
        apply_stochastic_depth(model, "row", "ResNetBasicBlock")
    with pytest.raises(ValueError, match=r"drop_warmup=-0.1 must be a probability"):
        StochasticDepth("block", "ResNetBasicBlock", drop_warmup=-0.1)
    with pytest.raises(ValueError, match="target_layer_name"):
        StochasticDepthHparams(stochastic_method="block", target_layer_name="Nope")


# ---- the Algorithm ---------------------------------------------------------------------------------------------------


def _data() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(16, 3, 16, 16, generator=g), torch.randint(0, 10, (16,))), batch_size=4)


def test_dropped_blocks_get_no_updates_through_the_trainer():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    algorithm = StochasticDepth("block", "ResNetBasicBlock", drop_rate=1.0, drop_distribution="uniform")
    assert algorithm.run_first and algorithm.find_unused_parameters
    trainer = Trainer(
        model=model, train_dataloader=_data(), max_duration="2ba", algorithms=[algorithm], seed=0, progress_bar=False
    )
    blocks = _stochastic_blocks(model)
    assert len(blocks) == 3
    block_weights = [b.conv1.weight.detach().clone() for b in blocks]
    stem = model.module.conv1.weight.detach().clone()
    trainer.fit()
    assert all(torch.equal(w, b.conv1.weight) for w, b in zip(block_weights, blocks))  # always dropped: untouched
    assert not torch.equal(stem, model.module.conv1.weight)  # the rest of the network trains


class _RecordRates(Callback):
    def __init__(self) -> None:
        self.rates: list[list[float]] = []

    def batch_start(self, state, logger) -> None:  # type: ignore[no-untyped-def]
        self.rates.append([b.drop_rate for b in _stochastic_blocks(state.model)])


def test_drop_warmup_ramps_the_rate_over_the_given_fraction_of_the_run():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    algorithm = StochasticDepth(
        "sample", "ResNetBasicBlock", drop_rate=0.6, drop_distribution="linear", drop_warmup=0.5
    )
    assert not algorithm.find_unused_parameters
    recorder = _RecordRates()
    trainer = Trainer(
        model=model,
        train_dataloader=_data(),
        max_duration="4ba",
        algorithms=[algorithm],
        callbacks=[recorder],
        seed=0,
        progress_bar=False,
    )
    trainer.fit()
    # Batch k starts at k/4 of the run: rate = min(1, (k/4) / 0.5) * 0.6, then spread linearly over the 3 blocks.
    for k, rates in enumerate(recorder.rates):
        base = min(1.0, (k / 4) / 0.5) * 0.6
        assert rates == pytest.approx([base * (i + 1) / 3 for i in range(3)])


def test_generator_choice_and_checkpoint_round_trip():
    torch.manual_seed(0)
    # use_same_gpu_seed=False: the blocks draw from the State's generator.
    algorithm = StochasticDepth("block", "ResNetBasicBlock", use_same_gpu_seed=False)
    model = cifar_resnet(depth=8)
    trainer = Trainer(
        model=model, train_dataloader=_data(), max_duration="1ba", algorithms=[algorithm], seed=0, progress_bar=False
    )
    assert all(b.rand_generator is trainer.state.rng for b in _stochastic_blocks(model))
    assert algorithm.state_dict() == {}

    # use_same_gpu_seed=True: a generator seeded from rank_zero_seed, owned and checkpointed by the algorithm.
    algorithm = StochasticDepth("block", "ResNetBasicBlock", drop_rate=0.5)
    model = cifar_resnet(depth=8)
    trainer = Trainer(
        model=model, train_dataloader=_data(), max_duration="3ba", algorithms=[algorithm], seed=7, progress_bar=False
    )
    generator = _stochastic_blocks(model)[0].rand_generator
    assert generator is not trainer.state.rng
    assert torch.equal(generator.get_state(), torch.Generator().manual_seed(7).get_state())
    trainer.fit()
    saved = algorithm.state_dict()
    assert torch.equal(saved["generator"], generator.get_state())

    restored = StochasticDepth("block", "ResNetBasicBlock", drop_rate=0.5)
    restored.load_state_dict(saved)  # before INIT: applied when the surgery creates the generator
    model2 = cifar_resnet(depth=8)
    Trainer(
        model=model2, train_dataloader=_data(), max_duration="1ba", algorithms=[restored], seed=7, progress_bar=False
    )
    assert torch.equal(_stochastic_blocks(model2)[0].rand_generator.get_state(), saved["generator"])


def test_hparams_follow_the_seed_field_order_and_defaults():
    names = [f.name for f in dataclasses.fields(StochasticDepthHparams)]
    assert names == [
        "stochastic_method",
        "target_layer_name",
        "drop_rate",
        "drop_distribution",
        "use_same_gpu_seed",
        "drop_warmup",
    ]
    built = StochasticDepthHparams(stochastic_method="block", target_layer_name="ResNetBottleneck").initialize_object()
    assert (built.drop_rate, built.drop_distribution, built.drop_warmup, built.use_same_gpu_seed) == (
        0.2,
        "linear",
        0.0,
        True,
    )
