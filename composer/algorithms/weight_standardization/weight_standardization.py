"""Weight Standardization (Qiao et al. 2019): convolutions use their weights standardized per output channel.

Each convolution computes with ``W_hat = (W - mean) / (std + eps)``, the mean and (population) standard deviation
taken per output channel over its ``in_channels / groups x k x k`` weights, instead of ``W`` itself. The raw weights
stay the trained parameters; :mod:`torch.nn.utils.parametrize` recomputes ``W_hat`` at each forward, so gradients
flow through the standardization. It smooths the loss landscape and pairs with batch-independent normalization such
as GroupNorm when batches are small. :func:`standardize_weight` is the formula, :class:`WeightStandardizer` the
parametrization, :func:`apply_weight_standardization` registers it on a model's convolutions and
:class:`WeightStandardization` does that at ``Event.INIT``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = [
    "WeightStandardization",
    "WeightStandardizationHparams",
    "WeightStandardizer",
    "apply_weight_standardization",
    "standardize_weight",
]

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps={eps!r} must be a finite number >= 0, such as 1e-5 (it keeps the division finite).")


def _check_ignore(n_last_layers_ignore: int) -> None:
    if isinstance(n_last_layers_ignore, bool) or not isinstance(n_last_layers_ignore, int) or n_last_layers_ignore < 0:
        raise ValueError(
            f"n_last_layers_ignore={n_last_layers_ignore!r} must be an int >= 0: how many of the last convolutions "
            "to leave alone (1 for a model whose classifier is a convolution, else 0)."
        )


def standardize_weight(weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Standardizes a convolution weight per output channel: ``(W - mean) / (std + eps)``.

    The mean and the population standard deviation (no Bessel correction) are taken over every dimension but the
    first, the ``in_channels / groups x k x k`` weights of each output channel.

    Args:
        weight: A convolution weight ``(out_channels, in_channels / groups, *kernel_size)``.
        eps: Added to the standard deviation, so a constant channel gives zeros rather than a division by zero.

    Returns:
        torch.Tensor: The standardized weight, same shape: each output channel has mean 0 and standard deviation
        ``std / (std + eps)`` (1 up to ``eps``).

    Example:
        >>> w = torch.tensor([[[1.0, 3.0]], [[10.0, 10.0]]])  # two output channels, one input, kernel 2
        >>> standardize_weight(w, eps=0.0)[0], standardize_weight(w)[1]
        (tensor([[-1.,  1.]]), tensor([[0., 0.]]))
    """
    dims = tuple(range(1, weight.ndim))
    std, mean = torch.std_mean(weight, dim=dims, correction=0, keepdim=True)
    return (weight - mean) / (std + eps)


class WeightStandardizer(nn.Module):
    """The parametrization ``weight -> standardize_weight(weight, eps)``, for ``torch.nn.utils.parametrize``.

    Args:
        eps: See :func:`standardize_weight`.

    Example:
        >>> conv = torch.nn.Conv2d(3, 4, 3)
        >>> _ = torch.nn.utils.parametrize.register_parametrization(conv, "weight", WeightStandardizer())
        >>> conv.weight.mean(dim=(1, 2, 3)).abs().max() < 1e-6
        tensor(True)
    """

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        _check_eps(eps)
        self.eps = eps

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        """Returns the standardized weight."""
        return standardize_weight(weight, self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"


def apply_weight_standardization(model: nn.Module, n_last_layers_ignore: int = 0, eps: float = 1e-5) -> nn.Module:
    """Registers a :class:`WeightStandardizer` on the ``weight`` of the convolutions of ``model``, in place.

    Every ``Conv1d``, ``Conv2d`` and ``Conv3d`` (transposed convolutions excepted: their weights are laid out by
    input channel) is standardized, except the last ``n_last_layers_ignore`` of them in registration order (the
    order of ``model.modules()``, which for the usual model is the order of the forward pass): set it to 1 when the
    classifier is a convolution, as in segmentation heads, since standardizing the logits' weights fixes their
    scale. A convolution already standardized is left as is, so applying it twice changes nothing more.

    The raw weight stays the same ``Parameter`` object (now at ``<conv>.parametrizations.weight.original``), so an
    optimizer built before keeps training it; the model's state dict names it by that key, so checkpoints load
    into a model that has the same standardization applied (as the Algorithm does at ``Event.INIT``, before the
    Trainer loads a checkpoint).

    Args:
        model: The model to modify.
        n_last_layers_ignore: How many of the last convolutions to leave alone.
        eps: See :func:`standardize_weight`.

    Returns:
        nn.Module: ``model``.

    Example:
        >>> from composer.models import simple_cnn
        >>> model = apply_weight_standardization(simple_cnn(in_channels=1, widths=(8, 16), num_classes=10))
        >>> conv = model.module.features[0]
        >>> sorted(k for k in model.state_dict() if k.startswith("module.features.0."))
        ['module.features.0.parametrizations.weight.original']
        >>> torch.allclose(conv.weight, standardize_weight(conv.parametrizations.weight.original))
        True
    """
    _check_ignore(n_last_layers_ignore)
    _check_eps(eps)
    convs = [m for m in model.modules() if isinstance(m, _CONVS)]
    if n_last_layers_ignore:
        convs = convs[:-n_last_layers_ignore]
    for conv in convs:
        if not parametrize.is_parametrized(conv, "weight"):
            parametrize.register_parametrization(conv, "weight", WeightStandardizer(eps))
    return model


def _num_standardized(model: nn.Module) -> int:
    # Each standardized convolution has one WeightStandardizer among its modules (in its parametrizations).
    return sum(
        isinstance(m, _CONVS) and any(isinstance(p, WeightStandardizer) for p in m.modules()) for m in model.modules()
    )


class WeightStandardization(Algorithm):
    """Standardizes the weights of a model's convolutions per output channel (Qiao et al. 2019).

    Calls :func:`apply_weight_standardization` at ``Event.INIT``, before the Trainer loads a checkpoint or builds
    the optimizer. Logs ``weight_standardization/num_standardized_convs``.

    Args:
        n_last_layers_ignore: How many of the last convolutions to leave alone (1 when the classifier is a
            convolution).
        eps: Added to each channel's standard deviation (see :func:`standardize_weight`).

    Example:
        >>> from composer import Trainer
        >>> from composer.models import simple_cnn
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = simple_cnn(in_channels=1, widths=(8, 16), num_classes=10)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep",
        ...                   algorithms=[WeightStandardization()], progress_bar=False)
        >>> trainer.fit()
        >>> type(model.module.features[0]).__name__
        'ParametrizedConv2d'
    """

    def __init__(self, n_last_layers_ignore: int = 0, eps: float = 1e-5) -> None:
        _check_ignore(n_last_layers_ignore)
        _check_eps(eps)
        self.n_last_layers_ignore = n_last_layers_ignore
        self.eps = float(eps)

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Standardizes the convolutions; logs how many the model has standardized."""
        apply_weight_standardization(state.model, n_last_layers_ignore=self.n_last_layers_ignore, eps=self.eps)
        logger.metric_fit({"weight_standardization/num_standardized_convs": _num_standardized(state.model)})


WeightStandardizationHparams = hparams_for(WeightStandardization)
"""See :class:`WeightStandardization`; the fields are its arguments (YAML key ``weight_standardization``)."""
