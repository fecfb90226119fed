"""Checkpoints and logs in an S3-compatible object store (Amazon S3, MinIO, Ceph, R2, GCS's S3 API, moto).

One concept per module:

* :mod:`~composer.utils.object_store.url`: ``s3://bucket/prefix``, ``file://`` and local paths, parsed and checked;
* :mod:`~composer.utils.object_store.options`: :class:`StorageOptions`, the Trainer's ``storage_options``;
* :mod:`~composer.utils.object_store.s3`: :class:`S3ObjectStore`, upload/download/list/delete/head with retries;
* :mod:`~composer.utils.object_store.uploader`: :class:`BackgroundUploader`, a worker thread with a bounded queue;
* :mod:`~composer.utils.object_store.checkpoint_folder`: :class:`RemoteCheckpointFolder`, a run's checkpoints in
  a store, ranked and pruned like a local folder and verified by SHA-256;
* :mod:`~composer.utils.object_store.checkpoint_uploads`: :class:`CheckpointUploads`, a run's checkpoints uploaded
  as they are saved, and the ``on_upload_failure`` policy;
* :mod:`~composer.utils.object_store.sharded_uploads`: :class:`ShardedUploads`, every rank's uploads of a run's
  sharded checkpoints, committed by rank 0 once every rank's shards are in the store.

Why boto3, and how uploads are made safe, is in this package's README.md.
"""

from composer.utils.object_store.checkpoint_folder import RemoteCheckpointFolder, file_sha256
from composer.utils.object_store.checkpoint_uploads import (
    UPLOAD_FAILURE_POLICIES,
    CheckpointUploads,
    check_upload_failure_policy,
)
from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.s3 import ObjectInfo, ObjectStoreError, S3ObjectStore, is_boto3_available
from composer.utils.object_store.sharded_uploads import ShardedUploads
from composer.utils.object_store.uploader import BackgroundUploader, UploadError
from composer.utils.object_store.url import ObjectStoreURL, is_url, parse_location, redact

__all__ = [
    "UPLOAD_FAILURE_POLICIES",
    "BackgroundUploader",
    "CheckpointUploads",
    "ObjectInfo",
    "ObjectStoreError",
    "ObjectStoreURL",
    "RemoteCheckpointFolder",
    "S3ObjectStore",
    "ShardedUploads",
    "StorageOptions",
    "UploadError",
    "check_upload_failure_policy",
    "file_sha256",
    "is_boto3_available",
    "is_url",
    "parse_location",
    "redact",
]
