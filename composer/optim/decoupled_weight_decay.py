"""SGD and Adam with weight decay decoupled from the learning rate's magnitude.

Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019, https://arxiv.org/abs/1711.05101) showed
that L2 regularisation through the gradient and true weight decay differ for adaptive optimizers, and that decay is
easier to tune when it is separate from the gradient step. :class:`torch.optim.AdamW` decays by ``lr * weight_decay``,
so changing the learning rate also changes the decay. Here each step first shrinks the weights by

    ``p *= 1 - (lr / initial_lr) * weight_decay``

where ``initial_lr`` is the group's learning rate when the optimizer was built: the decay follows the schedule's
multiplier (it anneals with the learning rate) but not the learning rate's magnitude, so ``weight_decay`` means the
same thing whatever ``lr`` is. The usual SGD (with momentum, dampening, Nesterov) or Adam (with AMSGrad) update
follows, without any coupled L2 term. Parameters without a gradient are left untouched.

Like torch's optimizers, both take ``foreach`` and ``fused``: the for-loop step updates one parameter at a time,
``foreach=True`` updates all of a group's parameters with torch's multi-tensor ``_foreach_*`` operations, and
``fused=True`` with torch's fused SGD and Adam kernels (on the CPU too). All three compute the same update within float
rounding and share the state layout, so a checkpoint loads into any of them. The default (both None) is torch's: the
foreach step when every parameter is on a CUDA device, else the for-loop. On the CPU, the fused step is the fastest
(``benchmarks/optimizer_step.py``; figures in the README). Unlike torch 2.14's ``SGD(fused=True)`` with momentum, the
fused step also takes a parameter whose first gradient comes after the first step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, overload

import torch
from torch.optim.optimizer import ParamsT

from composer.optim._multi_tensor import adam_foreach, check_fused, default_foreach, sgd_foreach

__all__ = ["DecoupledAdamW", "DecoupledSGDW", "check_non_negative", "check_step_kind"]


def check_non_negative(**values: float) -> None:
    """Raises ValueError naming the first of ``values`` (hyperparameters by name) that is not a finite number >= 0."""
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}={value!r} must be a finite number >= 0; set {name} to 0 or a positive number.")


def _decay_factor(group: dict[str, Any]) -> float:
    """``1 - (lr / initial_lr) * weight_decay`` for a param group (full decay if initial_lr is 0)."""
    schedule = group["lr"] / group["initial_lr"] if group["initial_lr"] else 1.0
    return float(1.0 - schedule * group["weight_decay"])


def check_step_kind(optimizer: str, foreach: bool | None, fused: bool | None) -> None:
    """Raises unless ``foreach`` and ``fused`` are each True, False or None, and not both True.

    Args:
        optimizer: The optimizer (or its config) the message names.
        foreach: Step all parameters at once with torch's ``_foreach_*`` operations; None: torch's default.
        fused: Step with torch's fused kernel; None: not fused.
    """
    for name, value in (("foreach", foreach), ("fused", fused)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{optimizer} {name}={value!r} must be True, False or None (torch's default).")
    if foreach and fused:
        raise ValueError(
            f"{optimizer} got foreach=True and fused=True; choose one: fused=True (one kernel per update) or "
            "foreach=True (one kernel per operation), or neither for torch's default."
        )


def _params_with_grad(group: dict[str, Any], optimizer: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (parameter, gradient) pairs of the group's parameters that have a gradient."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise RuntimeError(f"{optimizer} does not support sparse gradients; use a dense embedding or SparseAdam.")
        pairs.append((p, p.grad))
    return pairs


class _DecoupledWeightDecay(torch.optim.Optimizer):
    """The step both optimizers share: the closure, then per parameter with a gradient the decay and an update."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a parameter group and records its ``initial_lr`` (the learning rate the decay is relative to).

        Raises:
            ValueError: If the group asks for ``fused=True`` and a parameter cannot take a fused step.
        """
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        group.setdefault("initial_lr", group["lr"])
        check_step_kind(type(self).__name__, group.get("foreach"), group.get("fused"))
        if group.get("fused"):
            check_fused(type(self).__name__, group["params"])

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Performs one optimization step.

        Args:
            closure: Re-evaluates the model and returns the loss; it runs first, at the undecayed weights.

        Returns:
            The closure's loss, or None without a closure.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            decay = _decay_factor(group)
            pairs = _params_with_grad(group, type(self).__name__)
            params = [p for p, _ in pairs]
            fused = bool(group.get("fused"))
            foreach = group.get("foreach")
            if params and (fused or (default_foreach(params) if foreach is None else foreach)):
                if decay != 1.0:
                    torch._foreach_mul_(params, decay)
                self._update_all(params, [grad for _, grad in pairs], self.state, group, fused)
                continue
            for p, grad in pairs:
                if decay != 1.0:
                    p.mul_(decay)
                self._update(p, grad, group)
        return loss

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict[str, Any]) -> None:
        """Applies the optimizer's own update to ``p`` (already decayed)."""
        raise NotImplementedError

    @staticmethod
    def _update_all(
        params: list[torch.Tensor], grads: list[torch.Tensor], state: Any, group: dict[str, Any], fused: bool
    ) -> None:
        """Applies the update to every parameter at once (already decayed): foreach, or fused."""
        raise NotImplementedError


class DecoupledSGDW(_DecoupledWeightDecay):
    """SGD (with momentum) whose weight decay follows the learning-rate schedule but not the learning rate.

    Each step computes the loss (when a closure is given), then for every parameter with a gradient applies
    ``p *= 1 - (lr / initial_lr) * weight_decay`` and the SGD update of :class:`torch.optim.SGD` without its L2 term:
    ``buf = momentum * buf + (1 - dampening) * grad`` (``buf = grad`` on the first step),
    ``d = grad + momentum * buf`` with Nesterov or ``d = buf`` otherwise, ``p -= lr * d``. Use it instead of
    ``SGD(weight_decay=...)`` so that the decay strength does not change when you retune the learning rate.
    See Loshchilov & Hutter, https://arxiv.org/abs/1711.05101.

    Args:
        params: Parameters or parameter groups to optimize.
        lr: Learning rate.
        momentum: Momentum factor. Default = 0.
        dampening: Dampening for momentum. Default = 0.
        weight_decay: Decoupled weight decay per step at the initial learning rate. Default = 0.
        nesterov: Whether to use Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``). Default = False.
        foreach: Update all parameters of a group with torch's ``_foreach_*`` operations (True), one at a time
            (False), or as torch does by default (None: foreach when every parameter is on a CUDA device).
        fused: Update with torch's fused SGD kernel (its CPU, CUDA, MPS and XPU kernels); an error for parameters
            elsewhere or with ``foreach=True``. Default = None (not fused).

    Example:
        >>> w = torch.nn.Parameter(torch.ones(2))
        >>> optimizer = DecoupledSGDW([w], lr=0.1, weight_decay=0.01)
        >>> w.grad = torch.tensor([1.0, 0.0])
        >>> optimizer.step()
        >>> w.detach()  # 1 * (1 - 0.01) - 0.1 * grad
        tensor([0.8900, 0.9900])
        >>> optimizer.param_groups[0]["lr"] = 0.05  # a schedule halved the learning rate: the decay halves too
        >>> w.grad = torch.zeros(2)
        >>> optimizer.step()
        >>> torch.allclose(w, torch.tensor([0.89, 0.99]) * (1 - 0.5 * 0.01))
        True
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        check_non_negative(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
        check_step_kind(type(self).__name__, foreach, fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                f"nesterov=True needs momentum > 0 and dampening == 0 (got momentum={momentum!r}, "
                f"dampening={dampening!r}); set a positive momentum and dampening=0, or nesterov=False."
            )
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "foreach": foreach,
            "fused": fused,
        }
        super().__init__(params, defaults)

    _update_all = staticmethod(sgd_foreach)

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict[str, Any]) -> None:
        momentum = group["momentum"]
        if momentum != 0:
            state = self.state[p]
            buffer: torch.Tensor | None = state.get("momentum_buffer")
            if buffer is None:
                buffer = torch.clone(grad).detach()
                state["momentum_buffer"] = buffer
            else:
                buffer.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buffer, alpha=momentum) if group["nesterov"] else buffer
        p.add_(grad, alpha=-group["lr"])


class DecoupledAdamW(_DecoupledWeightDecay):
    """Adam whose weight decay follows the learning-rate schedule but not the learning rate.

    Each step computes the loss (when a closure is given), then for every parameter with a gradient applies
    ``p *= 1 - (lr / initial_lr) * weight_decay`` and the Adam update of :class:`torch.optim.Adam` without its L2
    term: ``m = b1 * m + (1 - b1) * g``, ``v = b2 * v + (1 - b2) * g**2`` (``v`` replaced by its running maximum
    with AMSGrad), ``p -= lr / (1 - b1**k) * m / (sqrt(v / (1 - b2**k)) + eps)`` at step ``k``. Unlike
    :class:`torch.optim.AdamW`, whose decay is ``lr * weight_decay``, ``weight_decay`` here is the fraction of the
    weights removed per step at the initial learning rate. See Loshchilov & Hutter, https://arxiv.org/abs/1711.05101.

    Args:
        params: Parameters or parameter groups to optimize.
        lr: Learning rate. Default = 1e-3.
        betas: Decay rates of the first and second moment estimates. Default = (0.9, 0.999).
        eps: Added to the denominator for numerical stability. Default = 1e-8.
        weight_decay: Decoupled weight decay per step at the initial learning rate. Default = 1e-2.
        amsgrad: Whether to use the AMSGrad variant. Default = False.
        foreach: Update all parameters of a group with torch's ``_foreach_*`` operations (True), one at a time
            (False), or as torch does by default (None: foreach when every parameter is on a CUDA device).
        fused: Update with torch's fused Adam kernel (its CPU, CUDA, MPS and XPU kernels); an error for parameters
            elsewhere or with ``foreach=True``. Default = None (not fused).

    Example:
        >>> w = torch.nn.Parameter(torch.ones(2))
        >>> optimizer = DecoupledAdamW([w], lr=0.1, weight_decay=0.01)
        >>> w.grad = torch.tensor([2.0, -2.0])
        >>> optimizer.step()
        >>> w.detach()  # 1 * (1 - 0.01) - 0.1 * sign(grad) on the first step
        tensor([0.8900, 1.0900])
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        check_non_negative(lr=lr, eps=eps, weight_decay=weight_decay)
        check_step_kind(type(self).__name__, foreach, fused)
        if len(betas) != 2 or not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"betas={betas!r} must be two numbers in [0, 1), for example (0.9, 0.999).")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "foreach": foreach,
            "fused": fused,
        }
        super().__init__(params, defaults)

    _update_all = staticmethod(adam_foreach)

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        state = self.state[p]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        step = state["step"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        second_moment = exp_avg_sq
        if group["amsgrad"]:
            torch.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            second_moment = state["max_exp_avg_sq"]
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        denominator = (second_moment.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
        p.addcdiv_(exp_avg, denominator, value=-group["lr"] / bias_correction1)
