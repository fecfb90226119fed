"""Model surgery: replacing modules by class, counting them, and keeping optimizers in step with the new model.

Speed-up methods such as BlurPool or Squeeze-and-Excitation change a network by swapping some of its layers for
others. :func:`replace_module_classes` does the swapping for any ``nn.Module`` given a policy per layer class, and
:func:`update_optimizer_params` makes an optimizer that was built before the surgery train the model after it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

__all__ = ["ReplacementPolicy", "count_module_instances", "replace_module_classes", "update_optimizer_params"]

ReplacementPolicy = Callable[[nn.Module, int], nn.Module | None]
"""``policy(module, index) -> replacement | None``: ``index`` counts the modules of that class seen so far (0, 1,
...) in traversal order; returning None (or the module itself) keeps the module."""


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
            if id(p) in owner:
                continue  # already trained by this optimizer (a second remap changes nothing)
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


def _check_policies(policies: Mapping[type[nn.Module], ReplacementPolicy]) -> None:
    if not policies:
        raise ValueError(
            "replace_module_classes got an empty policies mapping; pass {module class: policy(module, index)}."
        )
    for cls, policy in policies.items():
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError(f"replace_module_classes policies keys must be nn.Module classes, got {cls!r}.")
        if not callable(policy):
            raise TypeError(
                f"replace_module_classes policy for {cls.__name__} must be callable (module, index) -> module | None, "
                f"got {policy!r}."
            )


def _warn_nothing_replaced(
    module: nn.Module, policies: Mapping[type[nn.Module], ReplacementPolicy], found: int
) -> None:
    names = [cls.__name__ for cls in policies]
    why = f"{found} matching module(s) were all kept by their policy" if found else "found no module of those classes"
    warnings.warn(
        f"replace_module_classes replaced nothing in {type(module).__name__}: looked for {names}, but {why}.",
        UserWarning,
        stacklevel=3,  # the caller of replace_module_classes
    )


def replace_module_classes(
    module: nn.Module,
    policies: Mapping[type[nn.Module], ReplacementPolicy],
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
    recurse_on_replacements: bool = False,
) -> dict[nn.Module, nn.Module]:
    """Replaces the submodules of ``module`` whose class has a policy, in place, and returns what it replaced.

    The modules are visited depth first, in the order they were registered. A module matches the first class in
    ``policies`` it is an instance of; its policy is called as ``policy(child, index)``, where ``index`` counts the
    matches of that class so far, and returns the replacement, or None to keep the module and search its children.
    A module under several parents is replaced under each, with one call; ``module`` itself is never replaced.
    Replacements are not searched (a policy may wrap the module it replaces) unless ``recurse_on_replacements``.

    Args:
        module: The model to change in place. Not a ``DistributedDataParallel`` or ``DataParallel`` wrapper:
            do the surgery on the model before wrapping it.
        policies: ``{module class: policy(module, index) -> replacement | None}``.
        optimizers: Optimizers that already train ``module``: the parameters that left the model leave them, the
            new ones join them (see :func:`update_optimizer_params`). Leave None if the optimizer is built after
            the surgery (the Trainer remaps its own optimizers after ``Event.INIT``).
        recurse_on_replacements: Also apply the policies inside the replacements.

    Returns:
        dict[nn.Module, nn.Module]: ``{replaced module: its replacement}``, in traversal order. Empty (with a
        :class:`UserWarning` naming the classes) when nothing was replaced.

    Raises:
        TypeError: If ``module`` is a data-parallel wrapper, a key of ``policies`` is not an ``nn.Module`` class, a
            policy is not callable, or a policy returns something other than a module or None.
        ValueError: If ``policies`` is empty.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        >>> policy = lambda layer, index: torch.nn.Linear(layer.in_features, layer.out_features, bias=False)
        >>> replaced = replace_module_classes(model, {torch.nn.Linear: policy})
        >>> len(replaced), model[0].bias, model[2].bias
        (2, None, None)
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     replace_module_classes(model, {torch.nn.Conv2d: lambda layer, index: None})
        {}
        >>> print(caught[0].message)
        replace_module_classes replaced nothing in Sequential: looked for ['Conv2d'], but found no module of those classes.
    """
    _check_not_wrapped(module, "replace_module_classes")
    _check_policies(policies)
    optimizer_list = _as_optimizer_list(optimizers)
    before = dict(module.named_parameters()) if optimizer_list else {}

    replaced: dict[nn.Module, nn.Module] = {}
    decided: dict[int, nn.Module] = {}  # id(matched module) -> what now stands in its place (itself when kept)
    indices = dict.fromkeys(policies, 0)
    visited: set[int] = set()

    def visit(parent: nn.Module, wrapped: frozenset[int]) -> None:
        # ``wrapped``: ids of the modules that the replacements we are inside of stand for; they stay as they are.
        if id(parent) in visited:
            return
        visited.add(id(parent))
        for name, child in list(parent.named_children()):
            if id(child) in wrapped:
                continue
            if id(child) in decided:  # shared module, already handled under another parent
                if decided[id(child)] is not child:
                    setattr(parent, name, decided[id(child)])
                continue
            cls = next((c for c in policies if isinstance(child, c)), None)
            if cls is None:
                visit(child, wrapped)
                continue
            new = policies[cls](child, indices[cls])
            indices[cls] += 1
            if new is None or new is child:
                decided[id(child)] = child
                visit(child, wrapped)
                continue
            if not isinstance(new, nn.Module):
                raise TypeError(
                    f"The replace_module_classes policy for {cls.__name__} returned {type(new).__name__}; a policy "
                    "must return an nn.Module (the replacement) or None (keep the module)."
                )
            decided[id(child)] = new
            replaced[child] = new
            setattr(parent, name, new)
            if recurse_on_replacements:
                visit(new, wrapped | {id(child)})
            else:
                visited.add(id(new))

    visit(module, frozenset())

    if not replaced:
        _warn_nothing_replaced(module, policies, sum(indices.values()))
    elif optimizer_list:
        update_optimizer_params(optimizer_list, before, dict(module.named_parameters()))
    return replaced


def count_module_instances(module: nn.Module, cls: type[nn.Module] | tuple[type[nn.Module], ...]) -> int:
    """Counts the modules in ``module`` (itself included, shared modules once) that are instances of ``cls``.

    Args:
        module: The model to search.
        cls: A module class, or a tuple of them.

    Returns:
        int: How many modules are instances of ``cls``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        >>> count_module_instances(model, torch.nn.Linear)
        2
        >>> count_module_instances(model, (torch.nn.ReLU, torch.nn.Sequential))
        2
    """
    return sum(1 for m in module.modules() if isinstance(m, cls))


def _as_optimizer_list(
    optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None,
) -> list[torch.optim.Optimizer]:
    if optimizers is None:
        return []
    if isinstance(optimizers, Sequence):
        return list(optimizers)
    return [optimizers]


def _check_not_wrapped(module: nn.Module, caller: str) -> None:
    wrappers = (nn.DataParallel, nn.parallel.DistributedDataParallel)
    if isinstance(module, wrappers):
        raise TypeError(
            f"{caller} got a {type(module).__name__}-wrapped model. Surgery on a data-parallel wrapper would leave "
            "its replicas and gradient hooks out of date; apply it to the model before wrapping it (or to "
            "wrapper.module and wrap again)."
        )
    if not isinstance(module, nn.Module):
        raise TypeError(f"{caller} needs a torch.nn.Module, got {type(module).__name__}.")
