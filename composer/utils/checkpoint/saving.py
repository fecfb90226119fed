"""Saving the training state to one checkpoint file: rank 0 writes it, every rank contributes its random states.

A checkpoint is one file written by ``torch.save``: a dict with the library's ``format_version``, ``metadata``
(library, torch and Python versions, the run's config) and the ``state`` (:meth:`State.state_dict`, or only the
model's weights). It holds tensors and plain Python values only (:func:`_check_plain` makes sure before writing), so
``torch.load(path, weights_only=True)`` reads it with no extra allowed globals.
"""

from __future__ import annotations

import os
import platform
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from composer._version import __version__
from composer.core.algorithm import evaluated_weights
from composer.core.state import State, bare_model_state
from composer.utils import dist
from composer.utils.checkpoint.full_state import full_model_state, full_optimizer_state, is_sharded
from composer.utils.checkpoint.loading import _some
from composer.utils.checkpoint.local_io import FORMAT_VERSION, _atomic_write, _write_safetensors, _write_torch
from composer.utils.checkpoint.reading import CheckpointError

__all__ = ["NonFiniteWeightsError", "save_checkpoint"]


class NonFiniteWeightsError(ValueError):
    """Model weights that hold a NaN or an infinity, refused by :func:`save_checkpoint` (the message names them)."""


def save_checkpoint(
    state: State,
    path: str | os.PathLike[str],
    *,
    weights_only: bool = False,
    metadata: Mapping[str, Any] | None = None,
    check_finite: bool = True,
    sharded: bool = False,
) -> Path:
    """Writes ``state`` to ``path`` atomically (temporary file, fsync, rename), with a checksum.

    The file holds the whole :meth:`State.state_dict` (model, optimizers, schedulers, grad scaler, timer, scale
    schedule ratio, algorithms' and callbacks' states, random states, the data position) or, with
    ``weights_only``, the model's weights alone. Tensors are written from where they are, so a save needs no copy of
    the model: at most one tensor's bytes (torch moves GPU storages to the CPU one at a time) and the 16 MiB buffer
    the checksum is read through.

    Launched on several processes, every rank must call it (the Trainer and ``CheckpointSaver`` do): the ranks'
    random states are gathered into the checkpoint (``'rank_states'``, so that each rank resumes its own), rank 0
    writes the file, and the others wait until it is in place (or raise if rank 0 could not write it). A model
    sharded with FSDP (``DTensor`` parameters) is saved whole: every rank joins in gathering each sharded weight and
    optimizer state (one tensor at a time, onto rank 0's CPU), so the file is the one an unsharded run writes and
    loads into one process, or into any number of sharded ones.

    Args:
        state (State): What to save.
        path (str | Path): The file to write; its folder is created. A ``.safetensors`` name writes the weights in
            that format (it needs ``weights_only=True`` and the ``safetensors`` package).
        weights_only (bool): Save only the model's weights.
        metadata (Mapping, optional): The run's config (plain values), stored under ``metadata['config']``.
        check_finite (bool): Refuse to write model weights (parameters and floating-point buffers) that hold a NaN
            or an infinity: resuming from them would only train on NaN (and autoresume picks the newest checkpoint).
            False writes them as they are (to inspect a diverged run, say).
        sharded (bool): Write a sharded checkpoint: ``path`` is a folder into which every rank writes its own shards
            (a model sharded with FSDP only; see :mod:`composer.utils.checkpoint.sharded`).

    Returns:
        Path: The path written.

    Raises:
        TypeError: If a state holds something other than tensors and plain Python values (the message names where).
        NonFiniteWeightsError: With ``check_finite``, if a weight is not finite (the message names it); nothing is
            written.

    Example:
        >>> import tempfile
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ep0-ba0.pt")
        >>> sorted(torch.load(path, weights_only=True))
        ['format_version', 'metadata', 'state']
    """
    path = Path(path)
    # An algorithm that evaluates on other weights than it trains (EMA) has them in the model while the file is
    # written, so that its model weights are those evaluation scored; it keeps the trained ones in its own state.
    with evaluated_weights(state):
        return _save(state, path, weights_only, metadata, check_finite, sharded)


def _save(
    state: State, path: Path, weights_only: bool, metadata: Mapping[str, Any] | None, check_finite: bool, sharded: bool
) -> Path:
    if sharded:
        if path.suffix == ".safetensors":
            raise ValueError(
                f"Cannot save the sharded checkpoint {path} as safetensors: a sharded checkpoint is a folder of "
                "per-rank shards. Use a name without the '.safetensors' suffix, or save a full checkpoint."
            )
        from composer.utils.checkpoint.sharded import save_sharded_checkpoint

        return save_sharded_checkpoint(
            state, path, weights_only=weights_only, metadata=metadata, check_finite=check_finite
        )
    rank_states = None if weights_only else _gather_rank_states(state)
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


def _gather_sharded_state(state: State, weights_only: bool) -> dict[str, Any] | None:
    """For a model sharded with FSDP: its whole weights and, unless ``weights_only``, its optimizers' states, laid out
    as an unsharded run's, on rank 0's CPU (a collective; other ranks get None). None for an unsharded model."""
    if not is_sharded(state.model):
        return None
    unsharded: dict[str, Any] = {"model": full_model_state(state.model)}
    if not weights_only:
        unsharded["optimizers"] = [full_optimizer_state(optimizer) for optimizer in state.optimizers]
    return unsharded if state.rank == 0 else None


def _gather_rank_states(state: State) -> list[dict[str, Any]] | None:
    """Every rank's random states (``state.rng`` and :meth:`State.capture_rng`), in rank order; None in a single
    process, where the state dict already holds them."""
    if state.world_size == 1:
        return None
    own = {
        "rng": state.rng.get_state(),
        "process_rng": {"current": state.capture_rng(), "epoch_start": state.epoch_start_rng},
    }
    return dist.all_gather_object(own)


def _write_checkpoint(
    state: State,
    path: Path,
    weights_only: bool,
    metadata: Mapping[str, Any] | None,
    rank_states: list[dict[str, Any]] | None,
    unsharded: dict[str, Any] | None = None,
    check_finite: bool = True,
) -> None:
    info = _info(weights_only, metadata)
    content: dict[str, Any] = {"model": bare_model_state(state.model)} if weights_only else state.state_dict()
    if unsharded is not None:
        content.update(unsharded)  # a sharded model's whole weights and optimizer states, in place of the shards
    if check_finite:
        _check_finite_weights(content["model"], path)
    if rank_states is not None:
        content["rank_states"] = rank_states
    if path.suffix == ".safetensors":
        if not weights_only:
            raise ValueError(
                f"Cannot save the full training state to {path}: safetensors files hold tensors only. Pass "
                "weights_only=True to save the weights there, or use a '.pt' name for a resumable checkpoint."
            )
        _write_safetensors(path, content["model"], info)
        return
    payload = {"format_version": FORMAT_VERSION, "metadata": info, "state": content}
    _check_plain(payload, "checkpoint")  # fail now, naming the culprit, rather than when loading
    _atomic_write(path, lambda tmp: _write_torch(payload, tmp))


def _info(weights_only: bool, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A checkpoint's ``metadata``: who wrote it, with which versions, and the run's config."""
    return {
        "library": "opencomposer",
        "library_version": __version__,
        "torch_version": str(torch.__version__),  # a str subclass, which weights_only loading refuses
        "python_version": platform.python_version(),
        "weights_only": weights_only,
        "config": dict(metadata or {}),
    }


def _check_finite_weights(weights: Mapping[str, Any], path: Path) -> None:
    """Raises NonFiniteWeightsError naming the first weight (in the model's order) that holds a NaN or an infinity.

    One device-to-host read per device the weights are on (a checkpoint copies them to the host anyway)."""
    floating = [
        (key, value)
        for key, value in weights.items()
        if isinstance(value, torch.Tensor)
        and (value.is_floating_point() or value.is_complex())
        and value.device.type != "meta"
    ]
    by_device: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
    for index, (_, value) in enumerate(floating):
        by_device.setdefault(value.device, []).append((index, value))
    bad: list[int] = []
    for items in by_device.values():
        finite = torch.stack([torch.isfinite(value).all() for _, value in items])
        if not bool(finite.all()):
            bad.extend(items[i][0] for i in (~finite).nonzero().flatten().tolist())
    if not bad:
        return
    key, value = floating[min(bad)]
    nan, inf = int(torch.isnan(value).sum()), int(torch.isinf(value).sum())
    others = [floating[i][0] for i in sorted(bad)[1:]]
    raise NonFiniteWeightsError(
        f"Refusing to write {path}: the model's weight {key!r} is not finite ({nan} NaN and {inf} infinite of "
        f"{value.numel()} values)"
        + (f", and so are {_some(others, 5)}" if others else "")
        + ". Training has diverged; a checkpoint of these weights could only resume into NaN (and autoresume would "
        "pick it). To fix: lower the learning rate or clip gradients (grad_clip_norm), and resume from an earlier "
        "checkpoint. To write it anyway (to inspect it), pass check_finite=False (to the Trainer, CheckpointSaver or "
        "save_checkpoint)."
    )


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def _check_plain(obj: Any, where: str) -> None:
    """Raises TypeError unless ``obj`` holds only what ``torch.load(weights_only=True)`` reads back.

    Types are checked exactly, not with isinstance: a subclass (a numpy float, a str enum, torch's version string)
    is pickled as its own class, which weights-only loading refuses.
    """
    kind = type(obj)
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            raise TypeError(f"{where} is a {obj.layout} tensor; checkpoints hold dense tensors only.")
    elif kind in (dict, OrderedDict):
        for key, value in obj.items():
            _check_plain(key, f"{where} (a key)")
            _check_plain(value, f"{where}/{key}")
    elif kind in (list, tuple, set):
        for i, value in enumerate(obj):
            _check_plain(value, f"{where}/{i}")
    elif kind not in _PLAIN_TYPES:
        raise TypeError(
            f"{where} is a {kind.__module__}.{kind.__qualname__}; checkpoints hold tensors and plain Python values "
            "only (so they load with torch.load(weights_only=True)). Make the state_dict() that returns it give "
            "plain values (int, float, str, bool, None, lists, tuples and dicts of them, tensors) instead."
        )
