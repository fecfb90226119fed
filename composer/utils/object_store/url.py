"""Where checkpoints and logs go: a local path, a ``file://`` URL, or an ``s3://bucket/prefix`` URL.

:func:`parse_location` turns what a user typed into either a local :class:`~pathlib.Path` or an
:class:`ObjectStoreURL`, and refuses everything else at once, naming the argument, the value and the fix: an unknown
scheme (``gs://``, ``ftp://``, ``http://``), a malformed URL (no bucket, an invalid bucket name, a query string),
or credentials written into the URL. Values are shown with any ``user:password@`` part masked, so a secret typed
into a URL never reaches a message or a log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["SUPPORTED_SCHEMES", "ObjectStoreURL", "is_url", "parse_location", "redact"]

SUPPORTED_SCHEMES = ("s3", "file")

# A scheme of two or more letters followed by ':' and a slash ('C:/x' is a Windows drive, not a URL).
_URL_START = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+):/")
# S3's rules for bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or
# a digit, and not shaped like an IP address.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^[0-9]+(\.[0-9]+){3}$")
_FIX_BY_SCHEME = {
    "gs": (
        "Google Cloud Storage speaks the S3 protocol: use s3://BUCKET/PREFIX with "
        "storage_options={'endpoint_url': 'https://storage.googleapis.com'} and HMAC keys in the standard AWS "
        "credential variables"
    ),
    "http": "an HTTP URL is not a storage location; use s3://BUCKET/PREFIX with storage_options={'endpoint_url': ...}",
    "https": "an HTTP URL is not a storage location; use s3://BUCKET/PREFIX with storage_options={'endpoint_url': ...}",
    "s3a": "write s3:// (s3a:// is Hadoop's name for the same store)",
    "s3n": "write s3:// (s3n:// is Hadoop's name for the same store)",
}


@dataclass(frozen=True)
class ObjectStoreURL:
    """A folder in an S3-compatible object store: ``s3://bucket/prefix``.

    Args:
        bucket (str): The bucket.
        prefix (str): The folder inside it, without leading or trailing ``/`` (``''``: the bucket's root).

    Example:
        >>> url = ObjectStoreURL("ckpt-bucket", "runs/demo")
        >>> url.key("ep1-ba6-rank0.pt"), str(url)
        ('runs/demo/ep1-ba6-rank0.pt', 's3://ckpt-bucket/runs/demo')
        >>> url.name_of("runs/demo/sub/ep1-ba6-rank0.pt")
        'sub/ep1-ba6-rank0.pt'
    """

    bucket: str
    prefix: str = ""

    def key(self, name: str) -> str:
        """The object key of ``name`` (a path relative to this folder, with ``/`` separators)."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def name_of(self, key: str) -> str:
        """The path of ``key`` relative to this folder (the inverse of :meth:`key`)."""
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def join(self, name: str) -> ObjectStoreURL:
        """The URL of ``name`` inside this folder."""
        return ObjectStoreURL(self.bucket, self.key(name.strip("/")))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def is_url(value: object) -> bool:
    """Whether ``value`` is written as a URL (``scheme://...``) rather than as a local path.

    Args:
        value (object): What the user gave (a string, a Path, anything).

    Returns:
        bool: True for a string that starts with ``scheme://``.

    Example:
        >>> is_url("s3://bucket/runs"), is_url("gs://bucket"), is_url("runs/{run_name}"), is_url("C:/runs")
        (True, True, False, False)
    """
    return isinstance(value, str) and _URL_START.match(value) is not None


def redact(value: str) -> str:
    """``value`` with the ``user:password@`` part of a URL masked, for messages and logs.

    Args:
        value (str): A URL or a path.

    Returns:
        str: ``value`` itself, or with its credentials replaced by ``***``.

    Example:
        >>> redact("s3://AKIAEXAMPLE:secret@bucket/runs")
        's3://***@bucket/runs'
    """
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^/@]*@)", value)
    return value if match is None else match.group(1) + "***@" + value[match.end() :]


def parse_location(value: str | Path, argument: str) -> Path | ObjectStoreURL:
    """A local path for a plain path or a ``file://`` URL; an :class:`ObjectStoreURL` for ``s3://bucket/prefix``.

    Args:
        value (str | Path): What the user gave.
        argument (str): The parameter that took it (``'save_folder'``, ``'load_path'``, ...), for the messages.

    Raises:
        ValueError: For any other scheme, a malformed URL, or a URL that carries credentials; the message names the
            argument, shows the value (credentials masked) and says what to write instead.

    Returns:
        Path | ObjectStoreURL: The local folder or file, or the bucket and prefix in the store.

    Example:
        >>> parse_location("s3://ckpt-bucket/runs/{run_name}/", "save_folder")
        ObjectStoreURL(bucket='ckpt-bucket', prefix='runs/{run_name}')
        >>> folder = Path.cwd() / "runs"
        >>> parse_location(folder.as_uri(), "save_folder") == folder  # file:// URLs are local paths
        True
        >>> parse_location("gs://ckpt-bucket/runs", "save_folder")
        Traceback (most recent call last):
        ...
        ValueError: save_folder='gs://ckpt-bucket/runs' uses the scheme 'gs://', which is not supported ...
    """
    if isinstance(value, Path) or not is_url(value):
        return Path(value)
    shown = redact(value)

    def refuse(problem: str, fix: str) -> ValueError:
        return ValueError(f"{argument}={shown!r} {problem}. {fix}.")

    scheme = value.split(":", 1)[0].lower()
    if scheme not in SUPPORTED_SCHEMES:
        fix = _FIX_BY_SCHEME.get(scheme, "Use a local path, file:///ABSOLUTE/PATH, or s3://BUCKET/PREFIX")
        raise refuse(
            f"uses the scheme '{scheme}://', which is not supported (supported: a local path, "
            + ", ".join(f"{s}://" for s in SUPPORTED_SCHEMES)
            + "; s3:// covers any S3-compatible store through storage_options={'endpoint_url': ...})",
            fix[0].upper() + fix[1:],
        )
    if not value.lower().startswith(f"{scheme}://"):
        raise refuse("is malformed (one slash after the scheme)", f"Write {scheme}:// with two slashes")
    parts = urlsplit(value)
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise refuse(
            "has a query string or a fragment ('?' or '#')", "Remove it: the location is the scheme, bucket and path"
        )
    if "@" in parts.netloc:
        raise refuse(
            "carries credentials in the URL",
            "Remove them: credentials come from the standard AWS chain (the AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY variables, AWS_PROFILE, ~/.aws/credentials, or an instance role), so that they "
            "are never stored in checkpoints or logs",
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise refuse(
                f"names the host {parts.netloc!r}; a file:// URL is a path on this machine",
                "Write file:///ABSOLUTE/PATH (three slashes), or a plain path (relative paths are relative to the "
                "working directory)",
            )
        return Path(unquote(parts.path))
    bucket, prefix = parts.netloc, unquote(parts.path).strip("/")
    if not bucket:
        raise refuse("has no bucket", "Write s3://BUCKET/PREFIX, for example s3://my-bucket/checkpoints/{run_name}")
    if not _BUCKET.match(bucket) or _IP_ADDRESS.match(bucket) or ".." in bucket:
        raise refuse(
            f"has an invalid bucket name {bucket!r}",
            "Bucket names are 3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a "
            "letter or a digit (an endpoint's host and port go in storage_options={'endpoint_url': ...}, not in "
            "the URL)",
        )
    if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise refuse("has an empty, '.' or '..' path segment", "Write the prefix as plain names separated by '/'")
    return ObjectStoreURL(bucket, prefix)
