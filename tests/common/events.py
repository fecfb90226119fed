"""A callback that records every event it sees."""

from __future__ import annotations

from composer.core import Callback, Event, Logger, State

__all__ = ["EventRecorder"]


class EventRecorder(Callback):
    """Records ``(event, batch, epoch)`` at every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.times: list[tuple[Event, int, int]] = []

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        self.events.append(event)
        self.times.append((event, int(state.timer.batch), int(state.timer.epoch)))
