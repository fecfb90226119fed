"""The one-file format: the whole training state in one file that rank 0 writes (``torch.save``, or safetensors for
weights alone), and restored from it.

Every rank contributes its random states (:func:`~composer.utils.checkpoint.contents.gather_rank_states`); a model
sharded with FSDP is gathered whole first, so the file is the one an unsharded run writes, and loads into one process
or into any number of sharded ones. The file is read back by :mod:`~composer.utils.checkpoint.reading`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.core.state import State, bare_model_state
from composer.utils import dist
from composer.utils.checkpoint.contents import (
    check_finite_weights,
    check_plain,
    checkpoint_info,
    gather_rank_states,
)
from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.full_state import (
    full_model_state,
    full_optimizer_state,
    is_sharded,
    shard_optimizer_state,
)
from composer.utils.checkpoint.local_io import FORMAT_VERSION, atomic_write, write_safetensors, write_torch
from composer.utils.checkpoint.state_dicts import load_model_state

__all__ = ["load_one_file", "save_one_file"]


def save_one_file(
    state: State, path: Path, *, weights_only: bool, metadata: Mapping[str, Any] | None, check_finite: bool
) -> Path:
    """Writes ``state`` to the file ``path`` (a collective: rank 0 writes, the others wait for it).

    See :func:`~composer.utils.checkpoint.save_checkpoint` for the arguments.

    Returns:
        Path: ``path``.

    Raises:
        CheckpointError: On ranks other than 0, if rank 0 could not write the file.
    """
    rank_states = None if weights_only else gather_rank_states(state)
    unsharded = _gather_sharded_state(state, weights_only)  # FSDP: a collective, before rank 0 goes its own way
    if state.rank != 0:
        error = dist.broadcast_object_list([None])[0]  # rank 0 says whether the file is in place
        if error is not None:
            raise CheckpointError(f"Rank 0 could not write the checkpoint {path}: {error}")
        return path
    try:
        _write_checkpoint(state, path, weights_only, metadata, rank_states, unsharded, check_finite)
    except BaseException as e:
        if state.world_size > 1:
            dist.broadcast_object_list([f"{type(e).__name__}: {e}"])
        raise
    if state.world_size > 1:
        dist.broadcast_object_list([None])
    return path


def load_one_file(
    state: State, checkpoint: Mapping[str, Any], *, weights_only: bool, strict: bool, ignore_keys: Sequence[str]
) -> dict[str, Any]:
    """Loads a one-file checkpoint's weights (as read back) into ``state``'s model; returns the rest of its state for
    :meth:`State.load_state_dict` (empty with ``weights_only``), with whole optimizer states cut to this rank's
    shards for a model sharded with FSDP. See :func:`~composer.utils.checkpoint.restore_checkpoint`."""
    saved = checkpoint["state"]
    load_model_state(state.model, saved["model"], strict=strict, ignore_keys=ignore_keys)
    if weights_only:
        return {}
    rest = {key: value for key, value in saved.items() if key != "model"}
    if "optimizers" in rest and is_sharded(state.model) and len(rest["optimizers"]) == len(state.optimizers):
        # Whole optimizer states (from an unsharded or a full FSDP checkpoint) cut to this rank's shards; a count
        # that does not match is left for State.load_state_dict to report.
        rest["optimizers"] = [
            shard_optimizer_state(optimizer, saved) for optimizer, saved in zip(state.optimizers, rest["optimizers"])
        ]
    return rest


def _gather_sharded_state(state: State, weights_only: bool) -> dict[str, Any] | None:
    """For a model sharded with FSDP: its whole weights and, unless ``weights_only``, its optimizers' states, laid out
    as an unsharded run's, on rank 0's CPU (a collective; other ranks get None). None for an unsharded model."""
    if not is_sharded(state.model):
        return None
    unsharded: dict[str, Any] = {"model": full_model_state(state.model)}
    if not weights_only:
        unsharded["optimizers"] = [full_optimizer_state(optimizer) for optimizer in state.optimizers]
    return unsharded if state.rank == 0 else None


def _write_checkpoint(
    state: State,
    path: Path,
    weights_only: bool,
    metadata: Mapping[str, Any] | None,
    rank_states: list[dict[str, Any]] | None,
    unsharded: dict[str, Any] | None = None,
    check_finite: bool = True,
) -> None:
    info = checkpoint_info(weights_only, metadata)
    content: dict[str, Any] = {"model": bare_model_state(state.model)} if weights_only else state.state_dict()
    if unsharded is not None:
        content.update(unsharded)  # a sharded model's whole weights and optimizer states, in place of the shards
    if check_finite:
        check_finite_weights(content["model"], path)
    if rank_states is not None:
        content["rank_states"] = rank_states
    if path.suffix == ".safetensors":
        if not weights_only:
            raise ValueError(
                f"Cannot save the full training state to {path}: safetensors files hold tensors only. Pass "
                "weights_only=True to save the weights there, or use a '.pt' name for a resumable checkpoint."
            )
        write_safetensors(path, content["model"], info)
        return
    payload = {"format_version": FORMAT_VERSION, "metadata": info, "state": content}
    check_plain(payload, "checkpoint")  # fail now, naming the culprit, rather than when loading
    atomic_write(path, lambda tmp: write_torch(payload, tmp))
