"""Squeeze-and-Excitation (Hu et al. 2018): rescale each channel by a gate computed from global context.

A convolution sees only a local window. An SE block pools each channel over the whole image ("squeeze"), runs the
pooled vector through a small bottleneck MLP with a sigmoid ("excitation"), and multiplies every channel by its
gate, so the network can emphasise channels using information from the whole input. :class:`SqueezeExcite2d` is the
block, :class:`SqueezeExciteConv2d` a convolution followed by one, :func:`apply_se` adds them after a model's
convolutions and :class:`SqueezeExcite` does that at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils.module_surgery import replace_module_classes

__all__ = ["SqueezeExcite", "SqueezeExcite2d", "SqueezeExciteConv2d", "SqueezeExciteHparams", "apply_se"]


def _check_latent_channels(latent_channels: float) -> None:
    if isinstance(latent_channels, bool) or not isinstance(latent_channels, (int, float)) or not latent_channels > 0:
        raise ValueError(
            f"latent_channels={latent_channels!r} must be positive: a width (>= 1, such as 64) or a fraction of the "
            "channels (< 1, such as 0.125)."
        )


def _check_min_channels(min_channels: int) -> None:
    if isinstance(min_channels, bool) or not isinstance(min_channels, int) or min_channels < 0:
        raise ValueError(f"min_channels={min_channels!r} must be a non-negative int, such as 128.")


class SqueezeExcite2d(nn.Module):
    """Squeeze-and-Excitation block from (Hu et al. 2019).

    Global average pooling, then a one-hidden-layer MLP (``C -> latent -> C``, bias-free ``Linear`` layers, ReLU
    between, sigmoid after), whose outputs rescale the input's channels:
    ``out = x * sigmoid(W2 relu(W1 mean_hw(x)))``. It lets the network use information about the whole input, as
    opposed to only the local receptive fields of convolutions.

    Args:
        num_features: Number of features or channels ``C`` in the input.
        latent_channels: Width of the MLP's hidden layer; if less than 1, a fraction of ``num_features``
            (``max(1, int(latent_channels * num_features))``).

    Example:
        >>> se = SqueezeExcite2d(num_features=16, latent_channels=0.25)
        >>> se.latent_channels, se(torch.randn(2, 16, 8, 8)).shape
        (4, torch.Size([2, 16, 8, 8]))
    """

    def __init__(self, num_features: int, latent_channels: float = 0.125) -> None:
        super().__init__()
        _check_latent_channels(latent_channels)
        if latent_channels >= 1:
            self.latent_channels = int(latent_channels)
        else:
            self.latent_channels = max(1, int(latent_channels * num_features))
        self.num_features = num_features
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.mlp = nn.Sequential(
            nn.Linear(num_features, self.latent_channels, bias=False),
            nn.ReLU(inplace=True),
            nn.Linear(self.latent_channels, num_features, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Rescales the channels of ``input`` ``(N, C, H, W)`` by gates in (0, 1) computed from the whole image."""
        n, c = input.shape[:2]
        gates: torch.Tensor = self.mlp(self.pool(input).view(n, c))  # (N, C)
        return input * gates.view(n, c, 1, 1)


class SqueezeExciteConv2d(nn.Module):
    """Helper class used to add a :class:`SqueezeExcite2d` module after a ``Conv2d``: ``se(conv(x))``.

    Args:
        *args: Arguments of ``nn.Conv2d``, used when ``conv`` is None.
        latent_channels: Hidden width of the SE block (see :class:`SqueezeExcite2d`).
        conv: An existing convolution to wrap (it is used as is, with its parameters).
        **kwargs: Keyword arguments of ``nn.Conv2d``, used when ``conv`` is None.

    Example:
        >>> conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        >>> layer = SqueezeExciteConv2d(conv=conv, latent_channels=4)
        >>> layer.conv is conv, layer(torch.randn(2, 8, 6, 6)).shape
        (True, torch.Size([2, 16, 6, 6]))
        >>> SqueezeExciteConv2d(8, 16, kernel_size=1).se.num_features
        16
    """

    def __init__(self, *args: Any, latent_channels: float = 0.125, conv: nn.Conv2d | None = None, **kwargs: Any):
        super().__init__()
        if conv is not None and (args or kwargs):
            raise ValueError(
                "SqueezeExciteConv2d takes either conv= (an existing Conv2d) or Conv2d arguments, not both; got "
                f"conv and args={args!r}, kwargs={kwargs!r}."
            )
        self.conv = nn.Conv2d(*args, **kwargs) if conv is None else conv
        self.se = SqueezeExcite2d(self.conv.out_channels, latent_channels)
        # New parameters live where the convolution's do (the surgery may run on a model already on a device).
        self.se.to(device=self.conv.weight.device, dtype=self.conv.weight.dtype)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``se(conv(input))``."""
        out: torch.Tensor = self.se(self.conv(input))
        return out


def apply_se(
    model: nn.Module,
    latent_channels: float,
    min_channels: int,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> nn.Module:
    """Adds a Squeeze-and-Excitation block after each ``Conv2d`` of ``model`` with enough channels, in place.

    A convolution ``conv`` becomes ``SqueezeExciteConv2d(conv=conv)`` exactly when
    ``min(conv.in_channels, conv.out_channels) >= min_channels``; convolutions already followed by an SE block are
    left alone, so applying it twice changes nothing more. The new SE parameters are freshly initialised; pass the
    optimizers that already train ``model`` so that they train these too.

    Args:
        model: The model to modify.
        latent_channels: Hidden width of each SE block (see :class:`SqueezeExcite2d`).
        min_channels: The least ``min(in_channels, out_channels)`` a convolution needs to get an SE block.
        optimizers: Optimizers already training ``model``, kept in step (see
            :func:`~composer.utils.replace_module_classes`).

    Returns:
        nn.Module: ``model``.

    Example:
        >>> from composer.models import cifar_resnet
        >>> model = apply_se(cifar_resnet(depth=8), latent_channels=8, min_channels=32)
        >>> sum(isinstance(m, SqueezeExciteConv2d) for m in model.modules())  # convs with in and out >= 32
        4
    """
    _check_latent_channels(latent_channels)
    _check_min_channels(min_channels)
    already_wrapped = {id(m.conv) for m in model.modules() if isinstance(m, SqueezeExciteConv2d)}

    def policy(module: nn.Module, index: int) -> nn.Module | None:
        assert isinstance(module, nn.Conv2d)
        if id(module) in already_wrapped or min(module.in_channels, module.out_channels) < min_channels:
            return None
        return SqueezeExciteConv2d(conv=module, latent_channels=latent_channels)

    replace_module_classes(model, {nn.Conv2d: policy}, optimizers=optimizers)
    return model


class SqueezeExcite(Algorithm):
    """Adds Squeeze-and-Excitation blocks (Hu et al. 2019) after the ``Conv2d`` modules in a neural network.

    Calls :func:`apply_se` at ``Event.INIT``, before the Trainer builds (or updates) the optimizer, so the new
    parameters are trained. Logs ``squeeze_excite/num_squeeze_excite_layers``. See :class:`SqueezeExcite2d`.

    Args:
        latent_channels: Dimensionality of the hidden layer within the added MLP. If less than 1, interpreted as a
            fraction of ``num_features``.
        min_channels: An SE block is added after a ``Conv2d`` module ``conv`` only if
            ``min(conv.in_channels, conv.out_channels) >= min_channels``. For models that reduce spatial size and
            increase channel count deeper in the network, this adds SE blocks only deeper in the network, where
            they cost less because their inputs are smaller.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import cifar_resnet
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = cifar_resnet(depth=8)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep",
        ...                   algorithms=[SqueezeExcite(latent_channels=8, min_channels=64)], progress_bar=False)
        >>> trainer.fit()
        >>> sum(isinstance(m, SqueezeExciteConv2d) for m in model.modules())
        1
    """

    def __init__(self, latent_channels: float = 64, min_channels: int = 128) -> None:
        _check_latent_channels(latent_channels)
        _check_min_channels(min_channels)
        self.latent_channels = float(latent_channels)
        self.min_channels = min_channels

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Adds SE blocks after the eligible convolutions; logs how many the model has."""
        apply_se(state.model, latent_channels=self.latent_channels, min_channels=self.min_channels)
        count = sum(isinstance(m, SqueezeExciteConv2d) for m in state.model.modules())
        logger.metric_fit({"squeeze_excite/num_squeeze_excite_layers": count})


SqueezeExciteHparams = hparams_for(SqueezeExcite)
"""See :class:`SqueezeExcite`; the fields are its arguments (YAML key ``squeeze_excite``)."""
