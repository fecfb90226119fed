"""A checkpoint saved, read and restored in either format: one file, or a sharded checkpoint's folder.

The formats are :mod:`~composer.utils.checkpoint.one_file` and :mod:`~composer.utils.checkpoint.sharded`; the calls
here choose between them by the ``sharded`` argument (saving), the path (a folder is sharded) or the checkpoint's
metadata (restoring).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composer.core.algorithm import evaluated_weights
from composer.core.state import State
from composer.utils.checkpoint.contents import own_rank_states, weights_only_error, without_rank_states
from composer.utils.checkpoint.one_file import load_one_file, save_one_file
from composer.utils.checkpoint.reading import read_checkpoint_file
from composer.utils.checkpoint.sharded import load_sharded_checkpoint, read_sharded_checkpoint, save_sharded_checkpoint

__all__ = ["load_checkpoint", "read_checkpoint", "restore_checkpoint", "save_checkpoint"]


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

    The file holds the whole :meth:`State.state_dict` (model, optimizers, schedulers, timer, algorithms' and
    callbacks' states, random states, the data position) or, with ``weights_only``, the model's weights alone; tensors
    are written from where they are, one at a time, so a save needs no copy of the model. Launched on several
    processes, every rank must call it: the ranks' random states go into the checkpoint, rank 0 writes the file and
    the others wait until it is in place. A model sharded with FSDP is gathered and saved whole, tensor by tensor
    (``composer/distributed/DISTRIBUTED.md``, "Sharded checkpoints").

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
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ep0-ba0.pt")
        >>> sorted(torch.load(path, weights_only=True))
        ['format_version', 'metadata', 'state']
    """
    path = Path(path)
    # An algorithm that evaluates on other weights than it trains (EMA) has them in the model while the file is
    # written, so that its model weights are those evaluation scored; it keeps the trained ones in its own state.
    with evaluated_weights(state):
        if not sharded:
            return save_one_file(state, path, weights_only=weights_only, metadata=metadata, check_finite=check_finite)
        if path.suffix == ".safetensors":
            raise ValueError(
                f"Cannot save the sharded checkpoint {path} as safetensors: a sharded checkpoint is a folder of "
                "per-rank shards. Use a name without the '.safetensors' suffix, or save a full checkpoint."
            )
        return save_sharded_checkpoint(
            state, path, weights_only=weights_only, metadata=metadata, check_finite=check_finite
        )


def read_checkpoint(path: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """Reads a checkpoint without running any code from it, and checks its checksums.

    Args:
        path (str | Path): A file written by :func:`save_checkpoint` (``.pt`` or ``.safetensors``), or a plain
            model state dict saved with ``torch.save`` (read as weights without a checksum), or a sharded
            checkpoint's folder (its ``composer.pt``, the shard files checked against their checksums; the tensors
            stay in the shards: see :func:`~composer.utils.checkpoint.sharded.read_sharded_checkpoint`).
        verify (bool): Check the checksums.

    Returns:
        dict: ``{'format_version', 'metadata', 'state'}``; ``state['model']`` holds the weights of a file.

    Raises:
        FileNotFoundError: If there is no such file.
        CheckpointError: If the file is truncated or corrupt, fails its checksum, or holds objects other than
            tensors and plain values (a file crafted to run code when unpickled is refused this way); for a folder,
            see :func:`~composer.utils.checkpoint.sharded.read_sharded_checkpoint`.

    Example:
        >>> import tempfile
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ckpt.pt")
        >>> checkpoint = read_checkpoint(path)
        >>> checkpoint["metadata"]["library"], "timer" in checkpoint["state"]
        ('opencomposer', True)
    """
    if Path(path).is_dir():
        return read_sharded_checkpoint(path, verify=verify)
    return read_checkpoint_file(path, verify=verify)


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
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
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
    if checkpoint["metadata"].get("weights_only", False) and not weights_only:
        raise weights_only_error(path)
    if checkpoint["metadata"].get("sharded", False):  # a collective
        rest = load_sharded_checkpoint(
            state, checkpoint, path, weights_only=weights_only, strict=strict, ignore_keys=ignore_keys
        )
    else:
        rest = load_one_file(state, checkpoint, weights_only=weights_only, strict=strict, ignore_keys=ignore_keys)
    if not weights_only:
        state.load_state_dict({**without_rank_states(rest), **own_rank_states(rest.get("rank_states"), state, path)})
