"""Factorize: replace a model's large ``Conv2d`` and ``Linear`` layers by low-rank factorizations of themselves.

A dense layer with ``fan_in`` inputs and ``out`` outputs per position costs ``fan_in * out`` multiply-adds; its
factorization through ``latent`` channels or features costs ``latent * (fan_in + out)``, less whenever ``latent`` is
below the break-even rank ``fan_in * out / (fan_in + out)``. :func:`apply_factorization` swaps every layer large
enough (``min(in, out)`` at least ``min_channels`` / ``min_features``) whose factorization at the requested latent
size would be smaller, for :class:`FactorizedConv2d` / :class:`FactorizedLinear` initialised from the layer's own
weights by truncated SVD, so the model computes the best rank-``latent`` approximation of what it computed before.
``modules=`` restricts it to some layers by name (``'*.mlp.*'``: a transformer's MLPs only). :class:`Factorize` does
that at ``Event.INIT``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from composer.algorithms.factorize.factorized_layers import FactorizedConv2d, FactorizedLinear
from composer.algorithms.factorize.latent_sizes import check_latent, latent_size, max_useful_rank
from composer.algorithms.factorize.selection import ModuleSelection, check_modules, select_layers
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils.module_surgery import ReplacementPolicy, replace_module_classes

__all__ = [
    "LOG_NUM_CONV2D_REPLACEMENTS_KEY",
    "LOG_NUM_LINEAR_REPLACEMENTS_KEY",
    "Factorize",
    "FactorizeHparams",
    "apply_factorization",
]

LOG_NUM_CONV2D_REPLACEMENTS_KEY = "factorize/num_conv2d_replacements"
"""The key under which :class:`Factorize` logs how many factorized convolutions the model has."""
LOG_NUM_LINEAR_REPLACEMENTS_KEY = "factorize/num_linear_replacements"
"""The key under which :class:`Factorize` logs how many factorized linear layers the model has."""


def _check_min(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be an int of at least 1, such as 256.")


def _conv1d_classes(model: nn.Module) -> tuple[type[nn.Module], ...]:
    """The classes of Hugging Face's ``Conv1D`` (GPT-2's linear layer) in ``model``, without importing transformers."""
    return tuple(
        dict.fromkeys(
            type(m)
            for m in model.modules()
            if type(m).__name__ == "Conv1D" and type(m).__module__.startswith("transformers")
        )
    )


def apply_factorization(
    model: nn.Module,
    factorize_convs: bool = True,
    factorize_linears: bool = True,
    min_channels: int = 256,
    latent_channels: float = 0.25,
    min_features: int = 256,
    latent_features: float = 128,
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
    modules: ModuleSelection = None,
) -> nn.Module:
    """Replaces the large ``Conv2d`` and ``Linear`` layers of ``model`` by SVD-initialised factorizations, in place.

    A ``Conv2d`` (exactly that class, ``groups == 1``) becomes a :class:`FactorizedConv2d` when
    ``min(in_channels, out_channels) >= min_channels`` and its factorization at ``latent_size(latent_channels, in,
    out)`` has fewer weights and multiply-adds (at most ``max_useful_rank(in_channels * kh * kw, out_channels)``); a
    ``Linear`` (exactly that class), or Hugging Face's ``Conv1D`` (GPT-2's), becomes a :class:`FactorizedLinear` by
    the same rule with ``min_features`` and ``latent_features``. Subclasses (attention's output projection, a
    parametrized layer) and layers inside factorized ones are left alone, so applying it twice changes nothing more.
    The replacements compute the truncated SVD of the original layers. Pass the optimizers that already train
    ``model`` so that they train the new parameters (their state for the replaced weights is dropped).

    Args:
        model: The model to modify.
        factorize_convs: Whether to factorize ``Conv2d`` layers.
        factorize_linears: Whether to factorize ``Linear`` layers.
        min_channels: The least ``min(in_channels, out_channels)`` a convolution needs to be factorized.
        latent_channels: Latent channels of a factorized convolution: a fraction of ``min(in, out)`` if below 1,
            else the number itself (see :func:`latent_size`).
        min_features: The least ``min(in_features, out_features)`` a linear layer needs to be factorized.
        latent_features: Latent features of a factorized linear layer, as ``latent_channels``.
        optimizers: Optimizers training ``model``, kept in step (see :func:`~composer.utils.replace_module_classes`).
        modules: Only factorize these layers: ``fnmatch`` patterns of module names as ``model.named_modules()``
            gives them, matching a layer's name or a containing module's (``'*.mlp.*'``: the MLP layers of this
            library's GPT and of Hugging Face's GPT-2), or a predicate ``(name, layer) -> bool``; None: every layer.
            A pattern that selects no layer raises a ``ValueError`` that lists some layer names.

    Returns:
        nn.Module: ``model``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        >>> _ = apply_factorization(model, min_features=32, latent_features=0.25)
        >>> [type(layer).__name__ for layer in model], model[0].linear0.weight.shape  # 10 < 32; rank 0.25 * 64
        (['FactorizedLinear', 'ReLU', 'Linear'], torch.Size([16, 64]))
        >>> from composer.models import GPT, GPTConfig
        >>> gpt = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32))
        >>> _ = apply_factorization(gpt, min_features=32, latent_features=0.25, modules="*.mlp.*")  # the MLP only
        >>> [name for name, m in gpt.named_modules() if isinstance(m, FactorizedLinear)]
        ['blocks.0.mlp.0', 'blocks.0.mlp.2']
    """
    _check_min("min_channels", min_channels)
    _check_min("min_features", min_features)
    check_latent("latent_channels", latent_channels)
    check_latent("latent_features", latent_features)
    check_modules(modules)
    conv1d_classes = _conv1d_classes(model)
    kinds = ((nn.Conv2d, FactorizedConv2d) if factorize_convs else ()) + (
        (nn.Linear, FactorizedLinear, *conv1d_classes) if factorize_linears else ()
    )
    selected = select_layers(model, modules, kinds) if kinds else None
    inside = {
        id(child)
        for module in model.modules()
        if isinstance(module, (FactorizedConv2d, FactorizedLinear))
        for child in module.modules()
    }

    def eligible(module: nn.Module) -> bool:
        return id(module) not in inside and (selected is None or id(module) in selected)

    def conv_policy(module: nn.Module, index: int) -> nn.Module | None:
        if type(module) is not nn.Conv2d or not eligible(module) or module.groups != 1:
            return None
        if min(module.in_channels, module.out_channels) < min_channels:
            return None
        latent = latent_size(latent_channels, module.in_channels, module.out_channels)
        kh, kw = module.kernel_size
        if latent > max_useful_rank(module.in_channels * kh * kw, module.out_channels):
            return None
        return FactorizedConv2d.from_conv2d(module, latent)

    def linear_latent(in_features: int, out_features: int) -> int | None:
        if min(in_features, out_features) < min_features:
            return None
        latent = latent_size(latent_features, in_features, out_features)
        return latent if latent <= max_useful_rank(in_features, out_features) else None

    def linear_policy(module: nn.Module, index: int) -> nn.Module | None:
        if type(module) is not nn.Linear or not eligible(module):
            return None
        latent = linear_latent(module.in_features, module.out_features)
        return None if latent is None else FactorizedLinear.from_linear(module, latent)

    def conv1d_policy(module: nn.Module, index: int) -> nn.Module | None:
        in_features, out_features = module.get_parameter("weight").shape  # (in, out), a Linear's transposed
        latent = linear_latent(in_features, out_features) if eligible(module) else None
        return None if latent is None else FactorizedLinear.from_conv1d(module, latent)

    policies: dict[type[nn.Module], ReplacementPolicy] = {}
    if factorize_convs:
        policies[nn.Conv2d] = conv_policy
    if factorize_linears:
        policies[nn.Linear] = linear_policy
        policies.update(dict.fromkeys(conv1d_classes, conv1d_policy))
    if policies:
        replace_module_classes(model, policies, optimizers=optimizers)
    return model


class Factorize(Algorithm):
    """Factorizes a model's large ``Conv2d`` and ``Linear`` layers into low-rank pairs, to save compute.

    Calls :func:`apply_factorization` at ``Event.INIT``, before the Trainer builds (or updates) the optimizer, so
    the new layers are trained. Logs ``factorize/num_conv2d_replacements`` when it factorizes convolutions and
    ``factorize/num_linear_replacements`` when it factorizes linear layers (the factorized layers the model has),
    one record each.

    Args:
        factorize_convs: Whether to factorize ``Conv2d`` layers.
        factorize_linears: Whether to factorize ``Linear`` layers.
        min_channels: The least ``min(in_channels, out_channels)`` a convolution needs to be factorized.
        latent_channels: Latent channels: a fraction of ``min(in, out)`` if below 1, else the number itself.
        min_features: The least ``min(in_features, out_features)`` a linear layer needs to be factorized.
        latent_features: Latent features: a fraction of ``min(in, out)`` if below 1, else the number itself.
        modules: Only factorize the layers these name patterns select (``fnmatch``, over the names
            ``model.named_modules()`` gives, matching a layer or a module containing it), such as ``['*.mlp.*']``
            for a GPT's MLPs; or a predicate ``(name, layer) -> bool``. None: every layer large enough. A pattern
            that selects no layer raises a ``ValueError`` at ``Event.INIT`` naming some of the model's layers.

    Example:
        >>> from composer import Trainer
        >>> from composer.models import simple_cnn
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> model = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10)
        >>> data = DataLoader(TensorDataset(torch.randn(8, 1, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
        >>> algorithm = Factorize(min_channels=32, latent_channels=0.25, factorize_linears=False)
        >>> trainer = Trainer(model=model, train_dataloader=data, max_duration="1ep", algorithms=[algorithm],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> sum(isinstance(m, FactorizedConv2d) for m in model.modules())  # the 32 -> 64 convolution
        1
    """

    def __init__(
        self,
        factorize_convs: bool = True,
        factorize_linears: bool = True,
        min_channels: int = 256,
        latent_channels: float = 0.25,
        min_features: int = 256,
        latent_features: float = 128,
        modules: ModuleSelection = None,
    ) -> None:
        _check_min("min_channels", min_channels)
        _check_min("min_features", min_features)
        check_latent("latent_channels", latent_channels)
        check_latent("latent_features", latent_features)
        check_modules(modules)
        self.factorize_convs = factorize_convs
        self.factorize_linears = factorize_linears
        self.min_channels = min_channels
        self.latent_channels = float(latent_channels)
        self.min_features = min_features
        self.latent_features = float(latent_features)
        self.modules = modules if modules is None or isinstance(modules, str) or callable(modules) else list(modules)

    def match(self, event: Event, state: State) -> bool:
        """Runs once, at ``Event.INIT``."""
        return event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Factorizes the eligible layers; logs how many factorized layers of each kind the model has."""
        apply_factorization(
            state.model,
            factorize_convs=self.factorize_convs,
            factorize_linears=self.factorize_linears,
            min_channels=self.min_channels,
            latent_channels=self.latent_channels,
            min_features=self.min_features,
            latent_features=self.latent_features,
            modules=self.modules,
        )
        # One record per kind factorized, as the original logged them.
        if self.factorize_convs:
            count = sum(isinstance(m, FactorizedConv2d) for m in state.model.modules())
            logger.metric_fit({LOG_NUM_CONV2D_REPLACEMENTS_KEY: count})
        if self.factorize_linears:
            count = sum(isinstance(m, FactorizedLinear) for m in state.model.modules())
            logger.metric_fit({LOG_NUM_LINEAR_REPLACEMENTS_KEY: count})


FactorizeHparams = hparams_for(Factorize)
"""See :class:`Factorize`; the fields are its arguments (YAML key ``factorize``)."""
