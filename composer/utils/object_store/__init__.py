"""Storage in an S3-compatible object store (Amazon S3, MinIO, Ceph, R2, GCS's S3 API, moto): checkpoints, logs.

Pure storage: what a checkpoint is, and which of them a folder holds, is :mod:`composer.utils.checkpoint`'s (its
:class:`~composer.utils.checkpoint.RemoteCheckpointFolder` stores checkpoints through this package). One concept per
module:

* :mod:`~composer.utils.object_store.url`: ``s3://bucket/prefix``, ``file://`` and local paths, parsed and checked;
* :mod:`~composer.utils.object_store.options`: :class:`StorageOptions`, the Trainer's ``storage_options``;
* :mod:`~composer.utils.object_store.s3`: :class:`S3ObjectStore`, upload/download/list/delete/head with retries;
* :mod:`~composer.utils.object_store.uploader`: :class:`BackgroundUploader`, a worker thread with a bounded queue.

Why boto3, and how uploads are made safe, is in this package's README.md.
"""

from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.s3 import ObjectInfo, ObjectStoreError, S3ObjectStore, is_boto3_available
from composer.utils.object_store.uploader import BackgroundUploader, UploadError
from composer.utils.object_store.url import ObjectStoreURL, is_url, parse_location, redact

__all__ = [
    "BackgroundUploader",
    "ObjectInfo",
    "ObjectStoreError",
    "ObjectStoreURL",
    "S3ObjectStore",
    "StorageOptions",
    "UploadError",
    "is_boto3_available",
    "is_url",
    "parse_location",
    "redact",
]
