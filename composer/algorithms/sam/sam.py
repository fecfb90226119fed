"""Sharpness-aware minimization (Foret et al. 2020, https://arxiv.org/abs/2010.01412).

SAM looks for weights whose whole neighbourhood has low loss. Each SAM step takes the gradient ``g`` at the weights
``w``, moves to the worst nearby point ``w + rho * g / ||g||``, takes the gradient there, and applies *that* gradient
to the original ``w`` with the base optimizer. :func:`sam_perturbation` is the ascent step, :class:`SAMOptimizer`
wraps any optimizer with the two passes, and :class:`SAM` installs the wrapper in the Trainer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.precision import Precision
from composer.core.state import State

__all__ = ["SAM", "SAMHparams", "SAMOptimizer", "sam_perturbation"]

# The key SAMOptimizer adds to its base optimizer's state dict.
_STEP_KEY = "sam_global_step"


def _check_args(rho: float, epsilon: float, interval: int) -> None:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not rho > 0:
        raise ValueError(f"SAM rho={rho!r} must be a number greater than 0 (the neighbourhood radius); e.g. 0.05.")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
        raise ValueError(f"SAM epsilon={epsilon!r} must be a non-negative number; the default is 1e-12.")
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ValueError(
            f"SAM interval={interval!r} must be a positive integer: 1 runs SAM every step, k every k-th step."
        )


def sam_perturbation(grads: Sequence[torch.Tensor], rho: float, epsilon: float = 1e-12) -> list[torch.Tensor]:
    """The weight perturbation of a SAM step: ``e = rho * g / (||g|| + epsilon)`` for every gradient.

    ``||g||`` is the global L2 norm over all the gradients together, so the perturbation as a whole has norm
    ``rho`` (just under, by ``epsilon``).

    Args:
        grads: The gradients, one tensor per parameter.
        rho: The neighbourhood radius, greater than 0.
        epsilon: Added to the norm, so a zero gradient gives a zero perturbation.

    Returns:
        list[Tensor]: One perturbation per gradient, with its shape.

    Example:
        >>> [e] = sam_perturbation([torch.tensor([3.0, 4.0])], rho=0.5, epsilon=0.0)
        >>> e
        tensor([0.3000, 0.4000])
    """
    _check_args(rho, epsilon, 1)
    if not grads:
        return []
    device = grads[0].device
    # Norm of the per-tensor norms = norm of everything concatenated; computed in fp32 for low-precision grads.
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()).to(device) for g in grads]))
    scale = rho / (norm + epsilon)
    return [g * scale.to(g.device, g.dtype) for g in grads]


class SAMOptimizer(torch.optim.Optimizer):
    """Wraps an optimizer so that every ``interval``-th step is a sharpness-aware minimization step.

    ``step(closure)`` needs a closure that zeroes the gradients, recomputes the loss and its gradients, and returns
    the loss (the Trainer passes one that runs the batch's events ``BEFORE_TRAIN_BATCH`` to ``AFTER_TRAIN_BATCH``,
    with every microbatch and the precision context). On a SAM step it

    1. calls the closure (gradients ``g`` at the weights ``w``),
    2. moves the weights to ``w + e`` with ``e = rho * g / (||g|| + epsilon)`` (:func:`sam_perturbation`),
    3. calls the closure again (gradients at ``w + e``),
    4. puts back the exact weights ``w`` and steps the base optimizer with the second gradients.

    Other steps call the closure once and step the base optimizer. ``step`` returns the first pass's loss.

    The wrapper shares the base optimizer's ``param_groups`` and ``state``: schedulers attached to either one
    change the learning rate of both, and the state dict is the base optimizer's plus the step counter (loading it
    into a plain base optimizer also works). Weights are restored by copy, not by subtracting ``e``, so they come
    back bit for bit.

    Args:
        base_optimizer: The optimizer that applies the updates.
        rho: The neighbourhood radius, greater than 0. Default: 0.05.
        epsilon: Added to the gradient norm for numerical stability. Default: 1e-12.
        interval: Run SAM on every ``interval``-th step (1 = every step). Default: 1.

    Example:
        >>> model = torch.nn.Linear(2, 1)
        >>> sam = SAMOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.05)
        >>> x, y = torch.randn(8, 2), torch.randn(8, 1)
        >>> def closure():
        ...     sam.zero_grad()
        ...     loss = torch.nn.functional.mse_loss(model(x), y)
        ...     loss.backward()
        ...     return loss
        >>> loss = sam.step(closure)
    """

    def __init__(
        self, base_optimizer: torch.optim.Optimizer, rho: float = 0.05, epsilon: float = 1e-12, interval: int = 1
    ) -> None:
        if not isinstance(base_optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"SAMOptimizer base_optimizer must be a torch.optim.Optimizer, got {type(base_optimizer).__name__}."
            )
        if isinstance(base_optimizer, SAMOptimizer):
            raise ValueError("SAMOptimizer base_optimizer is already a SAMOptimizer; wrap the plain optimizer once.")
        _check_args(rho, epsilon, interval)
        self.base_optimizer = base_optimizer
        self.rho = float(rho)
        self.epsilon = float(epsilon)
        self.interval = interval
        self.global_step = 0
        super().__init__(base_optimizer.param_groups, base_optimizer.defaults)
        # Share, not copy: learning-rate changes, surgery and freezing on either object reach the other.
        self.param_groups = base_optimizer.param_groups
        self.state = base_optimizer.state

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Runs one step (two passes of ``closure`` on SAM steps, one otherwise); returns the first pass's loss."""
        if closure is None:
            raise ValueError(
                "SAMOptimizer.step needs a closure that zeroes the gradients, recomputes the loss, calls backward and "
                "returns the loss: SAM evaluates the gradient twice per step. Call optimizer.step(closure)."
            )
        with torch.enable_grad():
            loss = closure()
        if (self.global_step + 1) % self.interval == 0:
            params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
            with torch.no_grad():
                originals = [p.detach().clone() for p in params]
                for p, e in zip(params, sam_perturbation([p.grad for p in params], self.rho, self.epsilon)):
                    p.add_(e)
            with torch.enable_grad():
                closure()
            with torch.no_grad():
                for p, original in zip(params, originals):
                    p.copy_(original)
        self.base_optimizer.step()
        self.global_step += 1
        return loss

    def state_dict(self) -> dict[str, Any]:
        """The base optimizer's state dict plus the step counter (which decides the SAM steps)."""
        state = self.base_optimizer.state_dict()
        state[_STEP_KEY] = self.global_step
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads a state dict from :meth:`state_dict` (or from the plain base optimizer)."""
        state_dict = dict(state_dict)
        self.global_step = int(state_dict.pop(_STEP_KEY, 0))
        self.base_optimizer.load_state_dict(state_dict)
        # Loading gives the base optimizer new group and state containers: share them again.
        self.param_groups = self.base_optimizer.param_groups
        self.state = self.base_optimizer.state


def _check_trainer_support(state: State) -> None:
    if state.precision == Precision.AMP:
        raise ValueError(
            "SAM cannot run with precision='amp': the gradient scaler steps the optimizer without a closure, so the "
            "second (perturbed) pass cannot run. Use precision='bf16' or 'fp32' with SAM, or remove SAM."
        )
    if len(state.optimizers) > 1:
        raise ValueError(
            f"SAM wraps a single optimizer, but the run has {len(state.optimizers)}; the Trainer re-runs the batch "
            "through a closure only with one optimizer. Pass one optimizer (with several param groups if needed)."
        )


class SAM(Algorithm):
    """Adds sharpness-aware minimization (Foret et al. 2020) by wrapping an existing optimizer with a SAMOptimizer.

    SAM steps take roughly twice as long: the batch runs forward and backward twice, and every event from
    ``BEFORE_TRAIN_BATCH`` to ``AFTER_TRAIN_BATCH`` (microbatches included) fires twice. Runs on ``Event.INIT``; when
    the Trainer builds its default optimizer after ``INIT``, the wrapping happens at ``Event.FIT_START`` instead.
    Learning-rate schedulers keep working, since the wrapper shares the optimizer's param groups.

    Needs the Trainer's closure: ``precision='amp'`` (whose gradient scaler steps without one) and several
    optimizers are refused at ``INIT``. Use ``'bf16'`` for mixed precision.

    Args:
        rho: The neighborhood size parameter of SAM. Must be greater than 0. Default: 0.05.
        epsilon: A small value added to the gradient norm for numerical stability. Default: 1e-12.
        interval: SAM will run once per ``interval`` steps. A value of 1 will cause SAM to run every step. Steps on
            which SAM runs take roughly twice as much time to complete. Default: 1.

    Example:
        >>> import torch
        >>> from composer import Trainer
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> trainer = Trainer(
        ...     model=model,
        ...     train_dataloader=torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4),
        ...     max_duration="1ep",
        ...     optimizers=torch.optim.SGD(model.parameters(), lr=0.1),  # SAM wraps it
        ...     algorithms=[SAM(rho=0.05, interval=2)],
        ...     progress_bar=False,
        ... )
        >>> type(trainer.state.optimizers[0]).__name__
        'SAMOptimizer'
        >>> trainer.fit()
    """

    def __init__(self, rho: float = 0.05, epsilon: float = 1e-12, interval: int = 1) -> None:
        _check_args(rho, epsilon, interval)
        self.rho = rho
        self.epsilon = epsilon
        self.interval = interval

    def match(self, event: Event, state: State) -> bool:
        """Runs at INIT, and at FIT_START while some optimizer is not wrapped yet."""
        return event == Event.INIT or (
            event == Event.FIT_START and not all(isinstance(o, SAMOptimizer) for o in state.optimizers)
        )

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Checks that the run can take SAM steps, then wraps the optimizer."""
        _check_trainer_support(state)
        if state.optimizers and not isinstance(state.optimizers[0], SAMOptimizer):
            state.optimizers = [SAMOptimizer(state.optimizers[0], self.rho, self.epsilon, self.interval)]


SAMHparams = hparams_for(SAM)
"""See :class:`SAM`; the fields are its arguments (YAML key ``sam``)."""
