"""Model surgery support: keeping optimizers in step with a model whose modules were replaced."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["update_optimizer_params"]


def update_optimizer_params(
    optimizers: Sequence[torch.optim.Optimizer],
    before: Mapping[str, torch.nn.Parameter],
    after: Mapping[str, torch.nn.Parameter],
) -> int:
    """Makes optimizers built before model surgery train the model after it.

    Parameters that are gone from the model leave the optimizers (with their optimizer state); new ones join the
    param group of the parameter they replaced (same name), else the group of the nearest enclosing module that
    the optimizer already trains, else the first group.

    Args:
        optimizers (Sequence[torch.optim.Optimizer]): Optimizers built from the model's parameters before surgery.
        before (Mapping[str, Parameter]): ``dict(model.named_parameters())`` before surgery.
        after (Mapping[str, Parameter]): ``dict(model.named_parameters())`` after surgery.

    Returns:
        int: The number of parameters added or removed across all optimizers.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> before = dict(model.named_parameters())
        >>> model[0] = torch.nn.Linear(2, 2)
        >>> update_optimizer_params([opt], before, dict(model.named_parameters()))
        4
        >>> all(p is q for p, q in zip(opt.param_groups[0]["params"], model.parameters()))
        True
    """
    after_ids = {id(p) for p in after.values()}
    before_ids = {id(p) for p in before.values()}
    removed = {id(p) for p in before.values() if id(p) not in after_ids}
    added = [(name, p) for name, p in after.items() if id(p) not in before_ids]
    changes = 0
    for optimizer in optimizers:
        groups = getattr(optimizer, "param_groups", None)
        if not isinstance(groups, list) or not groups:
            raise TypeError(
                f"Cannot update the parameters of {type(optimizer).__name__} after model surgery: it has no "
                "param_groups. Build the optimizer after the Trainer's INIT event instead (pass optimizers=None and "
                "use a scheduler/optimizer hparams), or apply the surgery before creating the optimizer."
            )
        owner: dict[int, int] = {}  # id(param) -> group index, for params this optimizer trains
        for g, group in enumerate(groups):
            for p in group["params"]:
                owner[id(p)] = g
        if not any(pid in owner for pid in before_ids):
            continue  # this optimizer trains something else
        name_to_group = {name: owner[id(p)] for name, p in before.items() if id(p) in owner}
        for group in groups:
            kept = [p for p in group["params"] if id(p) not in removed]
            for p in group["params"]:
                if id(p) in removed:
                    optimizer.state.pop(p, None)
                    changes += 1
            group["params"] = kept
        for name, p in added:
            groups[_group_for(name, name_to_group)]["params"].append(p)
            changes += 1
    return changes


def _group_for(name: str, name_to_group: Mapping[str, int]) -> int:
    if name in name_to_group:
        return name_to_group[name]
    prefix = name
    while "." in prefix:
        prefix = prefix.rsplit(".", 1)[0]
        for other, group in name_to_group.items():
            if other.startswith(prefix + "."):
                return group
    return 0
