"""Fixtures for the whole test suite (the tiny model and dataset are in tests/common)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as torch_dist

from tests.common.s3_server import S3Server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One authenticated S3-compatible server on loopback for the session (each test makes its own bucket)."""
    pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The session's S3 server, with its credentials in the standard AWS variables for this test."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return s3_server


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """What a test registers (``composer.config.register``) is removed after it: the tests share one process."""
    from composer.config import REGISTRIES  # imports every registered class: only the tests that use this pay

    before = {kind: dict(registry) for kind, registry in REGISTRIES.items()}
    yield
    for kind, registry in REGISTRIES.items():
        registry.clear()
        registry.update(before[kind])


@pytest.fixture
def group_of_one(tmp_path: Path) -> Iterator[None]:
    """A process group of this process alone, as a script may create before building the Trainer."""
    store = torch_dist.FileStore(str(tmp_path / "store"), 1)
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        yield
    finally:
        torch_dist.destroy_process_group()
