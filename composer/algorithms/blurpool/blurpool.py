"""BlurPool (Zhang 2019, "Making Convolutional Networks Shift-Invariant Again"): low-pass filter before subsampling.

A strided convolution or max pool samples its input on a coarse grid, so high frequencies alias and a one-pixel shift
of the input can change the output a lot. Blurring with a small binomial filter first removes most of those
frequencies. :func:`blur_2d` is the filter, :class:`BlurConv2d`, :class:`BlurMaxPool2d` and :class:`BlurPool2d` are
layers built on it, :func:`apply_blurpool` puts them into any model, and :class:`BlurPool` does that at
``Event.INIT``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair

from composer.algorithms.utils.ported_calls import explain_call
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils.module_surgery import ReplacementPolicy, replace_module_classes

__all__ = [
    "BlurConv2d",
    "BlurMaxPool2d",
    "BlurPool",
    "BlurPool2d",
    "BlurPoolHparams",
    "apply_blurpool",
    "blur_2d",
]

IntOrPair = int | tuple[int, int]

# Strided convolutions with fewer input channels than this (the stem, which sees raw pixels) keep their aliasing,
# as in the paper's antialiased ResNets and in the reference implementation.
_MIN_BLURCONV_IN_CHANNELS = 16


@functools.lru_cache(maxsize=64)
def _default_filter(channels: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    # The 3x3 binomial filter [1, 2, 1]^T [1, 2, 1] / 16, one copy per channel: (C, 1, 3, 3) for a depthwise conv.
    # Built outside inference mode so that a filter first made under torch.inference_mode() still works in training.
    with torch.inference_mode(False):
        taps = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64)
        kernel = torch.outer(taps, taps) / 16.0
        return kernel.to(device=device, dtype=dtype).expand(channels, 1, 3, 3).contiguous()


def _positive_pair(name: str, value: IntOrPair) -> tuple[int, int]:
    pair = _pair(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair):
        raise ValueError(f"{name}={value!r} must be a positive int or a pair of positive ints, such as 2.")
    return pair[0], pair[1]


def blur_2d(
    input: torch.Tensor,
    stride: IntOrPair = 1,
    filter: torch.Tensor | None = None,
    padding: IntOrPair | None = None,
) -> torch.Tensor:
    """Applies a spatial low-pass filter to each channel of an ``NCHW`` tensor.

    The filter is cross-correlated with every channel separately (a depthwise convolution with ``groups=C``), with
    implicit zero padding. By default it is the 3x3 binomial filter ``[[1, 2, 1], [2, 4, 2], [1, 2, 1]] / 16``,
    kept in a small cache per channel count, device and dtype.

    Args:
        input: A 4d tensor of shape ``(N, C, H, W)``.
        stride: Stride(s) along H and W; a single value is used for both.
        filter: A 2d ``(kH, kW)`` filter used for every channel, or a 4d ``(C, 1, kH, kW)`` one per channel.
            Default: the 3x3 binomial filter.
        padding: Implicit zero padding on each side. Default: ``(kH - 1) // 2, (kW - 1) // 2``, which for the
            3x3 filter (padding 1) and ``stride=1`` keeps the size of the input.

    Returns:
        torch.Tensor: The blurred tensor, ``(N, C, H', W')`` with ``H' = (H + 2 * padding - kH) // stride + 1``.

    Raises:
        ValueError: If ``input`` is not 4d, ``stride`` is not positive, or ``filter`` has the wrong shape.

    Example:
        >>> impulse = torch.zeros(1, 1, 5, 5)
        >>> impulse[0, 0, 2, 2] = 16.0
        >>> blur_2d(impulse)[0, 0, 1:4, 1:4]
        tensor([[1., 2., 1.],
                [2., 4., 2.],
                [1., 2., 1.]])
        >>> blur_2d(torch.randn(2, 3, 8, 8), stride=2).shape
        torch.Size([2, 3, 4, 4])
    """
    if not isinstance(input, torch.Tensor) or input.ndim != 4:
        shape = tuple(input.shape) if isinstance(input, torch.Tensor) else type(input).__name__
        raise ValueError(
            f"blur_2d input must be a 4d tensor of shape (N, C, H, W), got {shape}; add a batch dimension with "
            "input.unsqueeze(0) for a single image."
        )
    stride = _positive_pair("blur_2d stride", stride)
    channels = input.shape[1]
    if filter is None:
        weight = _default_filter(channels, input.device, input.dtype)
    elif filter.ndim == 2:
        weight = filter.to(device=input.device, dtype=input.dtype).expand(channels, 1, *filter.shape)
    elif filter.ndim == 4 and filter.shape[0] == channels and filter.shape[1] == 1:
        weight = filter.to(device=input.device, dtype=input.dtype)
    else:
        raise ValueError(
            f"blur_2d filter must be 2d (kH, kW) or 4d (C, 1, kH, kW) with C={channels} (the input's channels), "
            f"got shape {tuple(filter.shape)}."
        )
    if padding is None:
        padding = ((weight.shape[2] - 1) // 2, (weight.shape[3] - 1) // 2)
    return F.conv2d(input, weight, stride=stride, padding=padding, groups=channels)


class BlurPool2d(nn.Module):
    """Calls :func:`blur_2d` with the given stride and padding: a blur that (by default) halves the resolution.

    Args:
        stride: Stride(s) along H and W.
        padding: Implicit zero padding on each side.

    Example:
        >>> BlurPool2d()(torch.randn(2, 3, 8, 8)).shape
        torch.Size([2, 3, 4, 4])
    """

    def __init__(self, stride: IntOrPair = 2, padding: IntOrPair = 1) -> None:
        super().__init__()
        self.stride = _positive_pair("BlurPool2d stride", stride)
        self.padding = _pair(padding)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Blurs and subsamples ``input`` ``(N, C, H, W)``."""
        return blur_2d(input, stride=self.stride, padding=self.padding)

    def extra_repr(self) -> str:
        return f"stride={self.stride}, padding={self.padding}"


class BlurMaxPool2d(nn.Module):
    """A (nearly) drop-in replacement for ``nn.MaxPool2d`` with an anti-aliasing filter.

    It max-pools densely (stride 1, same kernel, padding and dilation), then blurs and subsamples with the stride
    (the paper's "MaxBlurPool"). With ``ceil_mode=False`` the output has exactly ``MaxPool2d``'s shape. The one API
    difference is that ``return_indices`` is not available: indices are ill-defined after blurring.

    Args:
        kernel_size: Size of the max-pooling window.
        stride: Subsampling stride. Default: ``kernel_size``.
        padding: Implicit padding of the max pool.
        dilation: Spacing between the window's elements.
        ceil_mode: Kept for the max pool (where, at stride 1, it changes nothing).

    Example:
        >>> pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        >>> x = torch.randn(2, 4, 9, 9)
        >>> BlurMaxPool2d.from_maxpool2d(pool)(x).shape == pool(x).shape
        True
    """

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        dilation: IntOrPair = 1,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _positive_pair("BlurMaxPool2d stride", kernel_size if stride is None else stride)
        self.padding = _pair(padding)
        self.dilation = _pair(dilation)
        self.ceil_mode = ceil_mode

    @classmethod
    def from_maxpool2d(cls, module: nn.MaxPool2d) -> BlurMaxPool2d:
        """Builds the anti-aliased equivalent of ``module`` (same kernel, stride, padding, dilation)."""
        return cls(
            kernel_size=module.kernel_size,
            stride=module.stride,
            padding=module.padding,
            dilation=module.dilation,
            ceil_mode=module.ceil_mode,
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Max-pools ``input`` ``(N, C, H, W)`` at stride 1, then blurs with the stride."""
        dense = F.max_pool2d(input, self.kernel_size, 1, self.padding, self.dilation, ceil_mode=self.ceil_mode)
        return blur_2d(dense, stride=self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class BlurConv2d(nn.Module):
    """A drop-in replacement for ``nn.Conv2d`` with an anti-aliasing filter; meant for strided convolutions.

    ``blur_first=True`` blurs the input (stride 1), then runs the convolution with its stride: the only overhead is
    the blur. ``blur_first=False`` runs the convolution at stride 1, then blurs and subsamples with the stride, as
    the paper does; the convolution then costs ``stride_h * stride_w`` times as much (4x for stride 2). Either way
    the output has the shape the plain convolution's would have. The convolution is ``self.conv``.

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        kernel_size: Size of the convolution kernel.
        stride: Stride of the convolution (``blur_first=True``) or of the blur (``False``). Default: 1.
        padding: Padding of the convolution.
        dilation: Dilation of the convolution.
        groups: Groups of the convolution.
        bias: Whether the convolution has a bias.
        blur_first: Blur before (True) or after (False) the convolution.

    Example:
        >>> conv = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        >>> blurconv = BlurConv2d.from_conv(conv)
        >>> x = torch.randn(2, 16, 9, 9)
        >>> blurconv(x).shape == conv(x).shape, blurconv.conv.weight is conv.weight
        (True, True)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair | str = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        blur_first: bool = True,
    ) -> None:
        super().__init__()
        self.stride = _positive_pair("BlurConv2d stride", 1 if stride is None else stride)
        self.blur_first = blur_first
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=self.stride if blur_first else 1,
            padding=padding,
            dilation=dilation,
            groups=groups,
            bias=bias,
        )

    @classmethod
    def from_conv(cls, module: nn.Conv2d, blur_first: bool = True) -> BlurConv2d:
        """Builds the anti-aliased equivalent of ``module``, sharing its weight and bias parameters.

        The parameters are the same objects, so an optimizer already training ``module`` trains the new layer.
        """
        blurconv = cls(
            module.in_channels,
            module.out_channels,
            module.kernel_size,  # type: ignore[arg-type]  # always a pair on a built Conv2d
            stride=module.stride,  # type: ignore[arg-type]
            padding=module.padding,  # type: ignore[arg-type]
            dilation=module.dilation,  # type: ignore[arg-type]
            groups=module.groups,
            bias=module.bias is not None,
            blur_first=blur_first,
        )
        blurconv.conv.padding_mode = module.padding_mode
        blurconv.conv.weight = module.weight
        blurconv.conv.bias = module.bias
        return blurconv

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``conv(blur(input))`` or ``blur(conv(input))`` with the stride on the second step."""
        if self.blur_first:
            out: torch.Tensor = self.conv(blur_2d(input))
            return out
        return blur_2d(self.conv(input), stride=self.stride)

    def extra_repr(self) -> str:
        return f"stride={self.stride}, blur_first={self.blur_first}"


def _blurconv_policy(blur_first: bool, already_blurred: set[int]) -> ReplacementPolicy:
    def policy(module: nn.Module, index: int) -> nn.Module | None:
        assert isinstance(module, nn.Conv2d)
        eligible = (
            type(module) is nn.Conv2d  # a subclass may compute something else than a plain convolution
            and max(module.stride) > 1
            and module.in_channels >= _MIN_BLURCONV_IN_CHANNELS
            and id(module) not in already_blurred  # the conv inside a BlurConv2d, on a second application
        )
        return BlurConv2d.from_conv(module, blur_first=blur_first) if eligible else None

    return policy


def _blurmaxpool_policy(module: nn.Module, index: int) -> nn.Module | None:
    assert isinstance(module, nn.MaxPool2d)
    # ceil_mode could change the output size and return_indices has no anti-aliased meaning: those stay as they are.
    eligible = (
        type(module) is nn.MaxPool2d
        and max(_pair(module.stride)) > 1
        and not module.ceil_mode
        and not module.return_indices
    )
    return BlurMaxPool2d.from_maxpool2d(module) if eligible else None


def apply_blurpool(
    model: nn.Module,
    replace_convs: bool = True,
    replace_maxpools: bool = True,
    blur_first: bool = True,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> None:
    """Adds anti-aliasing filters to the strided ``Conv2d`` and/or ``MaxPool2d`` modules within ``model``, in place.

    Replaced are the ``Conv2d`` modules with a stride above 1 and at least 16 input channels (so not a stem that
    sees the raw image), by :class:`BlurConv2d` sharing their parameters, and the ``MaxPool2d`` modules with a
    stride above 1 (and neither ``ceil_mode`` nor ``return_indices``), by :class:`BlurMaxPool2d`. Subclasses of
    those two classes are left alone, since their forward pass may differ. Every output keeps
    its shape. Applying it twice changes nothing more. Run it before the model moves to an accelerator; the
    parameters are shared with the replaced convolutions, so an optimizer built earlier keeps working.

    Args:
        model: The model to modify.
        replace_convs: Replace strided ``Conv2d`` modules with :class:`BlurConv2d`.
        replace_maxpools: Replace eligible ``MaxPool2d`` modules with :class:`BlurMaxPool2d`.
        blur_first: For the convolutions: blur before (True, cheap) or after (False, as in the paper, but the
            convolution runs at stride 1) the convolution. See :class:`BlurConv2d`.
        optimizers: Optimizers already training ``model``, kept in step (see
            :func:`~composer.utils.replace_module_classes`).

    Example:
        >>> from composer.models import cifar_resnet
        >>> model = cifar_resnet(depth=8)
        >>> apply_blurpool(model)
        >>> sum(isinstance(m, BlurConv2d) for m in model.modules())  # 2 strided 3x3 convs, 2 strided shortcuts
        4
    """
    policies: dict[type[nn.Module], ReplacementPolicy] = {}
    if replace_convs:
        already_blurred = {id(m.conv) for m in model.modules() if isinstance(m, BlurConv2d)}
        policies[nn.Conv2d] = _blurconv_policy(blur_first, already_blurred)
    if replace_maxpools:
        policies[nn.MaxPool2d] = _blurmaxpool_policy
    if policies:
        replace_module_classes(model, policies, optimizers=optimizers)


def _explain_blurpool_call(kwargs: dict[str, Any]) -> str:
    """The message for a call that does not fit: v0.32.1's ``BlurPool()`` with defaults, or its ``min_channels``."""
    message = (
        "BlurPool takes replace_convs, replace_maxpools and blur_first, all three required by this signature (MosaicML "
        "Composer v0.32.1 defaulted each to True): BlurPool(replace_convs=True, replace_maxpools=True, "
        "blur_first=True)."
    )
    if "min_channels" in kwargs:
        message += (
            f" It has no min_channels (got {kwargs['min_channels']!r}): a convolution with fewer than 16 input "
            "channels, v0.32.1's default, is always left alone, so the stem that sees the raw image is; drop it."
        )
    return message


class BlurPool(Algorithm):
    """Adds anti-aliasing filters to strided convolutions and max pools, for accuracy and shift invariance.

    Calls :func:`apply_blurpool` on the model at ``Event.INIT``, before the model moves to an accelerator and
    before the Trainer builds (or updates) the optimizer. Logs ``blurpool/num_blurpool_layers`` and
    ``blurpool/num_blurconv_layers``.

    Args:
        replace_convs: Replace strided ``torch.nn.Conv2d`` modules with :class:`BlurConv2d`.
        replace_maxpools: Replace eligible ``torch.nn.MaxPool2d`` modules with :class:`BlurMaxPool2d`.
        blur_first: When ``replace_convs`` is True, blur the input before the convolution; False applies the
            convolution at stride 1 before blurring, at a significant cost (closer to the paper). See
            :class:`BlurConv2d`.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import cifar_resnet
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = cifar_resnet(depth=8)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> algorithm = BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep", algorithms=[algorithm],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> sum(isinstance(m, BlurConv2d) for m in model.modules())
        4
    """

    @explain_call(_explain_blurpool_call)
    def __init__(self, replace_convs: bool, replace_maxpools: bool, blur_first: bool) -> None:
        self.replace_convs = replace_convs
        self.replace_maxpools = replace_maxpools
        self.blur_first = blur_first

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Replaces the model's strided convolutions and max pools; logs how many of each."""
        apply_blurpool(
            state.model,
            replace_convs=self.replace_convs,
            replace_maxpools=self.replace_maxpools,
            blur_first=self.blur_first,
        )
        logger.metric_fit(
            {
                "blurpool/num_blurpool_layers": sum(isinstance(m, BlurMaxPool2d) for m in state.model.modules()),
                "blurpool/num_blurconv_layers": sum(isinstance(m, BlurConv2d) for m in state.model.modules()),
            }
        )


BlurPoolHparams = hparams_for(BlurPool, defaults={"replace_convs": True, "replace_maxpools": True, "blur_first": True})
"""See :class:`BlurPool`; the fields are its arguments (YAML key ``blurpool``).

The seed's defaults: every field True.
"""
