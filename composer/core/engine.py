"""The Engine: at every event, runs the matching algorithms and then the callbacks."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.event import Event
from composer.core.passes import order_algorithms

if TYPE_CHECKING:
    from composer.core.logging.logger import Logger
    from composer.core.state import State

__all__ = ["Engine", "Instrument", "Trace", "Traces"]

log = logging.getLogger(__name__)

_ARG_NAMES = ("event", "state", "logger")


@dataclass
class Trace:
    """What one algorithm did at one event.

    Every algorithm object has its own traces, so several instances of one class each keep their exit code.

    Args:
        name (str): The algorithm's class name; when ``state.algorithms`` holds several instances of one class, the
            second and later ones (in list order) are named ``"<Class>#2"``, ``"<Class>#3"``, ...
        event (Event): The event.
        exit_code (int | None): What ``apply`` returned.
        order (int): Its position among the algorithms that ran at this event (unique within the event).
        run (bool): Whether ``apply`` ran (always True: only algorithms that matched are traced).
    """

    name: str
    event: Event
    exit_code: int | None = None
    order: int = 0
    run: bool = True


Traces = dict[str, Trace]
"""Traces keyed ``"<Trace.name>/<EVENT_NAME>"``: ``"MixUp/AFTER_DATALOADER"``, ``"MixUp#2/AFTER_DATALOADER"``."""

_Bound = Callable[[Event, "State", "Logger"], Any]

Instrument = Callable[[str, Callable[..., Any]], Callable[..., Any]]
"""Wraps a callable in a named range: ``instrument(name, fn)`` returns a callable that does what ``fn`` does.

The :class:`Engine` hands it every event (``"event/BATCH_START"``), every algorithm's ``apply``
(``"algorithm/MixUp/AFTER_DATALOADER"``) and every callback handler (``"callback/SpeedMonitor/BATCH_END"``) once, when
it plans the event, never per call. The Trainer's profiler passes one that opens a ``torch.profiler`` range and times
it; an Engine without one wraps nothing.

Example:
    >>> calls = []
    >>> def instrument(name, fn):
    ...     def wrapped(*args):
    ...         calls.append(name)
    ...         return fn(*args)
    ...     return wrapped
    >>> engine = Engine(state, instrument=instrument)
    >>> _ = engine.run_event("fit_start")
    >>> calls
    ['event/FIT_START']
"""


def _bind(method: Callable[..., Any], abstract_order: tuple[str, ...]) -> _Bound:
    """Adapts ``method`` to be called as ``f(event, state, logger)``, binding its parameters by name.

    Parameters named ``event``, ``state`` and ``logger`` receive those values wherever they stand; a method whose
    parameters have other names receives them positionally in the base class's order (``abstract_order``).
    """
    params = [
        p
        for p in inspect.signature(method).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    names = tuple(p.name for p in params)
    takes_varargs = any(
        p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in inspect.signature(method).parameters.values()
    )
    by_name = bool(names) and all(n in _ARG_NAMES for n in names) and all(p.kind != p.POSITIONAL_ONLY for p in params)
    if by_name:
        if names == ("event", "state"):
            return lambda e, s, lg: method(e, s)
        if names == ("event", "state", "logger"):
            return method
        index = tuple(_ARG_NAMES.index(n) for n in names)
        return lambda e, s, lg: method(**{n: (e, s, lg)[i] for n, i in zip(names, index)})
    count = len(abstract_order) if takes_varargs else min(len(names), len(abstract_order))
    positions = tuple(_ARG_NAMES.index(n) for n in abstract_order[:count])
    return lambda e, s, lg: method(*((e, s, lg)[i] for i in positions))


def _run_callback_event(callback: Callback, event: Event, state: State, logger: Logger) -> None:
    callback.run_event(event, state, logger)


def _owner(call: Callable[..., Any]) -> object:
    """The callback whose handler ``call`` is (a bound method or a partial of it, maybe wrapped by an instrument)."""
    call = inspect.unwrap(call)
    return call.args[0] if isinstance(call, functools.partial) else getattr(call, "__self__", None)


def _instance_names(algorithms: Sequence[Algorithm]) -> dict[int, str]:
    """id -> the trace name of each algorithm: its class name, with ``#k`` for the k-th instance of a class (k >= 2)."""
    seen: dict[str, int] = {}
    names: dict[int, str] = {}
    for algorithm in algorithms:
        cls = type(algorithm).__name__
        seen[cls] = seen.get(cls, 0) + 1
        names[id(algorithm)] = cls if seen[cls] == 1 else f"{cls}#{seen[cls]}"
    return names


class _Plan:
    """Who to call at one event: the algorithms in their order (with match and apply bound), the callback handlers."""

    __slots__ = ("calls", "ordered")

    def __init__(self, ordered: list[tuple[str, _Bound, _Bound]], calls: list[Callable[..., Any]]) -> None:
        self.ordered = ordered
        self.calls = calls


class Engine:
    """Runs algorithms and callbacks at each :class:`~composer.core.event.Event`.

    At every event the engine asks each algorithm whether it :meth:`~Algorithm.match`-es, applies those that do in
    the order of :func:`~composer.core.passes.order_algorithms`, then runs every callback. At ``INIT`` the callbacks
    run first, so loggers exist before algorithms log. What to call at each event is worked out once and reused
    while ``state.lists_version`` (:attr:`~composer.core.state.State.lists_version`) stays the same (it moves whenever
    ``state.algorithms`` or ``state.callbacks`` change), so events nobody listens to cost next to nothing.

    An exception raised by an algorithm or callback propagates with a note naming who raised it at which event.
    :meth:`close` runs every callback's ``close`` and then ``post_close``; it is idempotent and the Trainer calls it
    even when training raises.

    Args:
        state (State): The training state; its ``algorithms`` and ``callbacks`` are read at every event.
        logger (Logger, optional): Handed to algorithms and callbacks. Defaults to a logger with no destinations.
        instrument (Instrument, optional): Wraps each event, algorithm ``apply`` and callback handler in a named range
            (the profiler's). Chosen here, once: an Engine without it runs exactly what it would otherwise run, and
            with it every event is run and wrapped, even one nobody handles (``listening`` stays True), so that the
            trace shows the whole loop.

    Attributes:
        traces (Traces): The latest :class:`Trace` of each algorithm at each event, over the whole run.
        listening (dict[Event, bool]): False for an event that last ran with nobody to call. Every entry turns True
            again when the engine finds ``state.lists_version`` moved, which it checks before and after running the
            handlers of any event (handlers are where the lists change during a run). The Trainer's per-batch loop
            skips events set False: the call would do nothing.
    """

    def __init__(self, state: State, logger: Logger | None = None, instrument: Instrument | None = None) -> None:
        if logger is None:
            from composer.core.logging.logger import Logger

            logger = Logger(state)
        self.state = state
        self.logger = logger
        self.traces: Traces = {}
        # The one cache: each event's plan, and the bound match/apply of each algorithm they share. Both hold while
        # state.lists_version equals _version, and are dropped together when it moves.
        self._plans: dict[Event, _Plan] = {}
        self._bound: dict[int, tuple[Algorithm, _Bound, _Bound]] = {}
        self._version = -1
        self._closed = False
        # listening[event] is False once the event ran and found nobody to call, until the cache is dropped. A loop
        # may skip run_event where it is False: the call would do nothing.
        self.listening: dict[Event, bool] = dict.fromkeys(Event, True)
        self._instrument = instrument
        if instrument is not None:
            # Decided once: an Engine without an instrument keeps the plain run_event, with no check per call.
            runs = {e: instrument(f"event/{e.name}", functools.partial(Engine.run_event, self, e)) for e in Event}
            listening = self.listening

            def run_instrumented(event: Event | str) -> Traces:
                if type(event) is not Event:
                    event = Event(event)
                traces: Traces = runs[event]()
                listening[event] = True  # the trainer keeps calling it, so that every event shows in the trace
                return traces

            self.run_event = run_instrumented  # type: ignore[method-assign]

    def run_event(self, event: Event | str) -> Traces:
        """Runs the algorithms and callbacks for ``event``.

        Args:
            event (Event | str): The event, or its name or value.

        Returns:
            Traces: The traces of the algorithms that ran at this event.
        """
        if type(event) is not Event:
            event = Event(event)
        state = self.state
        if state.lists_version != self._version:
            self._drop_cache()
        plan = self._plans.get(event)
        if plan is None:
            plan = self._plans[event] = self._make_plan(event)
        if not plan.ordered and not plan.calls:
            self.listening[event] = False
            return {}
        logger = self.logger
        traces: Traces = {}
        try:
            if plan.ordered and event is not Event.INIT:
                traces = self._run_algorithms(plan, event, state, logger)
            for call in plan.calls:  # inline, not a method: this runs at every event that someone handles
                try:
                    call(state, logger)
                except Exception as e:
                    e.add_note(f"Raised by callback {type(_owner(call)).__name__} at Event.{event.name}.")
                    raise
            if event is Event.INIT:  # at INIT the callbacks run first, so that loggers exist before algorithms log
                traces = self._run_algorithms(plan, event, state, logger)
        finally:
            # A handler that changed the lists may have given a quiet event someone to call: a loop that skips quiet
            # events must hear of it before the next event, so the cache is dropped now rather than at that event.
            if state.lists_version != self._version:
                self._drop_cache()
        return traces

    def _drop_cache(self) -> None:
        self._plans.clear()
        self._bound.clear()
        self._version = self.state.lists_version
        # Until each event runs again and finds out, assume someone handles it.
        listening = self.listening
        for event in listening:
            listening[event] = True

    def _run_algorithms(self, plan: _Plan, event: Event, state: State, logger: Logger) -> Traces:
        traces: Traces = {}
        for name, match, apply in plan.ordered:
            try:
                if not match(event, state, logger):
                    continue
                exit_code = apply(event, state, logger)
            except Exception as e:
                e.add_note(f"Raised by algorithm {name} at Event.{event.name}.")
                raise
            trace = Trace(name=name, event=event, exit_code=exit_code, order=len(traces))
            traces[f"{name}/{event.name}"] = trace
        if traces:
            self.traces.update(traces)
        return traces

    def _make_plan(self, event: Event) -> _Plan:
        algorithms, callbacks = self.state.algorithms, self.state.callbacks
        names = _instance_names(algorithms)
        instrument = self._instrument
        ordered: list[tuple[str, _Bound, _Bound]] = []
        for algorithm in order_algorithms(algorithms, event):
            _, match, apply = self._bind_algorithm(algorithm)
            name = names[id(algorithm)]
            if instrument is not None:
                apply = instrument(f"algorithm/{name}/{event.name}", apply)
            ordered.append((name, match, apply))
        calls: list[Callable[..., Any]] = []
        for callback in callbacks:
            cls = type(callback)
            call: Callable[..., Any]
            if cls.run_event is not Callback.run_event:
                call = functools.partial(_run_callback_event, callback, event)
            elif getattr(cls, event.value) is not getattr(Callback, event.value):
                call = getattr(callback, event.value)
            else:
                continue
            calls.append(call if instrument is None else instrument(f"callback/{cls.__name__}/{event.name}", call))
        return _Plan(ordered, calls)

    def _bind_algorithm(self, algorithm: Algorithm) -> tuple[Algorithm, _Bound, _Bound]:
        # Signatures are inspected once per algorithm object while the cache holds (kept alive here, so ids stay
        # unique).
        bound = self._bound.get(id(algorithm))
        if bound is None or bound[0] is not algorithm:
            bound = (
                algorithm,
                _bind(algorithm.match, ("event", "state")),
                _bind(algorithm.apply, ("event", "state", "logger")),
            )
            self._bound[id(algorithm)] = bound
        return bound

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def close(self) -> None:
        """Runs ``close(state, logger)`` on every callback, then ``post_close()`` on those whose close succeeded.

        Errors are logged, not raised, so one failing callback does not keep the others from closing. Calling it
        again does nothing.
        """
        if self._closed:
            return
        self._closed = True
        closed: list[Callback] = []
        for callback in self.state.callbacks:
            try:
                callback.close(self.state, self.logger)
            except Exception:
                log.exception("Callback %s raised in close(); skipping its post_close().", type(callback).__name__)
            else:
                closed.append(callback)
        for callback in closed:
            try:
                callback.post_close()
            except Exception:
                log.exception("Callback %s raised in post_close().", type(callback).__name__)
