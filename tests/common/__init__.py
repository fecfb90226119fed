"""Shared test helpers: one tiny model and dataset, and an event recorder."""

from tests.common.events import EventRecorder
from tests.common.models import SimpleModel, make_dataloader

__all__ = ["EventRecorder", "SimpleModel", "make_dataloader"]
