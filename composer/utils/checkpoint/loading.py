"""Restoring a checkpoint into a State, and model weights into a model across DDP and ``torch.compile`` prefixes."""

from __future__ import annotations

import fnmatch
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from composer.core.state import State, unwrap_model
from composer.utils.checkpoint.full_state import is_sharded, shard_like, shard_optimizer_state
from composer.utils.checkpoint.reading import CheckpointError, read_checkpoint

__all__ = ["load_checkpoint", "load_model_state", "restore_checkpoint"]

log = logging.getLogger(__name__)


def load_checkpoint(
    state: State,
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Reads the checkpoint at ``path`` and restores it into ``state``; see :func:`restore_checkpoint`.

    Args:
        state (State): The training state to restore into.
        path (str | PathLike): The checkpoint file (checked against its checksum; code in it is never run).
        weights_only (bool): Restore only the model's weights (no optimizer, timer, random states, ...).
        strict (bool): Whether the model's keys must match exactly (keys matching ``ignore_keys`` aside).
        ignore_keys (Sequence[str]): Glob patterns over the model's keys to leave as they are.

    Returns:
        dict: The checkpoint's metadata.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from composer.utils.checkpoint import save_checkpoint
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ckpt.pt")
        >>> load_checkpoint(state, path)["library"]
        'opencomposer'
    """
    checkpoint = read_checkpoint(path)
    restore_checkpoint(state, checkpoint, weights_only=weights_only, strict=strict, ignore_keys=ignore_keys, path=path)
    return dict(checkpoint["metadata"])


def restore_checkpoint(
    state: State,
    checkpoint: Mapping[str, Any],
    *,
    weights_only: bool = False,
    strict: bool = True,
    ignore_keys: Sequence[str] = (),
    path: str | os.PathLike[str] = "the checkpoint",
) -> None:
    """Restores a checkpoint from :func:`read_checkpoint` into ``state``.

    Into a model sharded with FSDP (``DTensor`` parameters; shard it before restoring), every rank restores the
    same file: each keeps its shard of the whole weights and optimizer states, whichever number of ranks saved them.

    Args:
        state (State): Restored in place; its optimizers, schedulers, algorithms and callbacks must exist already.
        checkpoint (Mapping): The output of :func:`read_checkpoint`.
        weights_only (bool): Restore only the model's weights (no optimizer, timer, random states, ...).
        strict (bool): Whether the model's keys must match exactly (keys matching ``ignore_keys`` aside).
        ignore_keys (Sequence[str]): Glob patterns over the model's keys to leave as they are, e.g. a new
            classification head: ``['module.2.*']``.
        path (str | Path): The file it came from, for error messages.

    Raises:
        CheckpointError: If a full restore is asked of a checkpoint that holds only weights.
    """
    saved = checkpoint["state"]
    saved_weights_only = checkpoint["metadata"].get("weights_only", False)
    if checkpoint["metadata"].get("sharded", False):
        from composer.utils.checkpoint.sharded import load_sharded_checkpoint

        if saved_weights_only and not weights_only:
            raise _weights_only_error(path)
        rest = load_sharded_checkpoint(
            state, checkpoint, path, weights_only=weights_only, strict=strict, ignore_keys=ignore_keys
        )
        if not weights_only:
            state.load_state_dict(
                {**_without_rank_states(rest), **_own_rank_states(rest.get("rank_states"), state, path)}
            )
        return
    if saved_weights_only and not weights_only:
        raise _weights_only_error(path)
    load_model_state(state.model, saved["model"], strict=strict, ignore_keys=ignore_keys)
    if not weights_only:
        rest = {key: value for key, value in saved.items() if key != "model"}
        if "optimizers" in rest and is_sharded(state.model) and len(rest["optimizers"]) == len(state.optimizers):
            # Whole optimizer states (from an unsharded or a full FSDP checkpoint) cut to this rank's shards; a count
            # that does not match is left for State.load_state_dict to report.
            rest["optimizers"] = [
                shard_optimizer_state(optimizer, saved)
                for optimizer, saved in zip(state.optimizers, rest["optimizers"])
            ]
        state.load_state_dict({**_without_rank_states(rest), **_own_rank_states(saved.get("rank_states"), state, path)})


def _without_rank_states(saved: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in saved.items() if key != "rank_states"}


def _weights_only_error(path: Any) -> CheckpointError:
    return CheckpointError(
        f"{path} holds only model weights, so training cannot resume from it; pass load_weights_only=True to "
        "start from these weights.",
        reason="holds only model weights (saved with weights_only), so training cannot resume from it",
    )


def _own_rank_states(rank_states: Sequence[Mapping[str, Any]] | None, state: State, path: Any) -> dict[str, Any]:
    """The random states this rank resumes with: its own when the checkpoint was saved by at least as many ranks,
    none (it keeps its fresh per-rank seed) when there are fewer; in a single-process checkpoint, rank 0's."""
    if rank_states is None:
        return {}
    rank = state.rank
    if rank < len(rank_states):
        return dict(rank_states[rank])
    log.warning(
        "%s was saved by %d ranks; rank %d starts with its own random states (seeded from seed + rank), so its "
        "random draws differ from an uninterrupted run.",
        path,
        len(rank_states),
        rank,
    )
    return {"process_rng": None}


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

    wanted = set(_check_keys(list(by_bare_key), list(saved), strict=strict, ignore_keys=ignore_keys))
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


def _check_keys(
    model_keys: Sequence[str], saved_keys: Sequence[str], *, strict: bool, ignore_keys: Sequence[str]
) -> list[str]:
    """The keys to load (in both, matching no ``ignore_keys`` pattern), in the model's order; raises with
    ``strict`` (else warns) if keys are missing or unexpected, and warns about patterns that match nothing."""
    unused_patterns = [p for p in ignore_keys if not any(fnmatch.fnmatchcase(k, p) for k in (*model_keys, *saved_keys))]
    if unused_patterns:
        warnings.warn(f"load_ignore_keys patterns {unused_patterns} match no model key.", stacklevel=3)
    missing, unexpected = _missing_and_unexpected(model_keys, saved_keys, ignore_keys)
    if strict and (missing or unexpected):
        raise ValueError(
            f"Checkpoint weights do not match the model: missing keys {_some(missing)}, unexpected keys "
            f"{_some(unexpected)}. Load the checkpoint into the same architecture, list keys to skip in "
            "load_ignore_keys, or load non-strictly (load_strict_model_weights=False)."
        )
    if missing or unexpected:
        log.warning("Loaded model weights non-strictly: missing %s, unexpected %s.", _some(missing), _some(unexpected))
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


def _some(keys: Sequence[str], limit: int = 8) -> str:
    return str(list(keys[:limit])) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


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
