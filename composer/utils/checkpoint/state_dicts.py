"""Model weights loaded across DistributedDataParallel and ``torch.compile`` prefixes, and the check of their keys."""

from __future__ import annotations

import fnmatch
import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from composer.core.state import unwrap_model
from composer.utils.checkpoint.contents import some_keys
from composer.utils.checkpoint.full_state import is_sharded, shard_like

__all__ = ["check_keys", "load_model_state"]

log = logging.getLogger(__name__)


def load_model_state(
    model: torch.nn.Module,
    weights: Mapping[str, torch.Tensor],
    *,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """Loads ``weights`` into ``model``, matching keys across DistributedDataParallel and ``torch.compile``.

    Keys saved from a wrapped model (``module.``, ``_orig_mod.`` prefixes) load into a bare model and the other way
    round: wrappers around ``model`` are looked through, ``_orig_mod`` is dropped wherever it appears, and a leading
    ``module.`` is dropped when that is what makes the keys match (a model may also have a submodule really named
    ``module``).

    Args:
        model (torch.nn.Module): The model to load into (possibly wrapped).
        weights (Mapping): A model state dict.
        strict (bool): Raise if keys are missing or unexpected (besides ``ignore_keys``); otherwise warn.
        ignore_keys (Sequence[str]): Glob patterns over the model's keys whose values are neither loaded nor
            required, e.g. ``['module.2.*']`` for a new classification head.

    Returns:
        tuple[list[str], list[str]]: The missing and the unexpected keys.

    Raises:
        ValueError: On a shape mismatch, or (with ``strict``) missing or unexpected keys; the message lists them
            and how to fix it.

    Example:
        >>> source, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        >>> wrapped_keys = {"module." + k: v for k, v in source.state_dict().items()}  # saved from DDP
        >>> load_model_state(target, wrapped_keys)
        ([], [])
        >>> torch.equal(target.weight, source.weight)
        True
    """
    target = unwrap_model(model)
    own_state = target.state_dict()
    by_bare_key = {_drop_compile_segments(key): key for key in own_state}
    saved = _strip_wrapper_prefixes({_drop_compile_segments(k): v for k, v in weights.items()}, set(by_bare_key))

    wanted = set(check_keys(list(by_bare_key), list(saved), strict=strict, ignore_keys=ignore_keys))
    to_load = {by_bare_key[k]: v for k, v in saved.items() if k in wanted}
    mismatched = [
        f"{key}: saved {tuple(value.shape)}, model {tuple(own_state[key].shape)}"
        for key, value in to_load.items()
        if isinstance(value, torch.Tensor) and value.shape != own_state[key].shape
    ]
    if mismatched:
        raise ValueError(
            f"Checkpoint weights do not fit the model: shape mismatch for {mismatched[:5]}"
            + (f" and {len(mismatched) - 5} more" if len(mismatched) > 5 else "")
            + ". If these layers are new (a new classification head), pass their keys in load_ignore_keys "
            "(glob patterns such as 'module.2.*')."
        )
    if is_sharded(target):  # FSDP: each rank keeps its shard of the whole weights
        to_load = {key: shard_like(value, own_state[key]) for key, value in to_load.items()}
    target.load_state_dict(to_load, strict=False)
    return _missing_and_unexpected(list(by_bare_key), list(saved), ignore_keys)


def check_keys(
    model_keys: Sequence[str], saved_keys: Sequence[str], *, strict: bool, ignore_keys: Sequence[str]
) -> list[str]:
    """The keys to load (in both, matching no ``ignore_keys`` pattern), in the model's order; raises with
    ``strict`` (else warns) if keys are missing or unexpected, and warns about patterns that match nothing.

    Args:
        model_keys (Sequence[str]): The model's keys, bare (no wrapper prefixes).
        saved_keys (Sequence[str]): The checkpoint's keys, bare.
        strict (bool): Raise on missing or unexpected keys (else warn).
        ignore_keys (Sequence[str]): Glob patterns of keys to leave out.

    Returns:
        list[str]: The keys to load.

    Raises:
        ValueError: With ``strict``, naming the missing and unexpected keys and the fix.
    """
    unused_patterns = [p for p in ignore_keys if not any(fnmatch.fnmatchcase(k, p) for k in (*model_keys, *saved_keys))]
    if unused_patterns:
        warnings.warn(f"load_ignore_keys patterns {unused_patterns} match no model key.", stacklevel=3)
    missing, unexpected = _missing_and_unexpected(model_keys, saved_keys, ignore_keys)
    if strict and (missing or unexpected):
        raise ValueError(
            f"Checkpoint weights do not match the model: missing keys {some_keys(missing)}, unexpected keys "
            f"{some_keys(unexpected)}. Load the checkpoint into the same architecture, list keys to skip in "
            "load_ignore_keys, or load non-strictly (load_strict_model_weights=False)."
        )
    if missing or unexpected:
        log.warning(
            "Loaded model weights non-strictly: missing %s, unexpected %s.", some_keys(missing), some_keys(unexpected)
        )
    saved = set(saved_keys)
    return [k for k in model_keys if k in saved and not _ignored(k, ignore_keys)]


def _missing_and_unexpected(
    model_keys: Sequence[str], saved_keys: Sequence[str], ignore_keys: Sequence[str]
) -> tuple[list[str], list[str]]:
    model, saved = set(model_keys), set(saved_keys)
    unexpected = sorted(k for k in saved if k not in model and not _ignored(k, ignore_keys))
    missing = sorted(k for k in model if k not in saved and not _ignored(k, ignore_keys))
    return missing, unexpected


def _ignored(key: str, ignore_keys: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in ignore_keys)


def _drop_compile_segments(key: str) -> str:
    return ".".join(part for part in key.split(".") if part != "_orig_mod")


def _strip_wrapper_prefixes(weights: dict[str, Any], model_keys: set[str]) -> dict[str, Any]:
    """Drops leading ``module.`` while every key has it and dropping it matches more of the model's keys."""
    best, best_overlap = weights, len(model_keys.intersection(weights))
    current = weights
    while current and all(k.startswith("module.") for k in current):
        current = {k.split(".", 1)[1]: v for k, v in current.items()}
        overlap = len(model_keys.intersection(current))
        if overlap > best_overlap:
            best, best_overlap = current, overlap
    return best
