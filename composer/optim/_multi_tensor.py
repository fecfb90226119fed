"""The multi-tensor steps of DecoupledSGDW and DecoupledAdamW: ``foreach`` (torch's ``_foreach_*`` ops, one kernel per
operation over all parameters) and ``fused`` (torch's fused SGD and Adam kernels, one kernel for the whole update).

Each takes lists of parameters and gradients that already hold the decoupled decay (the caller applied it with one
``_foreach_mul_``), updates the optimizer state in place, and computes the same update as the for-loop step of
:mod:`composer.optim.decoupled_weight_decay` (within float rounding). Steps stay Python ints in the state, so a
checkpoint written with one step kind loads into the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import torch

__all__: list[str] = []

# torch.utils._foreach_utils._get_fused_kernels_supported_devices() in torch 2.x; private, so read defensively.
_FALLBACK_FUSED_DEVICES = ("cpu", "cuda", "mps", "xpu", "hpu")


def fused_devices() -> tuple[str, ...]:
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return tuple(_get_fused_kernels_supported_devices())
    except ImportError:  # pragma: no cover - older or newer torch without the helper
        return _FALLBACK_FUSED_DEVICES


def check_fused(optimizer: str, params: Iterable[torch.Tensor]) -> None:
    """Raises unless every parameter can take a fused step (a floating-point tensor on a device with the kernels)."""
    supported = fused_devices()
    for p in params:
        if p.device.type not in supported or not torch.is_floating_point(p):
            raise ValueError(
                f"{optimizer}(fused=True) needs floating-point parameters on one of {list(supported)}, got a "
                f"{p.dtype} parameter on {p.device.type!r}; set fused=False (or leave it None) for these parameters."
            )


def default_foreach(params: Iterable[torch.Tensor]) -> bool:
    """torch's default: the foreach step when every parameter is on a CUDA device, else the for-loop."""
    return all(p.device.type == "cuda" for p in params)


def _by_device_and_dtype(indices: Iterable[int], params: list[torch.Tensor]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in indices:
        groups[(params[i].device, params[i].dtype)].append(i)
    return groups


def sgd_foreach(
    params: list[torch.Tensor], grads: list[torch.Tensor], state: Any, group: dict[str, Any], fused: bool
) -> None:
    """The SGD update (momentum, dampening, Nesterov) of every parameter at once; ``state`` is the optimizer's."""
    momentum, lr = group["momentum"], group["lr"]
    if momentum == 0:
        if fused:
            for indices in _by_device_and_dtype(range(len(params)), params).values():
                torch._fused_sgd_(
                    [params[i] for i in indices],
                    [grads[i] for i in indices],
                    [],
                    weight_decay=0.0,
                    momentum=0.0,
                    lr=lr,
                    dampening=0.0,
                    nesterov=False,
                    maximize=False,
                    is_first_step=False,
                )
        else:
            torch._foreach_add_(params, grads, alpha=-lr)
        return
    first = [i for i, p in enumerate(params) if state[p].get("momentum_buffer") is None]
    later = [i for i, p in enumerate(params) if state[p].get("momentum_buffer") is not None]
    if fused:
        # The kernel copies the gradient into the buffer on a first step, for the whole list: split first from later.
        for is_first, indices_of in ((True, first), (False, later)):
            for indices in _by_device_and_dtype(indices_of, params).values():
                if is_first:
                    for i in indices:
                        state[params[i]]["momentum_buffer"] = torch.empty_like(grads[i])
                torch._fused_sgd_(
                    [params[i] for i in indices],
                    [grads[i] for i in indices],
                    [state[params[i]]["momentum_buffer"] for i in indices],
                    weight_decay=0.0,
                    momentum=momentum,
                    lr=lr,
                    dampening=group["dampening"],
                    nesterov=group["nesterov"],
                    maximize=False,
                    is_first_step=is_first,
                )
        return
    for i in first:
        state[params[i]]["momentum_buffer"] = torch.clone(grads[i]).detach()
    if later:
        buffers = [state[params[i]]["momentum_buffer"] for i in later]
        torch._foreach_mul_(buffers, momentum)
        torch._foreach_add_(buffers, [grads[i] for i in later], alpha=1 - group["dampening"])
    all_buffers = [state[p]["momentum_buffer"] for p in params]
    directions = torch._foreach_add(grads, all_buffers, alpha=momentum) if group["nesterov"] else all_buffers
    torch._foreach_add_(params, directions, alpha=-lr)


def adam_foreach(
    params: list[torch.Tensor], grads: list[torch.Tensor], state: Any, group: dict[str, Any], fused: bool
) -> None:
    """The Adam update (with AMSGrad) of every parameter at once; ``state`` is the optimizer's."""
    beta1, beta2 = group["betas"]
    amsgrad = group["amsgrad"]
    for p in params:
        mine = state[p]
        if "step" not in mine:
            mine["step"] = 0
            mine["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            mine["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if amsgrad and "max_exp_avg_sq" not in mine:
            mine["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        mine["step"] += 1
    exp_avgs = [state[p]["exp_avg"] for p in params]
    exp_avg_sqs = [state[p]["exp_avg_sq"] for p in params]
    max_sqs = [state[p]["max_exp_avg_sq"] for p in params] if amsgrad else []
    steps = [state[p]["step"] for p in params]
    if fused:
        for (device, _), indices in _by_device_and_dtype(range(len(params)), params).items():
            # The kernel reads each step from a float32 tensor on the parameters' device (one copy per group).
            step_tensors = torch.tensor([float(steps[i]) for i in indices], device=device).unbind()
            torch._fused_adam_(
                [params[i] for i in indices],
                [grads[i] for i in indices],
                [exp_avgs[i] for i in indices],
                [exp_avg_sqs[i] for i in indices],
                [max_sqs[i] for i in indices] if amsgrad else [],
                list(step_tensors),
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=group["eps"],
                amsgrad=amsgrad,
                maximize=False,
            )
        return
    torch._foreach_mul_(exp_avgs, beta1)
    torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    second_moments = exp_avg_sqs
    if amsgrad:
        torch._foreach_maximum_(max_sqs, exp_avg_sqs)
        second_moments = max_sqs
    denominators = torch._foreach_sqrt(second_moments)
    torch._foreach_div_(denominators, [math.sqrt(1 - beta2**step) for step in steps])
    torch._foreach_add_(denominators, group["eps"])
    torch._foreach_addcdiv_(params, exp_avgs, denominators, [-group["lr"] / (1 - beta1**step) for step in steps])
