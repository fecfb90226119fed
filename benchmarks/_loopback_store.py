"""The benchmarks' S3-compatible store on loopback: a moto server in a subprocess, and folders uploaded to it.

Imported by the benchmark scripts next to it (``python benchmarks/<name>.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from _torchrun import free_port  # benchmarks/_torchrun.py, next to this

__all__ = ["loopback_store", "start_moto", "upload_folder"]


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """A moto server on a free 127.0.0.1 port, as a subprocess at nice 10 (it stands in for a store on another
    machine, whose work is not the measured machine's cost), and its endpoint URL, once it answers."""
    port = free_port()
    server = subprocess.Popen(
        ["nice", "-n", "10", str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).read()
            return server, endpoint
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("moto_server did not start; is moto[server] installed (the dev extra)?")


@contextlib.contextmanager
def loopback_store() -> Iterator[str]:
    """A moto server (:func:`start_moto`) for the body, which gets its endpoint URL; stopped after. The standard AWS
    variables default to moto's dummy credentials in this process (and so in its workers)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    server, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


def upload_folder(endpoint: str, folder: Path, bucket: str, prefix: str) -> str:
    """Uploads the files of ``folder`` to ``s3://bucket/prefix/`` (creating the bucket); returns that URL."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=bucket)
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), bucket, f"{prefix}/{path.name}")
    return f"s3://{bucket}/{prefix}"
