"""Reading and writing checkpoints: crash-safe writes, checksums, safe loading, and model keys across wrappers.

A checkpoint is one file written by ``torch.save``: a dict with the library's ``format_version``, ``metadata``
(library, torch and Python versions, the run's config) and the ``state`` (:meth:`State.state_dict`, or only the
model's weights). It holds tensors and plain Python values only, so ``torch.load(path, weights_only=True)`` reads it
with no extra allowed globals, and loading never runs code from the file. The SHA-256 of the file's bytes is stored
in the zip archive's comment (``torch.save`` writes a zip archive; readers, torch's included, skip the comment), so
any truncation or flipped bit is caught before the file is used. A name ending in ``.safetensors`` writes the
weights as a safetensors file instead (a checksum of the tensors goes into its header).

Writes are atomic: the file is written under a temporary name in the same folder, flushed to disk (``fsync``), and
only then renamed into place, so a crash leaves either the old files or the complete new one, plus at worst a
temporary file that nothing reads.

The package, one concept per module:

* :mod:`~composer.utils.checkpoint.naming`: name patterns, finding a run's checkpoints, pruning the oldest;
* :mod:`~composer.utils.checkpoint.local_io`: atomic writes, fsync, checksums, temporary files, the 'latest' link;
* :mod:`~composer.utils.checkpoint.saving`: :func:`save_checkpoint` (rank 0 writes one file);
* :mod:`~composer.utils.checkpoint.reading`: :func:`read_checkpoint`, the checksum and pickle-safety checks;
* :mod:`~composer.utils.checkpoint.loading`: :func:`restore_checkpoint` and :func:`load_model_state`;
* :mod:`~composer.utils.checkpoint.full_state`: a model sharded with FSDP gathered whole, and cut back into shards;
* :mod:`~composer.utils.checkpoint.sharded`: sharded checkpoints, a folder into which every FSDP rank writes its
  own shards with ``torch.distributed.checkpoint``, and :func:`convert_sharded_to_full`;
* :mod:`~composer.utils.checkpoint.sharded_index`: a sharded checkpoint's index read without running code and checked
  against its ``composer.pt`` (no bytes items, the recorded shapes and dtypes, files listed and inside the folder);
* :mod:`~composer.utils.checkpoint.sharded_reader`: the tensors loaded through that checked index;
* :mod:`~composer.utils.checkpoint.entry_paths`: a name read from a checkpoint or a store, as a path inside its folder.
"""

from composer.utils.checkpoint.loading import load_checkpoint, load_model_state, restore_checkpoint
from composer.utils.checkpoint.local_io import (
    DiskFullError,
    is_safetensors_available,
    link_latest,
    remove_stale_temporary_files,
)
from composer.utils.checkpoint.naming import (
    FILENAME_FIELDS,
    find_checkpoints,
    format_checkpoint_name,
    prune_checkpoints,
)
from composer.utils.checkpoint.reading import CheckpointError, read_checkpoint
from composer.utils.checkpoint.saving import NonFiniteWeightsError, save_checkpoint
from composer.utils.checkpoint.sharded import convert_sharded_to_full, is_sharded_checkpoint

__all__ = [
    "FILENAME_FIELDS",
    "CheckpointError",
    "DiskFullError",
    "NonFiniteWeightsError",
    "convert_sharded_to_full",
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
