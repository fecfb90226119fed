"""A sharded checkpoint's index (DCP's ``.metadata``), read without running code and checked against ``composer.pt``.

Whoever can write a checkpoint's folder can rewrite every file in it, ``composer.pt``'s checksums included (a
checksum is not a signature). So the folder is trusted only as far as loading it cannot run code nor touch a file
outside it. ``composer.pt`` is read with ``torch.load(weights_only=True)`` (plain values and tensors only), and it is
the reference the rest is checked against:

* :func:`check_layout`: its file list holds plain file names only (none absolute, none with a ``..`` or any other
  path component), DCP's index among them; its layout maps every tensor's name to (shape, dtype, sharded).
* :func:`read_index`: DCP's index is a pickle. It is read with an unpickler that builds only DCP's own record types,
  torch sizes, dtypes and layouts, and paths (anything else is refused before it is built), and is then checked
  against the layout: every item must be a tensor the layout names, with its shape and dtype, cut into chunks that
  fit it; and every storage entry must name a file of the file list, inside the folder (a symlink out of it is
  refused), with no stream transform (composer writes none). A bytes item is always refused: the layout names
  tensors only, and DCP's default load planner unpickles a bytes item with a full unpickler (``torch.load(...,
  weights_only=False)``), which runs whatever code the bytes hold.

Each refusal is a :class:`~composer.utils.checkpoint.CheckpointError` that names the folder and the offending entry.
:mod:`~composer.utils.checkpoint.sharded_reader` loads the tensors through the index checked here.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from composer.utils.checkpoint.entry_paths import entry_path
from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.naming import DCP_INDEX, STATE_FILE

__all__ = ["check_layout", "read_index", "refusal"]


def refusal(folder: str | os.PathLike[str], problem: str, reason: str) -> CheckpointError:
    """The error for a sharded checkpoint ``folder`` refused because of ``problem`` (which names the entry).

    Args:
        folder (str | PathLike): The checkpoint's folder (or its name in a store).
        problem (str): What is wrong, naming the entry.
        reason (str): The same in a few words (for autoresume's list of refused checkpoints).

    Returns:
        CheckpointError: The error to raise.
    """
    return CheckpointError(
        f"Refusing to load the sharded checkpoint {folder}: {problem}. Checkpoints written by composer never do; this "
        "one is damaged or was crafted, so nothing is loaded from it. Use another checkpoint (autoresume falls back "
        "to an older one by itself).",
        reason=reason,
    )


def check_layout(payload: Mapping[str, Any], folder: str | os.PathLike[str]) -> None:
    """Checks what a sharded checkpoint's ``composer.pt`` (``payload``) says of the folder's files and tensors.

    Args:
        payload (Mapping): ``composer.pt`` as read with ``weights_only=True``.
        folder (str | PathLike): The checkpoint's folder (local or in a store; the names are checked inside it).

    Raises:
        CheckpointError: If a file name is not a plain name inside ``folder``, DCP's index is not listed, or a layout
            entry is not (shape, dtype, sharded).
    """
    files, layout = payload.get("files"), payload.get("tensors")
    if not isinstance(files, dict) or not isinstance(layout, dict):
        raise refusal(folder, "its composer.pt lacks the file list or the tensors' layout", "no file list or layout")
    for name, digest in files.items():
        entry_path(folder, name, source=f"the file list of {Path(folder) / STATE_FILE}")
        if not isinstance(digest, str):
            raise refusal(folder, f"composer.pt lists {name!r} with no SHA-256", f"no checksum for {name!r}")
    if DCP_INDEX not in files:
        raise refusal(folder, f"composer.pt does not list DCP's index ({DCP_INDEX})", f"{DCP_INDEX} not listed")
    for name, entry in layout.items():
        if not (
            isinstance(name, str)
            and isinstance(entry, (tuple, list))
            and len(entry) == 3
            and isinstance(entry[0], (torch.Size, tuple, list))
            and all(type(n) is int and n >= 0 for n in entry[0])
            and isinstance(entry[1], torch.dtype)
            and isinstance(entry[2], bool)
        ):
            raise refusal(
                folder,
                f"composer.pt's layout gives the tensor {name!r} as {entry!r}, not as (shape, dtype, sharded)",
                f"layout entry {name!r} malformed",
            )


def read_index(folder: str | os.PathLike[str], checkpoint: Mapping[str, Any]) -> Any:
    """Reads DCP's index of the sharded checkpoint ``folder``, without running code, and checks it against
    ``checkpoint`` (its ``composer.pt``); see the module's docstring for what is checked.

    Args:
        folder (str | PathLike): The checkpoint's folder.
        checkpoint (Mapping): Its ``composer.pt``, as read with ``weights_only=True``.

    Returns:
        torch.distributed.checkpoint.metadata.Metadata: The index, checked.

    Raises:
        CheckpointError: Naming the offending entry, if the index is not DCP's, or declares anything composer.pt
            does not record (a bytes item, an unknown item, another shape or dtype, a file not listed or outside).
    """
    folder = Path(folder)
    check_layout(checkpoint, folder)
    path = entry_path(folder, DCP_INDEX, source=f"the sharded checkpoint {folder}")
    try:
        with open(path, "rb") as f:
            index = _IndexUnpickler(f).load()
    except pickle.UnpicklingError as e:
        raise refusal(
            folder, f"its index ({DCP_INDEX}) {e}", f"{DCP_INDEX} refers to objects DCP never writes"
        ) from None
    except Exception as e:
        problem = f"its index ({DCP_INDEX}) is not readable ({type(e).__name__}: {e})"
        raise refusal(folder, problem, f"{DCP_INDEX} not readable") from None
    _check_items(index, folder, checkpoint["tensors"])
    _check_storage(index, folder, checkpoint["tensors"], checkpoint["files"])
    return index


def _check_items(index: Any, folder: Path, layout: Mapping[str, Any]) -> None:
    """Every item of the index is a tensor the layout names, with its shape and dtype, in chunks that fit it."""
    from torch.distributed.checkpoint.metadata import (
        BytesStorageMetadata,
        ChunkStorageMetadata,
        Metadata,
        TensorProperties,
        TensorStorageMetadata,
    )

    if type(index) is not Metadata or not isinstance(index.state_dict_metadata, dict):
        what = type(index).__name__
        raise refusal(folder, f"its index ({DCP_INDEX}) holds a {what}, not DCP's index", f"{DCP_INDEX} not DCP's")
    for name, item in index.state_dict_metadata.items():
        recorded = layout.get(name)
        if isinstance(item, BytesStorageMetadata):
            where = "where composer.pt's layout records a tensor" if recorded else "that composer.pt does not name"
            raise refusal(
                folder,
                f"its index declares {name!r} as a bytes item, {where} (DCP would unpickle those bytes with a full "
                "unpickler, which can run code; composer writes tensors only)",
                f"index item {name!r} is a bytes item",
            )
        if recorded is None:
            problem = f"its index holds an item {name!r} that composer.pt's layout does not name"
            raise refusal(folder, problem, f"index item {name!r} is not in the layout")
        shape, dtype = tuple(recorded[0]), recorded[1]
        if (
            type(item) is not TensorStorageMetadata
            or type(item.properties) is not TensorProperties
            or not isinstance(item.size, torch.Size)
            or not isinstance(item.chunks, list)
        ):
            problem = f"its index declares {name!r} as {type(item).__name__}, not a tensor"
            raise refusal(folder, problem, f"index item {name!r} is no tensor")
        if tuple(item.size) != shape or item.properties.dtype != dtype:
            raise refusal(
                folder,
                f"its index declares {name!r} as a {item.properties.dtype} tensor of shape {tuple(item.size)}, where "
                f"composer.pt's layout records a {dtype} tensor of shape {shape}",
                f"index item {name!r} differs from the layout",
            )
        for chunk in item.chunks:
            if not (type(chunk) is ChunkStorageMetadata and _fits(chunk.offsets, chunk.sizes, shape)):
                problem = f"its index cuts {name!r} into a chunk outside its shape {shape}"
                raise refusal(folder, problem, f"index item {name!r} has a chunk outside its shape")
    missing = sorted(set(layout) - set(index.state_dict_metadata))
    if missing:
        raise refusal(
            folder, f"its index lacks the tensors {missing[:5]} that composer.pt's layout records", "items missing"
        )


def _fits(offsets: Any, sizes: Any, shape: tuple[int, ...]) -> bool:
    if not (
        isinstance(offsets, torch.Size) and isinstance(sizes, torch.Size) and len(offsets) == len(sizes) == len(shape)
    ):
        return False
    return all(o >= 0 and s >= 0 and o + s <= n for o, s, n in zip(offsets, sizes, shape))


def _check_storage(index: Any, folder: Path, layout: Mapping[str, Any], files: Mapping[str, Any]) -> None:
    """Every storage entry locates a chunk of a tensor the layout names, in a file listed and inside the folder."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import MetadataIndex

    if not isinstance(index.storage_data, dict):
        raise refusal(folder, f"its index ({DCP_INDEX}) has no storage entries", f"{DCP_INDEX} not DCP's")
    for key, info in index.storage_data.items():
        if type(key) is not MetadataIndex or key.fqn not in layout:
            what = key.fqn if isinstance(key, MetadataIndex) else key
            problem = f"its index stores an entry for {what!r}, which composer.pt's layout does not name"
            raise refusal(folder, problem, f"index storage entry for {what!r} is not in the layout")
        if type(info) is not _StorageInfo:
            problem = f"its index's storage entry for {key.fqn!r} is a {type(info).__name__}"
            raise refusal(folder, problem, f"index storage entry for {key.fqn!r} malformed")
        source = f"{DCP_INDEX}'s storage entry for {key.fqn!r}"
        entry_path(folder, info.relative_path, source=source)
        if info.relative_path not in files or info.relative_path == DCP_INDEX:
            raise refusal(
                folder,
                f"{source} names the file {info.relative_path!r}, which composer.pt's file list does not hold",
                f"{source} names an unlisted file",
            )
        if not (type(info.offset) is int and type(info.length) is int and info.offset >= 0 and info.length >= 0):
            problem = f"{source} has the offset {info.offset!r} and length {info.length!r}"
            raise refusal(folder, problem, f"{source} malformed")
        if info.transform_descriptors:
            problem = f"{source} asks for the stream transforms {info.transform_descriptors!r}"
            raise refusal(folder, problem, f"{source} asks for stream transforms")
    for name, item in index.state_dict_metadata.items():
        for chunk in item.chunks:
            if MetadataIndex(name, chunk.offsets) not in index.storage_data:
                problem = f"its index has no storage entry for a chunk of {name!r}"
                raise refusal(folder, problem, f"index item {name!r} has a chunk with no storage entry")


class _IndexUnpickler(pickle.Unpickler):
    """Builds only what DCP's index holds: DCP's record types, torch sizes, dtypes and layouts, and paths."""

    _ALLOWED = {
        "torch.distributed.checkpoint.metadata": {
            "Metadata",
            "MetadataIndex",
            "StorageMeta",
            "TensorStorageMetadata",
            "BytesStorageMetadata",  # refused by the checks, by name, once the index is read
            "ChunkStorageMetadata",
            "TensorProperties",
            "_MEM_FORMAT_ENCODING",
        },
        "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
        "torch.serialization": {"_get_layout"},
        "pathlib": {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},
    }

    def find_class(self, module: str, name: str) -> Any:
        if name in self._ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and "." not in name:
            found = getattr(torch, name, None)
            if found is torch.Size or isinstance(found, (torch.dtype, torch.layout)):
                return found
        raise pickle.UnpicklingError(
            f"refers to {module}.{name}, which DCP's index never holds (unpickling it could run code)"
        )
