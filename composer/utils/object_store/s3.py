"""A client for one bucket of an S3-compatible object store: upload, download, list, delete, head, and a probe.

Built on boto3 (the optional ``remote`` extra): multipart transfers through its ``TransferConfig``, retries of
throttling and transient errors within a call through botocore's ``standard`` retry mode, and credentials from the
standard AWS chain. Around each call, :class:`S3ObjectStore` retries transient failures (the store unreachable,
timeouts, 5xx answers) with exponential backoff until ``retry_budget`` seconds have passed, then raises
:class:`ObjectStoreError` naming the object and the cause. Errors that retrying cannot cure (wrong credentials, no
such bucket, access denied) raise at once. Messages name the bucket, key and endpoint, never a credential.

The budget also bounds a store that hangs (accepts connections, answers nothing): the connect and read timeouts and
botocore's own attempts are derived from it (:func:`request_limits`), so that one call on a hung store ends within
a quarter of the budget, and a new attempt starts only if one as long as the last can end within the budget.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from composer.utils.object_store.options import StorageOptions
from composer.utils.object_store.url import ObjectStoreURL

__all__ = ["ObjectInfo", "ObjectStoreError", "S3ObjectStore", "is_boto3_available", "request_limits"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Error codes that say the request itself is wrong: retrying cannot help.
_CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId"}
)
_PERMANENT_CODES = _CREDENTIAL_CODES | {
    "AccessDenied",
    "NoSuchBucket",
    "NoSuchKey",
    "404",
    "403",
    "400",
    "InvalidBucketName",
    "AllAccessDisabled",
    "MethodNotAllowed",
}
_MAX_BACKOFF = 5.0


def request_limits(retry_budget: float) -> tuple[float, int]:
    """How long one request may wait on the store, and how many times botocore sends it, under ``retry_budget``.

    A request waits at most ``timeout`` seconds to connect and as long for each answer: an eighth of the budget,
    from 1 to 60 s. botocore sends it at most ``attempts`` times (1 to 3), so that one call on a hung store ends
    within about a quarter of the budget (a multipart upload, which aborts with a second call, within half), and
    :class:`S3ObjectStore`'s own retries fit in the rest.

    Args:
        retry_budget (float): The seconds an operation may be retried (``storage_options['retry_budget']``).

    Returns:
        tuple[float, int]: The connect and read timeout in seconds, and botocore's attempts per request.

    Example:
        >>> request_limits(2.0), request_limits(120.0), request_limits(3600.0)
        ((1.0, 1), (15.0, 2), (60.0, 3))
    """
    timeout = min(60.0, max(1.0, retry_budget / 8))
    return timeout, int(min(3, max(1, retry_budget // (4 * timeout))))


def is_boto3_available() -> bool:
    """Whether boto3, which ``s3://`` locations need, is installed (``pip install 'opencomposer[remote]'``).

    Returns:
        bool: True when boto3 can be imported.
    """
    return importlib.util.find_spec("boto3") is not None


class ObjectStoreError(RuntimeError):
    """An object store operation that failed for good; the message names the object, the cause and the fix.

    Args:
        message (str): What failed, on which object, why, and the fix (credentials never appear in it).
        code (str, optional): The store's error code, if it gave one.

    Attributes:
        code (str | None): The store's error code (``'NoSuchBucket'``, ``'InvalidAccessKeyId'``, ...), if it gave
            one.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ObjectInfo:
    """An object in the store, as a listing or ``head`` describes it.

    Args:
        key (str): The object's key in its bucket.
        size (int): Its size in bytes.
        last_modified (float): When it was last written, in seconds since the epoch.
        metadata (Mapping[str, str]): Its user metadata (``head`` fills it in; listings leave it empty).
    """

    key: str
    size: int
    last_modified: float
    metadata: Mapping[str, str]


class S3ObjectStore:
    """One bucket of an S3-compatible store.

    The boto3 client is built once and shared by threads (boto3 clients are thread-safe). Every method retries
    transient failures within ``options.retry_budget`` seconds, then raises :class:`ObjectStoreError`.

    Args:
        bucket (str): The bucket.
        options (StorageOptions | Mapping, optional): Endpoint, region, profile, retry budget, multipart settings.

    Raises:
        ImportError: If boto3 is not installed (the message names the extra).
    """

    def __init__(self, bucket: str, options: StorageOptions | Mapping[str, Any] | None = None) -> None:
        if not is_boto3_available():
            raise ImportError(
                "s3:// locations need boto3; install the 'remote' extra: pip install 'opencomposer[remote]'."
            )
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self._cancelled = False  # cancel_uploads() was called
        self.options = StorageOptions.from_input(options)
        options = self.options
        self.timeout, attempts = request_limits(options.retry_budget)
        config = Config(
            retries={"mode": "standard", "total_max_attempts": attempts},
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            # Path-style addresses (endpoint/bucket/key) work with every S3-compatible store and with IP endpoints.
            s3={"addressing_style": "path"} if options.endpoint_url is not None else {},
        )
        session = boto3.session.Session(profile_name=options.profile_name)
        region = options.region_name or session.region_name or "us-east-1"
        self._client = session.client("s3", endpoint_url=options.endpoint_url, region_name=region, config=config)
        self._transfer = TransferConfig(
            multipart_threshold=int(options.multipart_threshold_mb * 2**20),
            multipart_chunksize=int(options.multipart_chunksize_mb * 2**20),
            max_concurrency=options.max_concurrency,
            use_threads=options.max_concurrency > 1,
            num_download_attempts=attempts,  # s3transfer's own retries of a download's body, bounded like botocore's
        )

    def __repr__(self) -> str:
        where = f", endpoint_url={self.options.endpoint_url!r}" if self.options.endpoint_url else ""
        return f"S3ObjectStore(bucket={self.bucket!r}{where})"

    # ---- operations --------------------------------------------------------------------------------------------

    def upload(
        self,
        local_path: str | os.PathLike[str],
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Uploads a local file to ``key`` (in parts from ``multipart_threshold_mb`` up); ``metadata`` goes with it.

        ``progress`` is called with the bytes sent since its last call. S3 makes an object visible only once its
        upload is complete, so a reader sees the whole file or none; a multipart upload that fails is aborted.
        """
        extra = {"Metadata": dict(metadata)} if metadata else None
        callback = self._cancellable(progress)
        self._retry(
            f"uploading {local_path} to {self._url(key)}",
            lambda: self._client.upload_file(
                str(local_path), self.bucket, key, ExtraArgs=extra, Config=self._transfer, Callback=callback
            ),
        )

    def cancel_uploads(self) -> None:
        """Stops the uploads in flight at their next chunk (a multipart one is aborted) and fails later ones at once,
        with :class:`ObjectStoreError`: for a process that must end now, whose exit would otherwise wait for them (a
        preemption past its grace period: :mod:`composer.trainer.preemption`). It cannot be undone."""
        self._cancelled = True

    def _cancellable(self, progress: Callable[[int], None] | None) -> Callable[[int], None]:
        def report(sent: int) -> None:  # called by the transfer's threads as the file's chunks are read
            if self._cancelled:
                raise _CancelledError("cancelled: the process is ending (its preemption grace period is over)")
            if progress is not None:
                progress(sent)

        return report

    def upload_bytes(self, data: bytes, key: str) -> None:
        """Writes ``data`` as the whole object ``key`` (small files: logs, markers)."""
        self._retry(
            f"uploading {len(data)} bytes to {self._url(key)}",
            lambda: self._client.put_object(Bucket=self.bucket, Key=key, Body=data),
        )

    def download(self, key: str, local_path: str | os.PathLike[str]) -> None:
        """Downloads ``key`` to ``local_path`` (its folder is created); the file appears only once complete."""
        path = Path(local_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")

        def download() -> None:
            self._client.download_file(self.bucket, key, str(tmp), Config=self._transfer)

        try:
            self._retry(f"downloading {self._url(key)} to {path}", download)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def head(self, key: str) -> ObjectInfo | None:
        """The object ``key`` with its metadata, or None if there is none."""
        from botocore.exceptions import ClientError

        def head() -> ObjectInfo | None:
            try:
                answer = self._client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as e:
                if _code(e) in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise
            return ObjectInfo(
                key, int(answer["ContentLength"]), answer["LastModified"].timestamp(), answer.get("Metadata", {})
            )

        return self._retry(f"reading {self._url(key)}", head)

    def list_objects(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (metadata not included)."""

        def list_all() -> list[ObjectInfo]:
            return list(self._list(prefix))

        return self._retry(f"listing {self._url(prefix)}", list_all)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"], int(item["Size"]), item["LastModified"].timestamp(), {})

    def delete(self, key: str) -> None:
        """Deletes ``key`` (nothing happens if there is no such object)."""
        self._retry(f"deleting {self._url(key)}", lambda: self._client.delete_object(Bucket=self.bucket, Key=key))

    def abort_multipart_uploads(self, prefix: str) -> list[str]:
        """Aborts the unfinished multipart uploads under ``prefix`` (left by a process killed while uploading: their
        parts are invisible but stored, and billed, until aborted); returns their keys."""

        def abort() -> list[str]:
            aborted = []
            answer = self._client.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix)
            for upload in answer.get("Uploads", []) or []:
                self._client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"])
                aborted.append(upload["Key"])
            return aborted

        return self._retry(f"cleaning up unfinished uploads under {self._url(prefix)}", abort)

    def probe(self, url: ObjectStoreURL, argument: str, *, write: bool) -> None:
        """Checks now that the credentials work, the bucket exists and (``write``) objects can be written under
        ``url``, so that a problem stops the run before training. A written probe object is deleted at once.

        Raises:
            ValueError: Naming ``argument``, the URL, what is wrong and the fix.
        """
        where = f"{argument}={str(url)!r}"
        try:
            self._client.list_objects_v2(Bucket=self.bucket, Prefix=url.prefix, MaxKeys=1)
            if write:
                key = url.key(f".composer-write-probe-{os.getpid()}-{random.getrandbits(32):08x}")
                self._client.put_object(Bucket=self.bucket, Key=key, Body=b"")
                self._client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as e:
            raise ValueError(f"{where}: {self._explain(e, write)}") from None

    # ---- errors and retries ------------------------------------------------------------------------------------

    def _url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _endpoint(self) -> str:
        return self.options.endpoint_url or "Amazon S3"

    def _explain(self, error: BaseException, write: bool) -> str:
        """What ``error`` means for a user, and the fix; never a credential."""
        error = _root(error)
        from botocore.exceptions import (
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
            ReadTimeoutError,
        )

        chain = (
            "Credentials come from the standard AWS chain: the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "variables, AWS_PROFILE or storage_options={'profile_name': ...} with ~/.aws/credentials, or an "
            "instance role"
        )
        if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
            return f"no usable AWS credentials were found ({type(error).__name__}). {chain}."
        if isinstance(error, (ReadTimeoutError, ConnectTimeoutError)):
            return (
                f"the store at {self._endpoint()} did not answer within {self.timeout:g} s ({type(error).__name__}; "
                "a request waits at most retry_budget/8 seconds, 1 to 60). Check that the store is up and reachable; "
                "for a store that is slow to answer, raise storage_options={'retry_budget': ...}."
            )
        if isinstance(error, EndpointConnectionError):
            return (
                f"the store at {self._endpoint()} cannot be reached. Check storage_options={{'endpoint_url': ...}} "
                "(and that the store is running)."
            )
        if isinstance(error, ClientError):
            code = _code(error)
            message = error.response.get("Error", {}).get("Message", "")
            if code == "NoSuchBucket":
                return (
                    f"the bucket {self.bucket!r} does not exist at {self._endpoint()}. Create it (aws s3 mb "
                    f"s3://{self.bucket}), or fix the bucket name or storage_options={{'endpoint_url': ...}}."
                )
            if code in _CREDENTIAL_CODES:
                return (
                    f"the store refused the credentials ({code}: {message}). Check the access key and secret. {chain}."
                )
            if code in ("AccessDenied", "403", "AllAccessDisabled"):
                what = "read and write" if write else "read"
                return (
                    f"access denied ({code}{': ' + message if message else ''}). The credentials must be allowed to "
                    f"{what} objects in the bucket {self.bucket!r}. {chain}."
                )
            return f"the store answered {code}: {message}. Check the bucket, prefix and storage_options."
        if isinstance(error, _CancelledError):
            return str(error)
        return f"{type(error).__name__}: {error}. Check the URL and storage_options."

    def _retry(self, what: str, operation: Callable[[], T]) -> T:
        """Runs ``operation``, retrying transient failures with backoff until ``retry_budget`` seconds have passed.

        Another attempt starts only if one as long as the last (a hung store: its request timeouts) can end within
        the budget, so a store that hangs fails within it too."""
        budget = self.options.retry_budget
        start = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            began = time.monotonic()
            try:
                return operation()
            except Exception as e:
                now = time.monotonic()
                elapsed, room = now - start, budget - (now - start) - (now - began)
                transient = _is_transient(e)
                if not transient or room <= 0:
                    after = f" after {attempt} attempts over {elapsed:.1f} s" if attempt > 1 else ""
                    raise ObjectStoreError(
                        f"{what} failed{after}: {self._explain(e, write=True)}"
                        + (f" (retry_budget={budget:g} s)" if transient else ""),
                        code=_code(e),
                    ) from None
                delay = min(_MAX_BACKOFF, 0.1 * 2 ** (attempt - 1), room) * random.uniform(0.5, 1.0)
                log.warning("%s failed (%s); retrying in %.2f s.", what, type(e).__name__, delay)
                time.sleep(delay)


class _CancelledError(Exception):
    """An upload stopped by :meth:`S3ObjectStore.cancel_uploads`."""


def _root(error: BaseException) -> BaseException:
    """The store's own error inside the wrappers boto3's transfers raise (S3UploadFailedError chains the client
    error; RetriesExceededError keeps the last one)."""
    inner = getattr(error, "last_exception", None)
    if isinstance(inner, BaseException):
        return _root(inner)
    if type(error).__name__ == "S3UploadFailedError" and error.__context__ is not None:
        return _root(error.__context__)
    return error


def _code(error: BaseException) -> str | None:
    response = getattr(_root(error), "response", None)
    if isinstance(response, Mapping):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def _is_transient(error: BaseException) -> bool:
    """Whether retrying may cure ``error``: a connection or timeout error, throttling, or a 5xx answer."""
    from botocore.exceptions import ClientError, HTTPClientError
    from botocore.exceptions import ConnectionError as BotocoreConnectionError

    error = _root(error)
    if isinstance(error, (BotocoreConnectionError, HTTPClientError, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, ClientError):
        code = _code(error) or ""
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        throttled = status == 429 or "Throttl" in code or "SlowDown" in code
        return code not in _PERMANENT_CODES and (status >= 500 or throttled)
    return False
