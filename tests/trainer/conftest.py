"""Fixtures shared by the Trainer's tests."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as torch_dist


@pytest.fixture
def group_of_one(tmp_path: Path) -> Iterator[None]:
    """A process group of this process alone, as a script may create before building the Trainer."""
    store = torch_dist.FileStore(str(tmp_path / "store"), 1)
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        yield
    finally:
        torch_dist.destroy_process_group()
