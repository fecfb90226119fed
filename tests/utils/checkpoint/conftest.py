"""Fixtures of the checkpoint package's tests (the S3 server's are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.common.s3_server import S3Server
from tests.common.store_proxy import StoreProxy


@pytest.fixture
def proxy(s3_env: S3Server) -> Iterator[StoreProxy]:
    """A proxy in front of the session's S3 server, which a test can make hang (tests/common/store_proxy.py)."""
    proxy = StoreProxy(s3_env.endpoint_url).start()
    yield proxy
    proxy.stop()
