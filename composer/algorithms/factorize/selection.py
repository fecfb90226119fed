"""Which layers Factorize may touch: glob patterns of module names, or a predicate, checked against the model.

``model.named_modules()`` names every layer by its path of attribute names: in this library's
:class:`~composer.models.GPT` a block's MLP layers are ``blocks.0.mlp.0`` and ``blocks.0.mlp.2``; in Hugging Face's
GPT-2 inside a :class:`~composer.models.HuggingFaceModel` they are ``model.transformer.h.0.mlp.c_fc`` and
``...mlp.c_proj``. The pattern ``*.mlp.*`` selects both (``fnmatch`` globs: ``*`` also matches dots).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import TypeAlias

from torch import nn

__all__ = ["ModuleSelection", "check_modules", "select_layers"]

ModuleSelection: TypeAlias = str | Sequence[str] | Callable[[str, nn.Module], bool] | None
"""What ``modules=`` takes: one pattern, several, a predicate ``(name, layer) -> bool``, or None (every layer)."""

_SHOWN = 6  # layer names an error lists


def check_modules(modules: ModuleSelection) -> None:
    """Raises unless ``modules`` is None, a predicate, a non-empty pattern or a non-empty list of them.

    Args:
        modules: The value given as ``modules=``.
    """
    if modules is None or callable(modules):
        return
    patterns = [modules] if isinstance(modules, str) else modules
    if not isinstance(patterns, Sequence) or not all(isinstance(p, str) and p for p in patterns):
        raise TypeError(
            f"modules={modules!r} must be a module-name pattern such as '*.mlp.*', a list of them, a predicate "
            "(name, module) -> bool, or None (every layer large enough)."
        )
    if not patterns:
        raise ValueError("modules=[] selects no layer; give patterns such as ['*.mlp.*'], or None for every layer.")


def _prefixes(name: str) -> list[str]:
    """The names of the modules containing the module ``name`` (below the model): ``a.b.c`` -> ``a``, ``a.b``."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def _matches(name: str, pattern: str) -> bool:
    """Whether ``pattern`` matches the layer's name or the name of a module containing it."""
    return any(fnmatch.fnmatchcase(candidate, pattern) for candidate in [*_prefixes(name), name])


def select_layers(model: nn.Module, modules: ModuleSelection, kinds: tuple[type[nn.Module], ...]) -> set[int] | None:
    """The ids of the layers of ``kinds`` in ``model`` that ``modules`` selects (None: no selection, all of them).

    A pattern selects a layer when it matches the layer's name (as ``model.named_modules()`` gives it) or the name of
    a module containing it, so ``*.mlp`` and ``*.mlp.*`` both select a GPT's MLP layers. A layer shared under several
    names is selected when one of them is.

    Args:
        model: The model whose layers are selected.
        modules: Patterns (``fnmatch``, case-sensitive), a predicate ``(name, layer) -> bool``, or None.
        kinds: The layer classes the selection is among (``isinstance``).

    Returns:
        set[int] | None: The ids of the selected layers; None when ``modules`` is None.

    Raises:
        ValueError: If a pattern, or the predicate, selects none of the layers; the message lists some layer names.

    Example:
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 8), nn.ReLU()), nn.Linear(8, 2))
        >>> select_layers(model, "1.*", (nn.Linear,)) == {id(model[1][0])}
        True
    """
    check_modules(modules)
    if modules is None:
        return None
    layers = [(name, m) for name, m in model.named_modules(remove_duplicate=False) if isinstance(m, kinds)]
    if callable(modules):
        selected = {id(m) for name, m in layers if modules(name, m)}
        if not selected:
            raise ValueError(_nothing_selected(model, modules, f"the predicate {modules!r}", layers, kinds))
        return selected
    selected = set()
    for pattern in [modules] if isinstance(modules, str) else modules:
        hits = {id(m) for name, m in layers if _matches(name, pattern)}
        if not hits:
            raise ValueError(_nothing_selected(model, modules, f"the pattern {pattern!r}", layers, kinds))
        selected |= hits
    return selected


def _nothing_selected(
    model: nn.Module, modules: ModuleSelection, what: str, layers: list[tuple[str, nn.Module]], kinds: tuple[type, ...]
) -> str:
    # The layer kinds as a user knows them (Linear, not FactorizedLinear), and the outermost layers only (not the
    # two inside a factorized one).
    kind_names = " or ".join(sorted({k.__name__ for k in kinds if not k.__name__.startswith("Factorized")}))
    every = {name for name, _ in layers}
    names = [n for n in dict.fromkeys(name for name, _ in layers) if not any(p in every for p in _prefixes(n))]
    if not names:
        found = f"{type(model).__name__} has no {kind_names} layer at all"
    else:
        shown = ", ".join(repr(n) for n in names[:_SHOWN]) + (
            f", ... ({len(names)} in all)" if len(names) > _SHOWN else ""
        )
        found = f"{type(model).__name__}'s {kind_names} layers are named {shown}"
    return (
        f"modules={modules!r}: {what} selects no {kind_names} layer (by its name or a containing module's); {found}. "
        "Patterns are fnmatch globs over the names model.named_modules() gives, such as '*.mlp.*'."
    )
