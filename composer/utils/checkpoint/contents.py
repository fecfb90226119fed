"""What a checkpoint holds, whatever its format, and the checks on it before it is written or after it is read.

A checkpoint is a dict with the library's ``format_version``, ``metadata`` (:func:`checkpoint_info`: library, torch
and Python versions, the run's config) and the ``state`` (:meth:`State.state_dict`, or only the model's weights; in
several processes with every rank's random states, :func:`gather_rank_states`). It holds tensors and plain Python
values only (:func:`check_plain`), so ``torch.load(path, weights_only=True)`` reads it back with no extra allowed
globals, and weights that are not finite are refused before they are written (:func:`check_finite_weights`).
"""

from __future__ import annotations

import logging
import platform
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from composer._version import __version__
from composer.core.state import State
from composer.utils import dist
from composer.utils.checkpoint.errors import CheckpointError, NonFiniteWeightsError

__all__ = [
    "check_finite_weights",
    "check_plain",
    "checkpoint_info",
    "gather_rank_states",
    "own_rank_states",
    "some_keys",
    "weights_only_error",
    "without_rank_states",
]

log = logging.getLogger(__name__)


def gather_rank_states(state: State) -> list[dict[str, Any]] | None:
    """Every rank's random states (``state.rng`` and :meth:`State.capture_rng`), in rank order; None in a single
    process, where the state dict already holds them."""
    if state.world_size == 1:
        return None
    own = {
        "rng": state.rng.get_state(),
        "process_rng": {"current": state.capture_rng(), "epoch_start": state.epoch_start_rng},
    }
    return dist.all_gather_object(own)


def checkpoint_info(weights_only: bool, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A checkpoint's ``metadata``: who wrote it, with which versions, and the run's config."""
    return {
        "library": "opencomposer",
        "library_version": __version__,
        "torch_version": str(torch.__version__),  # a str subclass, which weights_only loading refuses
        "python_version": platform.python_version(),
        "weights_only": weights_only,
        "config": dict(metadata or {}),
    }


def check_finite_weights(weights: Mapping[str, Any], path: Path) -> None:
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
        + (f", and so are {some_keys(others, 5)}" if others else "")
        + ". Training has diverged; a checkpoint of these weights could only resume into NaN (and autoresume would "
        "pick it). To fix: lower the learning rate or clip gradients (grad_clip_norm), and resume from an earlier "
        "checkpoint. To write it anyway (to inspect it), pass check_finite=False (to the Trainer, CheckpointSaver or "
        "save_checkpoint)."
    )


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def check_plain(obj: Any, where: str) -> None:
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
            check_plain(key, f"{where} (a key)")
            check_plain(value, f"{where}/{key}")
    elif kind in (list, tuple, set):
        for i, value in enumerate(obj):
            check_plain(value, f"{where}/{i}")
    elif kind not in _PLAIN_TYPES:
        raise TypeError(
            f"{where} is a {kind.__module__}.{kind.__qualname__}; checkpoints hold tensors and plain Python values "
            "only (so they load with torch.load(weights_only=True)). Make the state_dict() that returns it give "
            "plain values (int, float, str, bool, None, lists, tuples and dicts of them, tensors) instead."
        )


def without_rank_states(saved: Mapping[str, Any]) -> dict[str, Any]:
    """``saved`` (a checkpoint's state) without every rank's random states, which :func:`own_rank_states` picks."""
    return {key: value for key, value in saved.items() if key != "rank_states"}


def weights_only_error(path: Any) -> CheckpointError:
    """The error for a full restore asked of the weights-only checkpoint ``path``."""
    return CheckpointError(
        f"{path} holds only model weights, so training cannot resume from it; pass load_weights_only=True to "
        "start from these weights.",
        reason="holds only model weights (saved with weights_only), so training cannot resume from it",
    )


def own_rank_states(rank_states: Sequence[Mapping[str, Any]] | None, state: State, path: Any) -> dict[str, Any]:
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


def some_keys(keys: Sequence[str], limit: int = 8) -> str:
    """The first ``limit`` of ``keys`` for a message, and how many more there are."""
    return str(list(keys[:limit])) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")
