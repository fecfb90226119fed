"""Reading a checkpoint back without running code from it: the checksum first, then weights-only unpickling.

A file that fails is refused with a :class:`CheckpointError` that names it and says what to do; a pickle crafted to
import or call something is told apart from bytes that are merely damaged (only parsed, never run).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import pickletools
import struct
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.local_io import (
    FORMAT_VERSION,
    SAFETENSORS_PLACEHOLDER,
    file_checksum_matches,
    hash_rest,
    is_safetensors_available,
)

__all__ = ["read_checkpoint_file"]


def read_checkpoint_file(path: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """Reads a checkpoint file without running any code from it, and checks its checksum.

    Args:
        path (str | Path): A file written by :func:`save_checkpoint` (``.pt`` or ``.safetensors``; a sharded
            checkpoint's ``composer.pt`` too), or a plain model state dict saved with ``torch.save`` (read as
            weights without a checksum).
        verify (bool): Check the checksum.

    Returns:
        dict: ``{'format_version', 'metadata', 'state'}``; ``state['model']`` holds the weights.

    Raises:
        FileNotFoundError: If there is no such file.
        CheckpointError: If the file is truncated or corrupt, fails its checksum, or holds objects other than
            tensors and plain values (a file crafted to run code when unpickled is refused this way).

    Example:
        >>> import tempfile
        >>> from composer.utils.checkpoint import save_checkpoint
        >>> import torch
        >>> from composer.core import State
        >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
        >>> path = save_checkpoint(state, Path(tempfile.mkdtemp()) / "ckpt.pt")
        >>> checkpoint = read_checkpoint_file(path)
        >>> checkpoint["metadata"]["library"], "timer" in checkpoint["state"]
        ('opencomposer', True)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint at {path}; check the path (and that the file was copied over).")
    if path.suffix == ".safetensors":
        return _read_safetensors(path, verify)
    # Check the bytes before unpickling anything: a corrupt file is reported as such, and never half-read.
    intact = file_checksum_matches(path) if verify else True
    if intact is False:
        raise CheckpointError(
            f"{path} failed its checksum: the file is corrupt (a flipped bit or a partial overwrite). Use an older "
            "checkpoint (autoresume falls back to one by itself).",
            reason="failed its checksum (a flipped bit or a partial overwrite)",
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's weights-only unpickler refuses a crafted pickle and random bytes alike; only a well-formed pickle
        # that imports or calls something is a crafted one.
        weights_only_refusal = "weights only" in str(e).lower() or "weights_only" in str(e)
        if weights_only_refusal and _pickle_imports_code(path):
            raise CheckpointError(
                f"Refusing to load {path}: it holds Python objects other than tensors and plain values, and "
                "unpickling them could run code from the file. Checkpoints written by composer never do; the file "
                "is corrupt or was crafted. Do not load it with weights_only=False unless you trust where it came "
                f"from. (torch: {str(e).splitlines()[0]})",
                reason="holds Python objects that could run code when unpickled (crafted, or not composer's)",
            ) from None
        raise _corrupt(path, None if weights_only_refusal else e) from None
    except Exception as e:
        raise _corrupt(path, e) from None
    if not isinstance(payload, dict):
        raise CheckpointError(
            f"{path} holds a {type(payload).__name__}, not a checkpoint dict.",
            reason=f"holds a {type(payload).__name__}, not a checkpoint dict",
        )
    if "format_version" not in payload:
        if payload and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in payload.items()):
            return {"format_version": 0, "metadata": {"weights_only": True}, "state": {"model": payload}}
        raise CheckpointError(
            f"{path} is not a composer checkpoint (no 'format_version') nor a plain model state dict of tensors; "
            "load it yourself and pass the weights to composer.utils.checkpoint.load_model_state.",
            reason="not a composer checkpoint (no 'format_version') nor a plain state dict",
        )
    if intact is None:
        raise CheckpointError(
            f"{path} has lost its checksum (the end of the file is missing or damaged): it is truncated or corrupt. "
            "Use an older checkpoint (autoresume falls back to one by itself).",
            reason="lost its checksum (truncated or corrupt)",
        )
    if payload["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {payload['format_version']}, newer than this library reads "
            f"({FORMAT_VERSION}); upgrade opencomposer.",
            reason=f"format {payload['format_version']} is newer than this library reads ({FORMAT_VERSION})",
        )
    return payload


# Pickle opcodes that import a global or call one: a pickle without any of them only builds plain values.
_CODE_OPCODES = frozenset(
    {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD", "EXT1", "EXT2", "EXT4"}
)


def _pickle_imports_code(path: Path) -> bool:
    """Whether ``path`` holds a complete, well-formed pickle that imports or calls something (a crafted pickle), as
    opposed to bytes that only fail to unpickle (a truncated file, a text file). Only parses; runs nothing.

    The pickle is the archive's ``data.pkl`` for a zip file (what ``torch.save`` writes), else the file itself (a
    ``pickle.dump`` or a legacy ``torch.save``, which writes several pickles in a row).
    """
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [name for name in archive.namelist() if name.endswith("data.pkl")]
                if not names:
                    return False
                with archive.open(names[0]) as stream:
                    return _pickles_import_code(stream)
        with open(path, "rb") as stream:
            return _pickles_import_code(stream)
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return False


def _pickles_import_code(stream: IO[bytes], limit: int = 8) -> bool:
    for _ in range(limit):  # consecutive pickles; a legacy torch.save writes five
        seen: set[str] = set()
        try:
            for opcode, _arg, _pos in pickletools.genops(stream):  # stops after the pickle's STOP
                seen.add(opcode.name)
        except Exception:  # not a well-formed pickle from here on: unknown opcode, truncated argument, EOF
            return False
        if seen & _CODE_OPCODES:
            return True
    return False


def _corrupt(path: Path, error: Exception | None) -> CheckpointError:
    """The error for a file that is no readable checkpoint at all; ``error`` is the reader's, if worth showing."""
    try:
        size = path.stat().st_size
    except OSError:
        size = -1
    what = f"not a checkpoint: truncated or corrupt ({size} bytes)"
    detail = ""
    if error is not None:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        detail = f" (reading it failed with {type(error).__name__}{': ' + first_line if first_line else ''})"
    return CheckpointError(
        f"{path} is {what}{detail}. Use an older checkpoint (autoresume falls back to one by itself), or copy the "
        "file again if it came from elsewhere.",
        reason=what,
    )


def _read_safetensors(path: Path, verify: bool) -> dict[str, Any]:
    if not is_safetensors_available():
        raise ImportError(f"Reading {path} needs the 'safetensors' package; install it with `pip install safetensors`.")
    from safetensors import safe_open

    try:
        with open(path, "rb") as f:
            prefix = f.read(8)
            header_bytes = f.read(struct.unpack("<Q", prefix)[0])
            header = json.loads(header_bytes)["__metadata__"]
            if verify:
                # Hash the file as it was before the digest went in: the digest's bytes back to the placeholder.
                at = header_bytes.index(header["checksum"].encode())
                digest = hashlib.sha256(prefix + header_bytes[:at] + SAFETENSORS_PLACEHOLDER.encode())
                digest.update(header_bytes[at + len(SAFETENSORS_PLACEHOLDER) :])
                hash_rest(f, digest)
                if digest.hexdigest() != header["checksum"]:
                    raise CheckpointError(
                        f"{path} failed its checksum: the file is corrupt. Use an older checkpoint (autoresume falls "
                        "back to one by itself).",
                        reason="failed its checksum",
                    )
        with safe_open(str(path), framework="pt") as f:
            weights = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        metadata = json.loads(header["metadata"])
        version = int(header["format_version"])
    except CheckpointError:
        raise
    except Exception as e:
        raise _corrupt(path, e) from None
    return {"format_version": version, "metadata": metadata, "state": {"model": weights}}
