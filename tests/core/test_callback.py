"""The Callback base class: its bases as the seed shows them, and its instantiability."""

from __future__ import annotations

import abc
import inspect

import torch

from composer.core.callback import Callback
from composer.core.event import Event
from composer.core.logging.logger import Logger
from composer.core.serializable import Serializable
from composer.core.state import State


def test_bases_are_serializable_then_abc() -> None:
    # Seed 002 shows ``class Callback(Serializable, abc.ABC)``: both bases, in that order.
    assert Callback.__bases__ == (Serializable, abc.ABC)
    assert isinstance(Callback, abc.ABCMeta)
    assert issubclass(Callback, abc.ABC) and issubclass(Callback, Serializable)


def test_declares_no_abstract_method_so_every_subclass_stays_instantiable() -> None:
    assert Callback.__abstractmethods__ == frozenset()
    assert not inspect.isabstract(Callback)

    class Empty(Callback):
        pass

    callback = Empty()
    assert isinstance(callback, Serializable)
    assert callback.state_dict() == {}
    callback.load_state_dict({})


def test_run_event_still_dispatches_to_the_hook_named_by_the_event() -> None:
    class Recorder(Callback):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def epoch_start(self, state: State, logger: Logger) -> None:
            self.seen.append("epoch_start")

    state = State(torch.nn.Linear(1, 1), max_duration="1ep")
    recorder = Recorder()
    for event in Event:
        recorder.run_event(event, state, Logger(state))
    assert recorder.seen == ["epoch_start"]


def test_a_subclass_may_add_abstract_hooks_of_its_own() -> None:
    # Deriving from abc.ABC means an intermediate base can declare abstract methods and have them enforced.
    class Base(Callback):
        @abc.abstractmethod
        def summary(self) -> str: ...

    class Concrete(Base):
        def summary(self) -> str:
            return "ok"

    assert inspect.isabstract(Base)
    assert Concrete().summary() == "ok"
