"""Fixtures of the checkpoint package's tests (the S3 server's are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.common.s3_server import S3Server
from tests.common.store_proxy import StoreProxy


@pytest.fixture
def proxy(s3_env: S3Server) -> Iterator[StoreProxy]:
    """A proxy in front of the session's S3 server, which a test can make hang (tests/common/store_proxy.py)."""
    proxy = StoreProxy(s3_env.endpoint_url).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="session")
def sharded_store_job(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """The 2-node job of sharded checkpoints in the store (tests/utils/checkpoint/sharded_store_job.py), once a
    session: its tests are in test_sharded_uploads.py and test_sharded_mirror.py."""
    from tests.utils.checkpoint.sharded_store_job import run_store_job  # imports torch: only where it is used

    return run_store_job(s3_server, tmp_path_factory.mktemp("sharded_remote"))


@pytest.fixture(scope="session")
def sharded_outage_job(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """The 2-node job whose store goes down (tests/utils/checkpoint/sharded_outage_job.py), once a session: its
    tests are in test_sharded_uploads.py and test_sharded_mirror.py."""
    from tests.utils.checkpoint.sharded_outage_job import run_outage_job  # imports torch: only where it is used

    return run_outage_job(s3_server, tmp_path_factory.mktemp("sharded_faults"))
