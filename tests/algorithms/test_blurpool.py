"""blur_2d against a hand-written cross-correlation; the blur layers keep shapes; apply_blurpool's eligibility rules;
the surgery on our ResNets and torchvision's; BlurPool in the Trainer."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from composer.algorithms import BlurPool, BlurPoolHparams
from composer.algorithms.blurpool import BlurConv2d, BlurMaxPool2d, BlurPool2d
from composer.algorithms.blurpool.blurpool import _default_filter
from composer.functional import apply_blurpool, blur_2d
from composer.models import imagenet_resnet
from composer.models.resnet_cifar import cifar_resnet
from composer.trainer import Trainer

BINOMIAL = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16


def reference_blur(x: torch.Tensor, kernel: torch.Tensor, stride: int, padding: int) -> torch.Tensor:
    """Per-channel cross-correlation with zero padding, written out as explicit sums over the window."""
    n, c, h, w = x.shape
    kh, kw = kernel.shape
    padded = torch.zeros(n, c, h + 2 * padding, w + 2 * padding, dtype=torch.float64)
    padded[:, :, padding : padding + h, padding : padding + w] = x.double()
    out_h, out_w = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    out = torch.zeros(n, c, out_h, out_w, dtype=torch.float64)
    for i in range(out_h):
        for j in range(out_w):
            window = padded[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = (window * kernel.double()).sum(dim=(2, 3))
    return out


# ---- blur_2d ---------------------------------------------------------------------------------------------------------


def test_default_filter_on_an_impulse_is_the_binomial_kernel():
    impulse = torch.zeros(1, 2, 7, 7)
    impulse[:, :, 3, 3] = 1.0
    out = blur_2d(impulse)
    assert out.shape == impulse.shape
    for channel in range(2):
        assert torch.allclose(out[0, channel, 2:5, 2:5], BINOMIAL)  # [1,2,1] x [1,2,1] / 16
    assert out[0, 0].sum().item() == pytest.approx(1.0)  # the filter sums to one: flat regions are kept
    assert torch.count_nonzero(out) == 2 * 9


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_matches_explicit_cross_correlation(stride: int):
    x = torch.randn(2, 3, 7, 6, generator=torch.Generator().manual_seed(0))
    expected = reference_blur(x, BINOMIAL, stride=stride, padding=1)
    assert torch.allclose(blur_2d(x, stride=stride).double(), expected, atol=1e-6)


def test_custom_2d_and_per_channel_4d_filters():
    x = torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(1))
    box = torch.ones(2, 2) / 4
    assert torch.allclose(blur_2d(x, filter=box, padding=0).double(), reference_blur(x, box, 1, 0), atol=1e-6)
    per_channel = torch.stack([BINOMIAL, torch.eye(3) / 3]).unsqueeze(1)  # (2, 1, 3, 3)
    out = blur_2d(x, filter=per_channel)
    assert torch.allclose(out[:, :1].double(), reference_blur(x[:, :1], BINOMIAL, 1, 1), atol=1e-6)
    assert torch.allclose(out[:, 1:].double(), reference_blur(x[:, 1:], torch.eye(3) / 3, 1, 1), atol=1e-6)


def test_default_filter_is_cached_per_channels_device_and_dtype():
    a = _default_filter(3, torch.device("cpu"), torch.float32)
    assert a is _default_filter(3, torch.device("cpu"), torch.float32)
    assert a is not _default_filter(4, torch.device("cpu"), torch.float32)
    assert _default_filter(3, torch.device("cpu"), torch.float64).dtype == torch.float64
    assert blur_2d(torch.randn(1, 3, 4, 4, dtype=torch.float64)).dtype == torch.float64


def test_a_filter_first_built_under_inference_mode_still_trains():
    with torch.inference_mode():
        blur_2d(torch.randn(1, 5, 4, 4))
    x = torch.randn(1, 5, 4, 4, requires_grad=True)
    blur_2d(x).sum().backward()
    assert x.grad is not None


def test_bad_input_raises_value_error_naming_the_argument():
    with pytest.raises(ValueError, match=r"input must be a 4d tensor .* got \(3, 4, 4\)"):
        blur_2d(torch.randn(3, 4, 4))
    with pytest.raises(ValueError, match="stride=0 must be a positive int"):
        blur_2d(torch.randn(1, 3, 4, 4), stride=0)
    with pytest.raises(ValueError, match=r"filter must be 2d .* C=3"):
        blur_2d(torch.randn(1, 3, 4, 4), filter=torch.ones(2, 1, 3, 3))


# ---- the layers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blur_first", [True, False])
@pytest.mark.parametrize(
    ("kernel_size", "stride", "padding", "size"),
    [(3, 2, 1, 8), (3, 2, 1, 9), (1, 2, 0, 7), (3, 2, 0, 10), (5, 3, 2, 11), (3, (2, 1), 1, 8)],
)
def test_blurconv_keeps_the_replaced_layers_output_shape(blur_first, kernel_size, stride, padding, size):
    conv = nn.Conv2d(4, 6, kernel_size, stride=stride, padding=padding)
    blurconv = BlurConv2d.from_conv(conv, blur_first=blur_first)
    x = torch.randn(2, 4, size, size + 1)
    assert blurconv(x).shape == conv(x).shape
    assert blurconv.conv.weight is conv.weight and blurconv.conv.bias is conv.bias


def test_blurconv_blurs_before_or_after_the_convolution():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    x = torch.randn(2, 3, 8, 8)
    blur = torch.stack([BINOMIAL] * 3).unsqueeze(1)
    blur_out = torch.stack([BINOMIAL] * 5).unsqueeze(1)
    expected_first = F.conv2d(F.conv2d(x, blur, padding=1, groups=3), conv.weight, conv.bias, stride=2, padding=1)
    assert torch.allclose(BlurConv2d.from_conv(conv, blur_first=True)(x), expected_first, atol=1e-6)
    expected_after = F.conv2d(F.conv2d(x, conv.weight, conv.bias, padding=1), blur_out, stride=2, padding=1, groups=5)
    assert torch.allclose(BlurConv2d.from_conv(conv, blur_first=False)(x), expected_after, atol=1e-6)


@pytest.mark.parametrize(("kernel_size", "stride", "padding", "size"), [(2, 2, 0, 8), (3, 2, 1, 9), (3, None, 1, 12)])
def test_blurmaxpool_keeps_the_shape_and_blurs_a_dense_max_pool(kernel_size, stride, padding, size):
    pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding)
    blurpool = BlurMaxPool2d.from_maxpool2d(pool)
    x = torch.randn(2, 3, size, size)
    out = blurpool(x)
    assert out.shape == pool(x).shape
    dense = F.max_pool2d(x, kernel_size, stride=1, padding=padding)
    assert torch.allclose(out.double(), reference_blur(dense, BINOMIAL, pool.stride, 1), atol=1e-6)


def test_blurpool2d_halves_the_resolution():
    x = torch.randn(1, 2, 8, 8)
    assert torch.allclose(BlurPool2d()(x).double(), reference_blur(x, BINOMIAL, 2, 1), atol=1e-6)


# ---- apply_blurpool --------------------------------------------------------------------------------------------------


def _zoo() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),  # 0: strided, but a 3-channel stem: kept
        nn.Conv2d(16, 16, 3, padding=1),  # 1: not strided: kept
        nn.Conv2d(16, 32, 3, stride=2, padding=1),  # 2: replaced
        nn.MaxPool2d(2),  # 3: stride defaults to the kernel: replaced
        nn.MaxPool2d(3, stride=1, padding=1),  # 4: not strided: kept
        nn.MaxPool2d(2, ceil_mode=True),  # 5: ceil_mode could change the shape: kept
    )


def test_apply_blurpool_only_touches_strided_convs_and_eligible_maxpools():
    model = _zoo()
    apply_blurpool(model)
    assert [type(m).__name__ for m in model] == [
        "Conv2d",
        "Conv2d",
        "BlurConv2d",
        "BlurMaxPool2d",
        "MaxPool2d",
        "MaxPool2d",
    ]
    model = _zoo()
    apply_blurpool(model, replace_convs=False)
    assert [type(m).__name__ for m in model][2:4] == ["Conv2d", "BlurMaxPool2d"]
    model = _zoo()
    apply_blurpool(model, replace_maxpools=False, blur_first=False)
    assert [type(m).__name__ for m in model][2:4] == ["BlurConv2d", "MaxPool2d"] and not model[2].blur_first


def test_apply_blurpool_twice_changes_nothing_more():
    model = _zoo()
    apply_blurpool(model)
    structure = str(model)
    with pytest.warns(UserWarning, match="replaced nothing"):
        apply_blurpool(model)
    assert str(model) == structure


def _changes_outputs_keeping_shapes(model: nn.Module, size: int) -> None:
    model.eval()
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    before = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # something must be replaced
        apply_blurpool(model)
    after = model(x)
    assert after.shape == before.shape
    assert not torch.allclose(after, before, atol=1e-4)


def test_surgery_changes_outputs_of_our_resnets_keeping_shapes():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8).module
    _changes_outputs_keeping_shapes(model, 16)
    assert sum(isinstance(m, BlurConv2d) for m in model.modules()) == 4
    model = imagenet_resnet(depth=18).module
    _changes_outputs_keeping_shapes(model, 32)
    # 3 strided 3x3 convs and 3 strided shortcuts; the stem keeps its stride and the max pool gets blurred.
    assert sum(isinstance(m, BlurConv2d) for m in model.modules()) == 6
    assert isinstance(model.maxpool, BlurMaxPool2d)


def test_surgery_on_torchvision_resnets_at_64_pixels(torchvision_resnet: nn.Module):
    _changes_outputs_keeping_shapes(torchvision_resnet, 64)
    assert sum(isinstance(m, BlurConv2d) for m in torchvision_resnet.modules()) == 6
    assert isinstance(torchvision_resnet.maxpool, BlurMaxPool2d)


# ---- the Algorithm ---------------------------------------------------------------------------------------------------


def test_blurpool_trains_a_resnet_through_the_trainer_with_blurred_layers():
    torch.manual_seed(0)
    model = cifar_resnet(depth=8)
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,))), batch_size=4)
    algorithm = BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)
    trainer = Trainer(
        model=model, train_dataloader=data, max_duration="2ba", algorithms=[algorithm], seed=0, progress_bar=False
    )
    blurconvs = [m for m in model.modules() if isinstance(m, BlurConv2d)]
    assert len(blurconvs) == 4
    before = [m.conv.weight.detach().clone() for m in blurconvs]
    trainer.fit()
    assert all(not torch.equal(w, m.conv.weight) for w, m in zip(before, blurconvs))  # the optimizer trains them


def test_hparams_defaults_and_build():
    assert BlurPoolHparams().initialize_object().__dict__ == {
        "replace_convs": True,
        "replace_maxpools": True,
        "blur_first": True,
    }
    with pytest.raises(TypeError):
        BlurPool()  # type: ignore[call-arg]  # the seed makes all three arguments required
