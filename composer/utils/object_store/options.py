"""How to reach an object store and how to move files to it: the ``storage_options`` the Trainer takes."""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.utils.object_store.url import ObjectStoreURL

__all__ = ["StorageOptions"]

# Keys people reach for to pass credentials; refused with a pointer to the standard chain, and their values are
# never shown (they would otherwise also land in every checkpoint's copy of the run's config).
_CREDENTIAL_KEYS = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "access_key", "secret_key", "key", "secret"}
)
_MB = 2**20


@dataclass(frozen=True)
class StorageOptions:
    """Settings for an S3-compatible object store (``storage_options`` of the Trainer and the uploaders).

    Credentials are not among them: boto3 reads them from the standard AWS chain (the ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` variables, ``AWS_PROFILE`` and ``~/.aws/credentials``, then an instance or container
    role), so they are never written into a checkpoint, a log or an error message.

    Args:
        endpoint_url (str, optional): The store's address, for any S3-compatible store (MinIO, Ceph, R2, a local
            ``moto_server``: ``'http://127.0.0.1:5000'``); None for Amazon S3.
        region_name (str, optional): The region; default: from the AWS configuration (``AWS_DEFAULT_REGION``), else
            ``'us-east-1'``.
        profile_name (str, optional): A named profile of ``~/.aws/credentials`` (default: ``AWS_PROFILE`` or the
            default profile).
        retry_budget (float): Seconds an operation that fails for a transient reason (the store unreachable,
            throttling, a 5xx answer) is retried, with exponential backoff, before it fails for good. It bounds a
            store that hangs as well: each request waits at most an eighth of it (1 to 60 s) for an answer, so an
            operation on a hung store fails within about the budget.
        max_pending_uploads (int): Checkpoints written locally and waiting for (or in) their upload at most; a save
            beyond that waits for the oldest upload to finish, so a slow store slows training down rather than
            fill the local disk.
        multipart_threshold_mb (float): Files from this size up are uploaded in parts (several at once), and a
            failed part is sent again alone.
        multipart_chunksize_mb (float): The size of each part (S3 needs at least 5 MB).
        max_concurrency (int): Parts in flight at once per file.
        local_folder (str, optional): Where checkpoints are written before they are uploaded, and where autoresume
            and ``load_path`` download them; default: a folder under the system's temporary folder named after the
            bucket and prefix.

    Example:
        >>> options = StorageOptions.from_input({"endpoint_url": "http://127.0.0.1:5000", "retry_budget": 5})
        >>> options.endpoint_url, options.retry_budget
        ('http://127.0.0.1:5000', 5.0)
        >>> StorageOptions.from_input({"endpoint": "http://127.0.0.1:5000"})
        Traceback (most recent call last):
        ...
        ValueError: storage_options has an unknown key 'endpoint' (did you mean 'endpoint_url'?); ...
    """

    endpoint_url: str | None = None
    region_name: str | None = None
    profile_name: str | None = None
    retry_budget: float = 120.0
    max_pending_uploads: int = 2
    multipart_threshold_mb: float = 64.0
    multipart_chunksize_mb: float = 16.0
    max_concurrency: int = 4
    local_folder: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint_url is not None and not (
            isinstance(self.endpoint_url, str) and self.endpoint_url.startswith(("http://", "https://"))
        ):
            raise ValueError(
                f"storage_options endpoint_url={self.endpoint_url!r} must be an http:// or https:// address, such as "
                "'http://127.0.0.1:5000' or 'https://s3.example.com'."
            )
        if self.endpoint_url is not None and "@" in self.endpoint_url.split("//", 1)[1].split("/", 1)[0]:
            raise ValueError(
                "storage_options endpoint_url carries credentials (user:password@); remove them: credentials come "
                "from the standard AWS chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
                "~/.aws/credentials)."
            )
        positive = {
            "retry_budget": self.retry_budget,
            "max_pending_uploads": self.max_pending_uploads,
            "multipart_threshold_mb": self.multipart_threshold_mb,
            "multipart_chunksize_mb": self.multipart_chunksize_mb,
            "max_concurrency": self.max_concurrency,
        }
        for name, value in positive.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"storage_options {name}={value!r} must be a positive number.")
        for name in ("max_pending_uploads", "max_concurrency"):
            if not isinstance(getattr(self, name), int):
                raise ValueError(f"storage_options {name}={getattr(self, name)!r} must be a whole number.")
        if self.multipart_chunksize_mb < 5:
            raise ValueError(
                f"storage_options multipart_chunksize_mb={self.multipart_chunksize_mb!r} is below S3's smallest part "
                "(5 MB); use 5 or more."
            )
        object.__setattr__(self, "retry_budget", float(self.retry_budget))

    @classmethod
    def from_input(cls, value: StorageOptions | Mapping[str, Any] | None) -> StorageOptions:
        """``value`` as StorageOptions (None: the defaults); an unknown key raises, naming the valid ones."""
        if value is None:
            return cls()
        if isinstance(value, StorageOptions):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(
                f"storage_options must be a dict (or StorageOptions), got {type(value).__name__}; for example "
                "storage_options={'endpoint_url': 'http://127.0.0.1:5000'}."
            )
        names = [field.name for field in dataclasses.fields(cls)]
        for key in value:
            if str(key).lower() in _CREDENTIAL_KEYS:
                raise ValueError(
                    f"storage_options has the key {key!r}: credentials are not passed here (they would be stored "
                    "with the run's config in every checkpoint). Set them in the standard AWS chain instead: the "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY variables, a profile in ~/.aws/credentials "
                    "(storage_options={'profile_name': ...} or AWS_PROFILE), or an instance role."
                )
            if key not in names:
                close = [n for n in names if str(key).lower() in n or n.startswith(str(key).lower()[:6])]
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"storage_options has an unknown key {key!r}{hint}; the keys are {names}.")
        return cls(**dict(value))

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults, as plain values."""
        defaults = StorageOptions()
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != getattr(defaults, field.name)
        }

    def local_folder_for(self, url: ObjectStoreURL) -> Path:
        """Where files of ``url`` are kept locally: ``local_folder`` if set, else one per bucket and prefix.

        Example:
            >>> StorageOptions(local_folder="/scratch/run1").local_folder_for(ObjectStoreURL("b", "p")).as_posix()
            '/scratch/run1'
        """
        if self.local_folder is not None:
            return Path(self.local_folder).expanduser()
        # One folder per store location, named readably, with a digest so that different endpoints never share one.
        tag = hashlib.sha256(f"{self.endpoint_url}|{url}".encode()).hexdigest()[:8]
        readable = f"{url.bucket}-{url.prefix.replace('/', '-')}"[:80].strip("-")
        return Path(tempfile.gettempdir()) / "composer-object-store" / f"{readable}-{tag}"
