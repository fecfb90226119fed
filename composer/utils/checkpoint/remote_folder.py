"""A folder of checkpoints in an object store: ranked, pruned and verified like a local one.

Which objects are a run's checkpoints, which is newest, and which to delete follow exactly the rules of
:func:`~composer.utils.checkpoint.find_checkpoints` and :func:`~composer.utils.checkpoint.prune_checkpoints`: the
store's listing is mirrored as empty files (with the objects' modification times) in a scratch folder, and those
functions rank the mirror. Each checkpoint is uploaded with the SHA-256 of its bytes as object metadata; a download
counts only if its bytes hash to it, so an object that is partial, damaged, or was not written by this library is
never used (and the file's own checksum is checked again when it is read).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from composer.utils.checkpoint.entry_paths import entry_path
from composer.utils.checkpoint.errors import CheckpointError
from composer.utils.checkpoint.naming import DCP_INDEX, STATE_FILE, find_checkpoints, prune_checkpoints
from composer.utils.checkpoint.reading import read_checkpoint_file
from composer.utils.checkpoint.sharded_index import check_layout
from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.s3 import ObjectInfo, S3ObjectStore
from composer.utils.object_store.url import ObjectStoreURL

__all__ = ["SHA256_METADATA_KEY", "UNFINISHED_UPLOAD", "RemoteCheckpointFolder", "file_sha256", "rank_checkpoint_names"]

log = logging.getLogger(__name__)

SHA256_METADATA_KEY = "composer-sha256"
UNFINISHED_UPLOAD = f"an unfinished upload (no {STATE_FILE} in the store)"  # a sharded folder's reason for refusal


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes (read in large blocks, outside the GIL).

    Args:
        path (str | PathLike): The file.

    Returns:
        str: 64 lowercase hex digits.
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class RemoteCheckpointFolder:
    """The checkpoints under ``s3://bucket/prefix``, with a local folder they are written to and downloaded into.

    Args:
        url (ObjectStoreURL): The folder in the store.
        store (S3ObjectStore): The client of its bucket.
        local_folder (str | Path): Where checkpoints are written before upload and downloaded to.

    The Trainer opens one for an ``s3://`` ``save_folder`` (:meth:`open`, which checks the store) and hands it to
    its :class:`~composer.callbacks.CheckpointSaver`; ``tests/utils/checkpoint/test_uploads.py`` shows it at work
    against a local S3 server.
    """

    def __init__(self, url: ObjectStoreURL, store: S3ObjectStore, local_folder: str | Path) -> None:
        self.url = url
        self.store = store
        self.local_folder = Path(local_folder)

    @classmethod
    def open(
        cls,
        url: ObjectStoreURL,
        storage_options: StorageOptions | Mapping[str, Any] | None,
        argument: str,
        *,
        write: bool,
    ) -> RemoteCheckpointFolder:
        """The folder at ``url``, checked now: credentials, bucket, and (``write``) that objects can be written.

        Raises:
            ValueError: Naming ``argument`` and the URL, with the fix, if the store cannot be used.
        """
        options = StorageOptions.from_input(storage_options)
        store = S3ObjectStore(url.bucket, options)
        store.probe(url, argument, write=write)
        return cls(url, store, options.local_folder_for(url))

    def __repr__(self) -> str:
        return f"RemoteCheckpointFolder({str(self.url)!r}, local_folder={str(self.local_folder)!r})"

    # ---- ranking -----------------------------------------------------------------------------------------------

    def listing(self) -> dict[str, float]:
        """The objects in the folder, name (relative to the folder) -> modification time: those a writer of this
        library could have made. A name that is both an object and a folder of objects (``x.pt`` and
        ``x.pt/notes.txt``) cannot be a checkpoint both ways: the objects that are not are passed over, with a
        warning that names them."""
        times: dict[str, float] = {}
        for info in self._objects():
            name = self.url.name_of(info.key)
            if not name or name.endswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
                continue  # not a file name this library writes
            times[name] = info.last_modified
        strays = _strays(times)
        if strays:
            listed = ", ".join(str(self.url.join(name)) for name in sorted(strays))
            warnings.warn(
                f"{self.url} holds objects that are not checkpoints, passed over (a name that is both an object and "
                f"a folder of objects): {listed}. Move or delete them.",
                stacklevel=3,
            )
        return {name: when for name, when in times.items() if name not in strays}

    def newest_first(self, pattern: str, run_name: str = "", also: Mapping[str, float] | None = None) -> list[str]:
        """The names (relative to the folder) of the checkpoints of ``pattern`` in the store, newest first (a
        sharded checkpoint's folder among them, complete or not); ``also``: more names (name -> modification time:
        local checkpoints, say) ranked with them."""
        return rank_checkpoint_names({**self.listing(), **(also or {})}, pattern, run_name)

    def prune(
        self, pattern: str, keep: int, newest: str, run_name: str = "", protect: Collection[str] = ()
    ) -> list[str]:
        """Deletes the checkpoints of ``pattern`` in the store, all but the newest ``keep`` (``newest``, just
        uploaded, always among them), by the rules of :func:`~composer.utils.checkpoint.prune_checkpoints`. The
        store is listed each time, so what a run killed between an upload and its pruning left goes at the next
        call. A sharded checkpoint's folder goes whole (every object under it). A folder whose upload never
        finished (no ``composer.pt``) does not count among the ``keep``; it is deleted once it ranks older than
        ``newest`` (one ranked newer may be another rank's upload in progress), unless ``protect`` names it (an
        upload of it is still under way). Returns the names deleted."""
        with tempfile.TemporaryDirectory(prefix="composer-listing-") as scratch:
            mirror = _mirror(Path(scratch), self.listing())
            ranked = find_checkpoints(scratch, pattern, run_name)
            folders = {mirror[p] for p in ranked if p.is_dir()}
            unfinished = [p for p in ranked if p.is_dir() and not (p / STATE_FILE).is_file()]
            newest_path = Path(scratch) / newest
            older = ranked[ranked.index(newest_path) + 1 :] if newest_path in ranked else []
            doomed = [mirror[p] for p in unfinished if p in older and mirror[p] not in protect]
            for path in unfinished:
                shutil.rmtree(path)  # out of the mirror: not counted among the checkpoints kept
            doomed += [mirror[p] for p in prune_checkpoints(scratch, pattern, keep, newest_path, run_name=run_name)]
        for name in doomed:
            if name in folders:
                self.delete_folder(name)
            else:
                self.store.delete(self.url.key(name))
            log.info("Deleted %s (num_checkpoints_to_keep=%d).", self.url.join(name), keep)
        return doomed

    def delete_folder(self, name: str) -> None:
        """Deletes every object under ``name/`` (a sharded checkpoint), its ``composer.pt`` first, so that what a
        crash midway leaves is an unfinished folder, which is never resumed and is deleted later."""
        keys = [info.key for info in self.store.list_objects(self.url.key(name) + "/")]
        for key in sorted(keys, key=lambda k: not k.endswith("/" + STATE_FILE)):
            self.store.delete(key)

    def _objects(self) -> list[ObjectInfo]:
        return self.store.list_objects(self.url.key(""))

    # ---- transfers ---------------------------------------------------------------------------------------------

    def upload(self, local_path: str | os.PathLike[str], name: str, expected: str | None = None) -> None:
        """Uploads a checkpoint file as ``name``, with the SHA-256 of its bytes as metadata.

        Raises:
            CheckpointError: If ``expected`` is given and the file's SHA-256 differs from it (a damaged local copy
                of a file that a sharded checkpoint's ``composer.pt`` lists): nothing is uploaded.
        """
        digest = file_sha256(local_path)
        if expected is not None and digest != expected:
            raise CheckpointError(
                f"{local_path} does not match the SHA-256 that its checkpoint's {STATE_FILE} lists: the local copy is "
                "damaged, so it is not uploaded.",
                reason=f"the local copy of {Path(local_path).name} failed its checksum",
            )
        self.store.upload(local_path, self.url.key(name), metadata={SHA256_METADATA_KEY: digest})

    def download(self, name: str) -> Path:
        """Downloads the checkpoint ``name`` into the local folder (a local copy whose bytes match is used as it is)
        and checks its SHA-256 against the one uploaded with it.

        Raises:
            CheckpointError: If ``name`` would land outside the local folder (an absolute name, a ``..`` component,
                a symlink out), checked before anything is read or written; if the object has no checksum (partial,
                or not written by this library) or its bytes do not match it. The message names the object.
            ObjectStoreError: If the store cannot be read (after retrying).
        """
        local = entry_path(self.local_folder, name, source=f"the store folder {self.url}", nested=True)
        key = self.url.key(name)
        where = self.url.join(name)
        info = self.store.head(key)
        if info is None:
            raise CheckpointError(f"{where} does not exist (deleted meanwhile?).", reason="no longer in the store")
        expected = info.metadata.get(SHA256_METADATA_KEY)
        if expected is None:
            raise CheckpointError(
                f"{where} carries no checksum ({SHA256_METADATA_KEY} metadata): it was not uploaded whole by this "
                "library, so it is not used. Delete it, or use an older checkpoint (autoresume falls back by itself).",
                reason=f"no {SHA256_METADATA_KEY} metadata (partial, or not uploaded by composer)",
            )
        if local.is_file() and local.stat().st_size == info.size and file_sha256(local) == expected:
            log.info("%s is already here as %s.", where, local)
            return local
        self.store.download(key, local)
        if file_sha256(local) != expected:
            local.unlink(missing_ok=True)
            raise CheckpointError(
                f"{where} does not match the checksum it was uploaded with: the object is damaged or partial. Use an "
                "older checkpoint (autoresume falls back by itself).",
                reason="its bytes do not match the checksum uploaded with it",
            )
        return local

    # ---- sharded checkpoints (folders) ----------------------------------------------------------------------------

    def upload_files(self, local_folder: str | os.PathLike[str], name: str, files: list[str]) -> None:
        """Uploads ``files`` of the local folder ``local_folder`` as ``name/<file>``, each with its SHA-256."""
        for file in files:
            self.upload(Path(local_folder) / file, f"{name}/{file}")

    def check_sharded(self, name: str) -> dict[str, Any]:
        """Whether the sharded checkpoint ``name`` is complete in the store: downloads its ``composer.pt`` (verified,
        :meth:`sharded_state`), and checks without downloading them that every shard file it lists is in the store
        with the SHA-256 it lists. Returns ``composer.pt``'s payload (with ``'files'``: name -> SHA-256).

        Raises:
            CheckpointError: If ``composer.pt`` is missing (an unfinished upload) or damaged, lists a name that is not
                a plain file name inside the folder (checked before anything else is downloaded), or a listed file
                is missing from the store or carries another checksum.
        """
        payload = self.sharded_state(name)
        for file, problem in self.missing_files(name, payload["files"]).items():
            raise CheckpointError(
                f"{self.url.join(name)}/{file} {problem} in the store: the checkpoint is incomplete, so it is not used.",
                reason=f"shard file {file} {problem} in the store",
            )
        return payload

    def sharded_state(self, name: str) -> dict[str, Any]:
        """The ``composer.pt`` of the sharded checkpoint ``name`` in the store, downloaded into the local folder and
        verified (its checksums, and that it lists only plain file names inside the folder); the other files are
        not looked at.

        Args:
            name (str): The sharded checkpoint's folder name.

        Returns:
            dict: ``composer.pt``'s payload (with ``'files'``: file name -> SHA-256).

        Raises:
            CheckpointError: If ``composer.pt`` is missing (an unfinished upload), damaged, or not a sharded
                checkpoint's (then its download is deleted).
        """
        where = self.url.join(name)
        if self.store.head(self.url.key(f"{name}/{STATE_FILE}")) is None:
            raise CheckpointError(
                f"{where} has no {STATE_FILE}: its upload never finished (the ranks' shards go first, {STATE_FILE} "
                "last), so it is not used.",
                reason=UNFINISHED_UPLOAD,
            )
        state_file = self.download(f"{name}/{STATE_FILE}")
        try:
            payload = read_checkpoint_file(state_file)
            if "files" not in payload:
                raise CheckpointError(f"{where}/{STATE_FILE} is not a sharded checkpoint's.", reason="not sharded")
            check_layout(payload, state_file.parent)
        except CheckpointError:
            state_file.unlink(missing_ok=True)
            raise
        return payload

    def missing_files(self, name: str, files: Mapping[str, str]) -> dict[str, str]:
        """The files among ``files`` that the store does not hold under ``name/`` with that checksum (one metadata
        request per file, nothing downloaded).

        Args:
            name (str): A sharded checkpoint's folder name.
            files (Mapping[str, str]): File name -> SHA-256, as its ``composer.pt`` lists them.

        Returns:
            dict[str, str]: File name -> what is wrong (``'is missing'``, ``'does not carry the checksum listed'``).
        """
        missing = {}
        for file, digest in files.items():
            info = self.store.head(self.url.key(f"{name}/{file}"))
            if info is None or info.metadata.get(SHA256_METADATA_KEY) != digest:
                missing[file] = "is missing" if info is None else "does not carry the checksum listed"
        return missing

    def download_sharded(self, name: str) -> Path:
        """Downloads the sharded checkpoint ``name`` into the local folder (files already here whose bytes match are
        kept), each file checked against its uploaded SHA-256 and the one ``composer.pt`` lists; returns its path. Only
        the files ``composer.pt`` lists are downloaded, each a plain file name inside the folder (see
        :meth:`check_sharded`).

        Raises:
            CheckpointError: If the checkpoint is incomplete or a file does not match.
        """
        payload = self.check_sharded(name)
        for file in payload["files"]:
            self.download(f"{name}/{file}")
        return self.local_folder.joinpath(*name.split("/"))

    def clean_up_unfinished_uploads(self) -> list[str]:
        """Aborts the multipart uploads left unfinished under the folder (by a process killed while uploading)."""
        aborted = self.store.abort_multipart_uploads(self.url.key(""))
        for key in aborted:
            log.info("Aborted the unfinished upload of %s, left by a run that stopped while uploading.", key)
        return aborted


def rank_checkpoint_names(times: Mapping[str, float], pattern: str, run_name: str = "") -> list[str]:
    """The names among ``times`` (name -> modification time) of checkpoints of ``pattern``, newest first, by the
    rules of :func:`~composer.utils.checkpoint.find_checkpoints` (over a mirror of empty files, named and timed so).

    Example:
        >>> times = {"ep0-ba4.pt": 1.0, "ep1-ba12.pt": 2.0, "ep0-ba8.pt": 3.0, "notes.txt": 4.0}
        >>> rank_checkpoint_names(times, "ep{epoch}-ba{batch}.pt")
        ['ep1-ba12.pt', 'ep0-ba8.pt', 'ep0-ba4.pt']
    """
    with tempfile.TemporaryDirectory(prefix="composer-listing-") as scratch:
        mirror = _mirror(Path(scratch), times)
        return [mirror[path] for path in find_checkpoints(scratch, pattern, run_name)]


def _mirror(scratch: Path, times: Mapping[str, float]) -> dict[Path, str]:
    """Empty files under ``scratch`` named and timed like ``times`` (name -> modification time; a sharded
    checkpoint's folder as a folder, timed like its newest file); mirror path -> name, for folders too. Names that
    clash with another (see :func:`_strays`) are left out."""
    mirror: dict[Path, str] = {}
    folder_times: dict[Path, float] = {}
    strays = _strays(times)
    for name, modified in times.items():
        if name in strays:
            continue
        parts = name.split("/")
        path = scratch.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (modified, modified))
        mirror[path] = name
        for i in range(1, len(parts)):
            parent = scratch.joinpath(*parts[:i])
            mirror[parent] = "/".join(parts[:i])
            folder_times[parent] = max(folder_times.get(parent, 0.0), modified)
    for parent, when in folder_times.items():  # once every file is in: creating them touched the folders
        os.utime(parent, (when, when))
    return mirror


def _strays(names: Mapping[str, object]) -> set[str]:
    """The names that cannot be mirrored because another name is both an object and a folder of objects (``x.pt``
    and ``x.pt/notes.txt``): if the folder holds a sharded checkpoint's files, the plain object is the stray;
    otherwise the objects under the folder are."""
    folders = {name.rsplit("/", i)[0] for name in names for i in range(1, name.count("/") + 1)}
    strays: set[str] = set()
    for clash in sorted(name for name in names if name in folders):
        if clash in strays:
            continue
        inside = [name for name in names if name.startswith(clash + "/") and name not in strays]
        sharded = any(name.rsplit("/", 1)[1] in (STATE_FILE, DCP_INDEX) or name.endswith(".distcp") for name in inside)
        strays.update([clash] if sharded else inside)
    return strays
