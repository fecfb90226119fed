"""Config classes for the optimizers, and the ``OPTIMIZERS`` registry that YAML files name them by.

Every numeric field must be finite and non-negative. ``foreach`` and ``fused`` choose how the step runs, as in torch:
one parameter at a time, all at once with torch's ``_foreach_*`` operations, or with torch's fused kernels (SGD, Adam,
AdamW and the decoupled two; RMSprop has no fused kernel, so its config has no ``fused`` field). None keeps torch's
default, and setting both raises. A ``momentum`` of 1 or more is accepted, as torch accepts it, but
warns: it is almost surely a typo (``152`` for ``0.9``, or a percentage), and it makes the updates grow without bound.

Example:
    >>> import torch
    >>> config = OPTIMIZERS["decoupled_sgdw"].from_dict({"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4})
    >>> optimizer = config.initialize_object(torch.nn.Linear(2, 1).parameters())
    >>> type(optimizer).__name__, optimizer.defaults["momentum"]
    ('DecoupledSGDW', 0.9)
"""

from __future__ import annotations

import abc
import warnings
from typing import ClassVar

import torch
from torch.optim.optimizer import ParamsT

from composer.core.hparams import Hparams, hparams
from composer.optim.decoupled_weight_decay import DecoupledAdamW, DecoupledSGDW, check_non_negative, check_step_kind

__all__ = [
    "OPTIMIZERS",
    "AdamHparams",
    "AdamWHparams",
    "DecoupledAdamWHparams",
    "DecoupledSGDWHparams",
    "OptimizerHparams",
    "RMSpropHparams",
    "SGDHparams",
]


def _warn_large_momentum(config: _SGDFields | RMSpropHparams) -> None:
    if config.momentum >= 1:
        warnings.warn(
            f"{type(config).__name__} momentum={config.momentum!r} is outside [0, 1): past gradients then never fade "
            "(above 1 they grow each step), so training diverges. It is almost surely a typo; momentum is a fraction "
            "such as 0.9.",
            UserWarning,
            stacklevel=2,
        )


class OptimizerHparams(Hparams, abc.ABC):
    """The base of the optimizer configs; :meth:`initialize_object` builds the optimizer over the given parameters.

    A config whose fields are its optimizer's keyword arguments names the optimizer in :attr:`optimizer_class`.
    """

    optimizer_class: ClassVar[type[torch.optim.Optimizer]]

    def initialize_object(self, params: ParamsT) -> torch.optim.Optimizer:
        """Builds the optimizer: :attr:`optimizer_class` over ``params``, with the fields as keyword arguments.

        Args:
            params: The parameters (or parameter groups) to optimize, e.g. ``model.parameters()``.
        """
        return self.optimizer_class(params, **self.to_dict())


@hparams
class _SGDFields(OptimizerHparams):
    """The fields SGD and DecoupledSGDW share."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    foreach: bool | None = None
    fused: bool | None = None

    def validate(self) -> None:
        """Checks the numbers (non-negative, finite), Nesterov's needs, and that foreach and fused are not both set.

        A momentum of 1 or more warns (see the module docstring).
        """
        check_non_negative(lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay, dampening=self.dampening)
        check_step_kind(type(self).__name__, self.foreach, self.fused)
        _warn_large_momentum(self)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError(
                f"nesterov=True needs momentum > 0 and dampening == 0 (got momentum={self.momentum!r}, "
                f"dampening={self.dampening!r}); set a positive momentum and dampening=0, or nesterov=False."
            )


@hparams
class _AdamFields(OptimizerHparams):
    """The fields Adam, AdamW and DecoupledAdamW share (``weight_decay`` defaults differ, so it is redeclared)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    amsgrad: bool = False
    foreach: bool | None = None
    fused: bool | None = None

    def validate(self) -> None:
        """Checks the numbers (non-negative, finite, betas in [0, 1)), and that foreach and fused are not both set."""
        check_non_negative(lr=self.lr, eps=self.eps, weight_decay=self.weight_decay)
        check_step_kind(type(self).__name__, self.foreach, self.fused)
        if not all(0.0 <= beta < 1.0 for beta in self.betas):
            raise ValueError(f"betas={self.betas!r} must be two numbers in [0, 1), for example (0.9, 0.999).")


@hparams
class SGDHparams(_SGDFields):
    """Hyperparameters for :class:`torch.optim.SGD` (weight decay coupled as an L2 term in the gradient).

    Args:
        lr: Learning rate.
        momentum: Momentum factor, in [0, 1) (a value of 1 or more warns: almost surely a typo). Default = 0.0.
        weight_decay: L2 penalty. Default = 0.0.
        dampening: Dampening for momentum. Default = 0.0.
        nesterov: Whether to use Nesterov momentum. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA).
        fused: Step with torch's fused kernel (CPU, CUDA, MPS, XPU). Default = None (not fused).
    """

    optimizer_class = torch.optim.SGD


@hparams
class DecoupledSGDWHparams(_SGDFields):
    """Hyperparameters for :class:`~composer.optim.decoupled_weight_decay.DecoupledSGDW`.

    Args:
        lr: Learning rate.
        momentum: Momentum factor, in [0, 1) (a value of 1 or more warns: almost surely a typo). Default = 0.0.
        weight_decay: Decoupled weight decay per step at the initial learning rate. Default = 0.0.
        dampening: Dampening for momentum. Default = 0.0.
        nesterov: Whether to use Nesterov momentum. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA).
        fused: Step with torch's fused kernel (CPU, CUDA, MPS, XPU). Default = None (not fused).
    """

    optimizer_class = DecoupledSGDW


@hparams
class AdamHparams(_AdamFields):
    """Hyperparameters for :class:`torch.optim.Adam` (weight decay coupled as an L2 term in the gradient).

    Args:
        lr: Learning rate. Default = 1e-3.
        betas: Decay rates of the moment estimates. Default = (0.9, 0.999).
        eps: Added to the denominator for numerical stability. Default = 1e-8.
        weight_decay: L2 penalty. Default = 0.0.
        amsgrad: Whether to use the AMSGrad variant. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA).
        fused: Step with torch's fused kernel (CPU, CUDA, MPS, XPU). Default = None (not fused).
    """

    optimizer_class = torch.optim.Adam


@hparams
class AdamWHparams(_AdamFields):
    """Hyperparameters for :class:`torch.optim.AdamW` (decay ``lr * weight_decay`` per step).

    Args:
        lr: Learning rate. Default = 1e-3.
        betas: Decay rates of the moment estimates. Default = (0.9, 0.999).
        eps: Added to the denominator for numerical stability. Default = 1e-8.
        weight_decay: Weight decay coefficient. Default = 1e-2.
        amsgrad: Whether to use the AMSGrad variant. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA).
        fused: Step with torch's fused kernel (CPU, CUDA, MPS, XPU). Default = None (not fused).
    """

    weight_decay: float = 1e-2

    optimizer_class = torch.optim.AdamW


@hparams
class DecoupledAdamWHparams(_AdamFields):
    """Hyperparameters for :class:`~composer.optim.decoupled_weight_decay.DecoupledAdamW`.

    Args:
        lr: Learning rate. Default = 1e-3.
        betas: Decay rates of the moment estimates. Default = (0.9, 0.999).
        eps: Added to the denominator for numerical stability. Default = 1e-8.
        weight_decay: Decoupled weight decay per step at the initial learning rate. Default = 1e-2.
        amsgrad: Whether to use the AMSGrad variant. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA).
        fused: Step with torch's fused kernel (CPU, CUDA, MPS, XPU). Default = None (not fused).
    """

    weight_decay: float = 1e-2

    optimizer_class = DecoupledAdamW


@hparams
class RMSpropHparams(OptimizerHparams):
    """Hyperparameters for :class:`torch.optim.RMSprop`.

    Args:
        lr: Learning rate.
        alpha: Smoothing constant of the squared-gradient average. Default = 0.99.
        eps: Added to the denominator for numerical stability. Default = 1e-8.
        momentum: Momentum factor, in [0, 1) (a value of 1 or more warns: almost surely a typo). Default = 0.0.
        weight_decay: L2 penalty. Default = 0.0.
        centered: Whether to normalise by the estimated variance of the gradient. Default = False.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations (True), one at a time (False), or
            torch's default (None: foreach on CUDA). torch has no fused RMSprop.
    """

    lr: float
    alpha: float = 0.99
    eps: float = 1e-8
    momentum: float = 0.0
    weight_decay: float = 0.0
    centered: bool = False
    foreach: bool | None = None

    def validate(self) -> None:
        """Checks that the numeric fields are non-negative and finite; a momentum of 1 or more warns."""
        check_non_negative(
            lr=self.lr, alpha=self.alpha, eps=self.eps, momentum=self.momentum, weight_decay=self.weight_decay
        )
        _warn_large_momentum(self)

    optimizer_class = torch.optim.RMSprop


OPTIMIZERS: dict[str, type[OptimizerHparams]] = {
    "sgd": SGDHparams,
    "adam": AdamHparams,
    "adamw": AdamWHparams,
    "decoupled_sgdw": DecoupledSGDWHparams,
    "decoupled_adamw": DecoupledAdamWHparams,
    "rmsprop": RMSpropHparams,
}
"""Config key -> optimizer config class, for YAML files (``optimizer: {decoupled_sgdw: {lr: 0.1}}``)."""
