"""Writing checkpoint files to a local disk: atomic replacement, fsync, the checksum trailer, temporary files.

A file is written under a temporary name in the same folder (``.<name>.tmp-<pid>``), flushed to disk (``fsync``),
and only then renamed into place, so a crash leaves either the old files or the complete new one, plus at worst a
temporary file that nothing reads (:func:`remove_stale_temporary_files` deletes those of processes that are gone).
A ``torch.save`` file (a zip archive) gets the SHA-256 of its bytes in the archive's comment, which readers skip;
a safetensors file gets it in its header.

A write that runs out of space (``ENOSPC``, or a disk quota) raises :class:`DiskFullError`, naming the checkpoint,
its folder and the fix, once its temporary file is removed; nothing else in the folder is touched. ``torch.save``
writes through a Python file object, so that the cause reaches it (written to a path, torch reports a short write
only as ``unexpected pos ...``).

Tests that simulate a crash between the steps patch :func:`after_write` (the file is written, not yet flushed to
disk) or :func:`after_fsync` (on disk, not yet renamed): both are no-ops that :func:`atomic_write` (and the sharded
writer, for a whole folder) calls with the checkpoint's final path at those moments. Nothing in the library kills a process.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch

__all__ = [
    "FORMAT_VERSION",
    "SAFETENSORS_PLACEHOLDER",
    "DiskFullError",
    "after_fsync",
    "after_write",
    "atomic_write",
    "disk_full_error",
    "file_checksum_matches",
    "fsync_folder",
    "hash_rest",
    "is_safetensors_available",
    "link_latest",
    "remove_stale_temporary_files",
    "write_safetensors",
    "write_torch",
]

FORMAT_VERSION = 1
_TRAILER_PREFIX = b"composer-sha256:"
_TRAILER_SIZE = len(_TRAILER_PREFIX) + 64  # hex digest
SAFETENSORS_PLACEHOLDER = "0" * 64  # where a safetensors header's digest goes


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """A checkpoint that could not be written for want of space on its disk (``errno.ENOSPC``, or a disk quota).

    The message names the checkpoint, its folder and the fix; what the write left is gone, and nothing else in the
    folder was touched.

    Args:
        message (str): The whole message (checkpoint, folder, cause and fix).
    """

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.strerror,)


def disk_full_error(
    path: str | os.PathLike[str], error: BaseException, folder: str | os.PathLike[str] | None = None
) -> DiskFullError | None:
    """A :class:`DiskFullError` for the checkpoint ``path`` when ``error`` comes from a lack of space; None otherwise.

    The cause is known when ``error``, what caused it, or (a ``torch.distributed.checkpoint`` error) a rank's
    failure is an ``OSError`` with ``errno.ENOSPC`` or ``errno.EDQUOT``. A rank's failure reaches the others pickled,
    without the error that caused it, so torch's own report of a short write (``unexpected pos``) counts too when
    ``folder`` (where the write went; call this before removing what it left) has less than 1 MiB free.

    Args:
        path (str | PathLike): The checkpoint (a file, or a sharded checkpoint's folder) whose write failed.
        error (BaseException): What the write raised.
        folder (str | PathLike, optional): Where the write went, to look at its free space.

    Returns:
        DiskFullError | None: The error to raise instead (``from error``), or None.

    Example:
        >>> cause = OSError(errno.ENOSPC, "No space left on device")
        >>> str(disk_full_error("ckpt/ep0-ba3.pt", cause)).startswith("Could not write the checkpoint ep0-ba3.pt")
        True
        >>> disk_full_error("ckpt/ep0-ba3.pt", ValueError("x")) is None
        True
    """
    if not (_lacks_space(error) or (folder is not None and "unexpected pos" in str(error) and _nearly_full(folder))):
        return None
    path = Path(path)
    return DiskFullError(
        f"Could not write the checkpoint {path.name} in {path.parent}: no space left on the device (what the write "
        "left is removed; the checkpoints already there are untouched). To fix: free space on that disk, give "
        "save_folder a folder on a disk with more room, or keep fewer checkpoints (save_num_checkpoints_to_keep). "
        "Keeping N checkpoints needs room for N+1: each new one is written before the oldest is deleted."
    )


def _lacks_space(error: BaseException | None, depth: int = 0) -> bool:
    """Whether ``error``, its cause or context, or (a ``torch.distributed.checkpoint`` error) a rank's failure is
    ``ENOSPC`` or ``EDQUOT``."""
    if error is None or depth > 8:
        return False
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
        return True
    failures = getattr(error, "failures", None)  # CheckpointException: {rank: (exception, traceback) or exception}
    if isinstance(failures, Mapping):
        for failure in failures.values():
            failure = failure[0] if isinstance(failure, tuple) and failure else failure
            if isinstance(failure, BaseException) and _lacks_space(failure, depth + 1):
                return True
    return _lacks_space(error.__cause__, depth + 1) or _lacks_space(error.__context__, depth + 1)


def _nearly_full(folder: str | os.PathLike[str]) -> bool:
    try:
        return shutil.disk_usage(folder).free < 2**20
    except OSError:
        return False


def is_safetensors_available() -> bool:
    """Whether the optional ``safetensors`` package is installed (for ``*.safetensors`` weight files).

    Returns:
        bool: True when ``safetensors`` can be imported.
    """
    return importlib.util.find_spec("safetensors") is not None


def write_torch(payload: Any, path: Path) -> None:
    """Writes ``payload`` with ``torch.save`` to ``path``, then appends the SHA-256 of its bytes as the zip comment.

    Args:
        payload (Any): What to save (tensors and plain values).
        path (Path): The file to write (a temporary one: :func:`atomic_write` renames it into place).
    """
    with open(path, "wb") as f:
        torch.save(payload, f)  # through a Python file object: a failed write raises the OSError that says why
    with open(path, "r+b") as f:
        # Hash the archive as torch wrote it (read back from the page cache: faster than hashing through a Python
        # file object torch would write to). It ends with the 2-byte length of its comment, 0: set it, then append
        # the comment.
        digest = hashlib.sha256()
        hash_rest(f, digest)
        trailer = _TRAILER_PREFIX + digest.hexdigest().encode()
        f.seek(-2, os.SEEK_END)
        f.write(struct.pack("<H", len(trailer)) + trailer)


def write_safetensors(path: Path, weights: Mapping[str, torch.Tensor], info: Mapping[str, Any]) -> None:
    """Writes ``weights`` atomically as the safetensors file ``path``, with ``info`` and a checksum in its header.

    Args:
        path (Path): The file to write.
        weights (Mapping[str, torch.Tensor]): The model's weights.
        info (Mapping): The checkpoint's metadata (plain values).
    """
    if not is_safetensors_available():
        raise ImportError(
            f"Saving {path} needs the 'safetensors' package; install it with `pip install safetensors`, or save to "
            "a '.pt' name."
        )
    from safetensors.torch import save

    # The header holds the SHA-256 of the whole file as written with a placeholder in its place; the digest has the
    # placeholder's length, so putting it in moves nothing.
    header = {"format_version": str(FORMAT_VERSION), "metadata": json.dumps(info), "checksum": SAFETENSORS_PLACEHOLDER}
    try:
        data = memoryview(save(dict(weights), metadata=header))
    except Exception as e:  # safetensors refuses tensors that share memory (tied weights)
        raise ValueError(f"Cannot write {path} as safetensors ({e}); save it to a '.pt' name instead.") from e
    header_size = struct.unpack("<Q", data[:8])[0]
    at = bytes(data[: 8 + header_size]).index(SAFETENSORS_PLACEHOLDER.encode())
    digest = hashlib.sha256(data).hexdigest().encode()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data[:at])
            f.write(digest)
            f.write(data[at + len(digest) :])

    atomic_write(path, write)


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """Writes to a temporary file next to ``path``, flushes it to disk, then renames it into place.

    Args:
        path (Path): The file to write; its folder is created.
        write (Callable[[Path], Any]): Writes the content into the temporary file it is given.

    Raises:
        DiskFullError: When the disk is full (the temporary file is removed).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        after_write(path)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        after_fsync(path)
        os.replace(tmp, path)
    except BaseException as e:
        full = disk_full_error(path, e, path.parent)
        tmp.unlink(missing_ok=True)
        if full is not None:
            raise full from e
        raise
    fsync_folder(path.parent)


def after_write(path: Path) -> None:
    """Called once the temporary file of ``path`` is written, before it is flushed to disk; a seam for tests."""


def after_fsync(path: Path) -> None:
    """Called once the temporary file of ``path`` is on disk, before it is renamed into place; a seam for tests."""


def fsync_folder(folder: Path) -> None:
    """Flushes ``folder``'s entries to disk, which makes a rename in it durable (where a folder can be opened).

    Args:
        folder (Path): The folder.
    """
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_TEMPORARY_NAME = re.compile(r"\..+\.tmp-(?P<pid>[0-9]+)")


def remove_stale_temporary_files(folder: str | Path) -> list[Path]:
    """Deletes the temporary files (and sharded checkpoint folders) that writers killed mid-save left under
    ``folder``; those of live processes stay.

    Args:
        folder (str | Path): The checkpoint folder (searched recursively).

    Returns:
        list[Path]: The temporary files and folders removed.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / ".ep0-ba3.pt.tmp-999999999").write_text("partial")
        >>> [p.name for p in remove_stale_temporary_files(folder)]
        ['.ep0-ba3.pt.tmp-999999999']
    """
    removed = []
    for path in list(Path(folder).rglob(".*.tmp-*")):
        match = _TEMPORARY_NAME.fullmatch(path.name)
        if match is None or _process_alive(int(match.group("pid"))):
            continue
        if path.is_dir() and not path.is_symlink():  # a sharded checkpoint's folder, written under a temporary name
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return pid < 2**22  # exists but is someone else's (or the id is out of range: then it never existed)
    return True


def link_latest(link: str | Path, target: str | Path) -> None:
    """Points the symlink ``link`` at ``target`` (a relative link, replaced atomically).

    Args:
        link (str | Path): The link to create or replace (``latest-rank0.pt``); its folder is created if needed.
        target (str | Path): The checkpoint it points at.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "ep1-ba8.pt").write_text("")
        >>> link_latest(folder / "latest-rank0.pt", folder / "ep1-ba8.pt")
        >>> (folder / "latest-rank0.pt").resolve().name
        'ep1-ba8.pt'
    """
    link, target = Path(link), Path(target)
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)
    fsync_folder(link.parent)


def file_checksum_matches(path: Path) -> bool | None:
    """Whether the file's bytes hash to the digest in its trailing zip comment; None if it has no such comment.

    Args:
        path (Path): A file written by :func:`write_torch`.

    Returns:
        bool | None: Whether the digest matches; None without a digest (truncated, or not written here).
    """
    size = path.stat().st_size
    body = size - _TRAILER_SIZE - 2  # the bytes torch.save wrote, but for the comment length it ends with
    with open(path, "rb") as f:
        if body < 0:
            return None
        f.seek(body)
        tail = f.read()
        if struct.unpack("<H", tail[:2])[0] != _TRAILER_SIZE or not tail[2:].startswith(_TRAILER_PREFIX):
            return None
        expected = tail[2 + len(_TRAILER_PREFIX) :]
        f.seek(0)
        digest = hashlib.sha256()
        hash_rest(f, digest, body)
    digest.update(b"\0\0")
    return digest.hexdigest().encode() == expected


def hash_rest(f: BinaryIO, digest: Any, limit: int | None = None) -> None:
    """Feeds the file from its current position (``limit`` bytes at most) to ``digest``, 16 MiB at a time.

    Args:
        f (BinaryIO): The open file.
        digest (Any): A ``hashlib`` object.
        limit (int, optional): The most bytes to read (default: to the end).
    """
    buffer = memoryview(bytearray(1 << 24))
    remaining = limit if limit is not None else float("inf")
    while remaining > 0:
        read = f.readinto(buffer[: int(min(remaining, len(buffer)))])  # type: ignore[attr-defined]
        if not read:
            return
        digest.update(buffer[:read])
        remaining -= read
