"""An S3-compatible server on loopback for the tests: moto's server mode, with authentication turned on.

moto checks credentials only once told to: the server is started with authentication off, an IAM user with an
``s3:*`` policy and an access key are created (three IAM actions), and from then on every request must be signed
with that key, so wrong credentials are really refused. Credentials reach the code under test the standard way:
:meth:`S3Server.environment` holds the ``AWS_*`` variables to set (and turns off the instance-metadata lookup, so
that nothing ever leaves loopback).
"""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from typing import Any

__all__ = ["S3Server"]

_SETUP_ACTIONS = 3  # create_user, put_user_policy, create_access_key: free; everything after is authenticated
_ALLOW_S3 = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


class S3Server:
    """A moto S3 server on ``127.0.0.1`` (a free port), in a thread of this process, requiring credentials.

    Servers started in one process share moto's accounts (its state is per process): each creates its own user.

    Example::

        server = S3Server().start()
        bucket = server.create_bucket()
        ...  # use server.endpoint_url and server.environment()
        server.stop()
    """

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""
        self.access_key_id = ""
        self.secret_access_key = ""
        self.running = False

    def start(self) -> S3Server:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        self.running = True
        request = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/reset-auth",
            data=str(_SETUP_ACTIONS).encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(request, timeout=10).read()
        iam = self._client("iam", "setup", "setup")
        user = f"composer-tests-{uuid.uuid4().hex[:8]}"  # servers in one process share moto's accounts
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(_ALLOW_S3))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.access_key_id, self.secret_access_key = key["AccessKeyId"], key["SecretAccessKey"]
        return self

    def stop(self) -> None:
        if self.running:
            self.running = False
            self._server.stop()

    def environment(self) -> dict[str, str]:
        """The variables through which the standard AWS chain finds this server's credentials (and nothing else)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/nonexistent/composer-tests/config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/composer-tests/credentials",
            "NO_PROXY": "127.0.0.1,localhost",
        }

    def client(self) -> Any:
        """A boto3 S3 client signed with the server's valid credentials."""
        return self._client("s3", self.access_key_id, self.secret_access_key)

    def create_bucket(self, prefix: str = "bucket") -> str:
        """A new empty bucket with a unique name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys under ``prefix``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def _client(self, service: str, key_id: str, secret: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
        )
