"""Checkpoints: what one holds and the checks on it, its two formats, and the folders that hold them.

A checkpoint is one file written by ``torch.save``: a dict with the library's ``format_version``, ``metadata``
(library, torch and Python versions, the run's config) and the ``state`` (:meth:`State.state_dict`, or only the
model's weights). It holds tensors and plain Python values only, so ``torch.load(path, weights_only=True)`` reads it
with no extra allowed globals, and loading never runs code from the file. The SHA-256 of the file's bytes is stored
in the zip archive's comment (``torch.save`` writes a zip archive; readers, torch's included, skip the comment), so
any truncation or flipped bit is caught before the file is used. A name ending in ``.safetensors`` writes the
weights as a safetensors file instead (a checksum of the tensors goes into its header). A sharded checkpoint is a
folder into which every FSDP rank writes its own shards.

Writes are atomic: the file is written under a temporary name in the same folder, flushed to disk (``fsync``), and
only then renamed into place, so a crash leaves either the old files or the complete new one, plus at worst a
temporary file that nothing reads.

The package, in layers (each module imports only those above it):

* what a checkpoint is: :mod:`~composer.utils.checkpoint.errors` (:class:`CheckpointError`),
  :mod:`~composer.utils.checkpoint.naming` (default names, name patterns, finding and pruning a run's checkpoints,
  the files of a sharded folder), :mod:`~composer.utils.checkpoint.local_io` (atomic writes, fsync, digests,
  temporary files, the 'latest' link), :mod:`~composer.utils.checkpoint.entry_paths` (a name read from a
  checkpoint or a store, as a path inside its folder), :mod:`~composer.utils.checkpoint.contents` (what a checkpoint
  holds: metadata, plain values, finite weights, every rank's random states),
  :mod:`~composer.utils.checkpoint.full_state` (an FSDP model gathered whole, and cut back into shards),
  :mod:`~composer.utils.checkpoint.state_dicts` (model weights across wrappers, and their keys checked) and
  :mod:`~composer.utils.checkpoint.reading` (a checkpoint file read back without running code);
* the formats, leaves that never import each other: :mod:`~composer.utils.checkpoint.one_file` and
  :mod:`~composer.utils.checkpoint.sharded` (with :mod:`~composer.utils.checkpoint.sharded_index`, DCP's index
  checked against ``composer.pt``, and :mod:`~composer.utils.checkpoint.sharded_reader`, the tensors loaded through
  it); :mod:`~composer.utils.checkpoint.formats` chooses between them (:func:`save_checkpoint`,
  :func:`read_checkpoint`, :func:`restore_checkpoint`);
* the folders: :mod:`~composer.utils.checkpoint.remote_folder` (the transfers: a run's checkpoints in an object
  store, ranked and pruned like a local folder and verified by SHA-256), :mod:`~composer.utils.checkpoint.uploads`
  (one-file checkpoints uploaded as they are saved, and the ``on_upload_failure`` policy),
  :mod:`~composer.utils.checkpoint.sharded_uploads` (every rank's uploads of sharded checkpoints, committed by rank 0),
  and over them the one interface a saver commits to and a loader walks (``newest_first``, ``open``, ``commit``,
  ``prune``): :mod:`~composer.utils.checkpoint.folders` (:class:`LocalFolder`, :class:`RemoteFolder`) and
  :mod:`~composer.utils.checkpoint.mirrored_folder` (:class:`MirroredFolder`, a store whose ranks' local folders count
  too: autoresume's choice, with :mod:`~composer.utils.checkpoint.sharded_mirror` for sharded checkpoints).
"""

from composer.utils.checkpoint.errors import CheckpointError, NonFiniteWeightsError
from composer.utils.checkpoint.folders import CheckpointFolder, LocalFolder, RemoteFolder
from composer.utils.checkpoint.formats import load_checkpoint, read_checkpoint, restore_checkpoint, save_checkpoint
from composer.utils.checkpoint.local_io import (
    DiskFullError,
    is_safetensors_available,
    link_latest,
    remove_stale_temporary_files,
)
from composer.utils.checkpoint.mirrored_folder import MirroredFolder
from composer.utils.checkpoint.naming import (
    DEFAULT_FILENAME,
    DEFAULT_LATEST_FILENAME,
    FILENAME_FIELDS,
    find_checkpoints,
    format_checkpoint_name,
    is_sharded_checkpoint,
    prune_checkpoints,
)
from composer.utils.checkpoint.remote_folder import RemoteCheckpointFolder, file_sha256
from composer.utils.checkpoint.sharded import convert_sharded_to_full
from composer.utils.checkpoint.sharded_uploads import ShardedUploads
from composer.utils.checkpoint.state_dicts import load_model_state
from composer.utils.checkpoint.uploads import UPLOAD_FAILURE_POLICIES, CheckpointUploads, check_upload_failure_policy

__all__ = [
    "DEFAULT_FILENAME",
    "DEFAULT_LATEST_FILENAME",
    "FILENAME_FIELDS",
    "UPLOAD_FAILURE_POLICIES",
    "CheckpointError",
    "CheckpointFolder",
    "CheckpointUploads",
    "DiskFullError",
    "LocalFolder",
    "MirroredFolder",
    "NonFiniteWeightsError",
    "RemoteCheckpointFolder",
    "RemoteFolder",
    "ShardedUploads",
    "check_upload_failure_policy",
    "convert_sharded_to_full",
    "file_sha256",
    "find_checkpoints",
    "format_checkpoint_name",
    "is_safetensors_available",
    "is_sharded_checkpoint",
    "link_latest",
    "load_checkpoint",
    "load_model_state",
    "prune_checkpoints",
    "read_checkpoint",
    "remove_stale_temporary_files",
    "restore_checkpoint",
    "save_checkpoint",
]
