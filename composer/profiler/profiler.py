"""The Trainer's profiler: ``torch.profiler`` traces of named ranges, and a summary of where the time went.

``Trainer(profiler=Profiler(...))`` (or ``profiler=True`` for the defaults, or a mapping of the fields, as a recipe's
``profiler:`` key gives) profiles every ``fit``. Each event (``event/BATCH_START``), each algorithm's ``apply``
(``algorithm/MixUp/AFTER_DATALOADER``), each callback handler (``callback/SpeedMonitor/BATCH_END``) and the loop's
stages (``trainer/dataloader``, ``trainer/batch``, ``trainer/forward``, ``trainer/loss``, ``trainer/backward``,
``trainer/optimizer_step``) run inside a named ``torch.profiler.record_function`` range. The torch profiler records
the steps its schedule picks (skip ``skip_first``, then ``repeat`` cycles of ``wait`` idle, ``warmup`` and ``active``
recorded steps) and writes each cycle as a Chrome trace, ``<folder>/rank<R>.<batch>.pt.trace.json``, one per rank,
which https://ui.perfetto.dev and TensorBoard's profiler plugin open. When ``fit`` ends, a
:class:`~composer.profiler.profile_summary.ProfileSummary` of all its steps is printed (rank 0) and saved next to the
traces with a bar chart (``summary-rank<R>.txt``, ``summary-rank<R>.png``).

Without a profiler nothing of this is built: the Engine and the loop run their plain code, with no check per step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch

from composer.core.state import State
from composer.profiler.profile_summary import ProfileSummary
from composer.profiler.range_timer import RangeTimer

__all__ = ["Profiler", "ProfilerSession", "resolve_profiler", "unprofiled", "unprofiled_batches"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Profiler:
    """What the Trainer's profiler records, and where it writes (see :mod:`composer.profiler.profiler`).

    Args:
        skip_first: Steps not profiled at the start of each ``fit`` (start-up, first-batch compilation).
        wait: Steps idle at the start of each cycle.
        warmup: Steps the profiler runs but discards at the start of each cycle (its own start-up cost).
        active: Steps recorded in each cycle: one trace file per cycle and rank.
        repeat: Cycles; 0 repeats them until the run ends.
        folder: Where traces, the summary and its chart go; ``{run_name}`` is filled in.
        record_shapes: Record the input shapes of each operator.
        profile_memory: Record tensor allocations and frees.
        with_stack: Record the Python stack of each operator (larger traces).
        print_summary: Print the summary table on rank 0 when ``fit`` ends (it is saved either way).

    Example:
        >>> Profiler(wait=0, warmup=1, active=2).cycle_steps
        3
        >>> Profiler(active=0)
        Traceback (most recent call last):
        ...
        ValueError: Profiler.active must be an integer >= 1 (the steps recorded per cycle), received 0.
    """

    skip_first: int = 0
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    folder: str = "profiler/{run_name}"
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    print_summary: bool = True

    def __post_init__(self) -> None:
        for name, least, meaning in (
            ("skip_first", 0, "steps skipped before the first cycle"),
            ("wait", 0, "idle steps per cycle"),
            ("warmup", 0, "warm-up steps per cycle"),
            ("active", 1, "the steps recorded per cycle"),
            ("repeat", 0, "cycles; 0 for as many as the run holds"),
        ):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ValueError(f"Profiler.{name} must be an integer >= {least} ({meaning}), received {value!r}.")
        if not isinstance(self.folder, str) or not self.folder:
            raise ValueError(
                f"Profiler.folder must be a folder path, e.g. 'profiler/{{run_name}}', received {self.folder!r}."
            )
        for name in ("record_shapes", "profile_memory", "with_stack", "print_summary"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"Profiler.{name} must be True or False, received {getattr(self, name)!r}.")

    @property
    def cycle_steps(self) -> int:
        """Steps in one cycle of the schedule: ``wait + warmup + active``."""
        return self.wait + self.warmup + self.active

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> Profiler:
        """The config from a mapping (a recipe's ``profiler``); unknown keys raise with the valid ones.

        Example:
            >>> Profiler.from_dict({"active": 2}).active
            2
            >>> Profiler.from_dict({"steps": 2})
            Traceback (most recent call last):
            ...
            ValueError: Unknown profiler key(s) ['steps']; expected some of ['skip_first', 'wait', 'warmup', ...].
        """
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(config) - set(fields))
        if unknown:
            raise ValueError(f"Unknown profiler key(s) {unknown}; expected some of {fields}.")
        return cls(**config)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values, for a run's config; :meth:`from_dict` reads it back.

        Example:
            >>> Profiler.from_dict(Profiler(active=5).to_dict()) == Profiler(active=5)
            True
        """
        return dataclasses.asdict(self)


def resolve_profiler(profiler: Profiler | Mapping[str, Any] | bool | None) -> Profiler | None:
    """The Trainer's ``profiler`` argument as a :class:`Profiler` (None: not profiling).

    Args:
        profiler (Profiler | Mapping | bool | None): A config, a mapping of its fields, True for the defaults, or
            False or None for no profiling.

    Returns:
        Profiler | None: The config, or None.

    Example:
        >>> resolve_profiler(True) == Profiler()
        True
        >>> resolve_profiler(False) is None
        True
    """
    if profiler is None or profiler is False:
        return None
    if profiler is True:
        return Profiler()
    if isinstance(profiler, Mapping):
        return Profiler.from_dict(profiler)
    if not isinstance(profiler, Profiler):
        raise TypeError(
            f"profiler must be a Profiler, a mapping of its fields, True (defaults) or None, received {profiler!r}. "
            "For example profiler=Profiler(wait=1, warmup=1, active=3)."
        )
    return profiler


def unprofiled(name: str, fn: Callable[..., T]) -> Callable[..., T]:
    """Not profiling: ``fn`` itself, run as it is (what :meth:`ProfilerSession.wrap` stands for)."""
    del name
    return fn


def unprofiled_batches(batches: Iterable[T]) -> Iterable[T]:
    """Not profiling: the epoch's batches as they are (what :meth:`ProfilerSession.batches` stands for)."""
    return batches


class ProfilerSession:
    """A Trainer's profiler at work: the named ranges, and per ``fit`` the torch profiler, its traces and the summary.

    Built by the Trainer when it is given a profiler; the Engine gets :meth:`wrap` as its instrument, and the loop
    wraps its stages with it, its batches with :meth:`batches` and each training batch with :meth:`step`.

    Args:
        config (Profiler): What to record and where.
        run_name (str): Fills ``{run_name}`` in ``config.folder``.
        rank (int): This process's rank, in the file names.
        cuda (bool): Also record CUDA kernels.

    Example:
        >>> session = ProfilerSession(Profiler(), run_name="demo", rank=0, cuda=False)
        >>> session.folder.as_posix()
        'profiler/demo'
    """

    def __init__(self, config: Profiler, run_name: str, rank: int, cuda: bool) -> None:
        self.config = config
        self.folder = Path(config.folder.format(run_name=run_name))
        self.rank = rank
        self.cuda = cuda
        self.timer = RangeTimer()
        self.summary: ProfileSummary | None = None
        self.traces: list[Path] = []
        self._profile: torch.profiler.profile | None = None
        self._state: State | None = None

    def wrap(self, name: str, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` inside the named range ``name``; see :meth:`RangeTimer.wrap`.

        Args:
            name (str): The range's name.
            fn (Callable): What to run inside it.

        Returns:
            Callable: Takes and returns what ``fn`` does.
        """
        return self.timer.wrap(name, fn)

    def batches(self, iterable: Iterable[T]) -> Iterator[T]:
        """The epoch's batches, each wait for one inside ``trainer/dataloader``.

        Args:
            iterable (Iterable): The epoch's batches.

        Returns:
            Iterator: The same batches.
        """
        return self.timer.batches(iterable)

    def step(self, train_batch: Callable[[Any], None]) -> Callable[[Any], None]:
        """``train_batch`` inside ``trainer/batch``, then one step of the torch profiler's schedule.

        Args:
            train_batch (Callable): Trains one batch.

        Returns:
            Callable: Trains one batch and advances the schedule.
        """
        ranged = self.timer.wrap("trainer/batch", train_batch)

        def profiled_batch(batch: Any) -> None:
            ranged(batch)
            if self._profile is not None:
                with warnings.catch_warnings():
                    # Its advice to keep events across cycles (acc_events) is for key_averages, which is not used here.
                    warnings.filterwarnings("ignore", ".*Profiler clears events at the end of each cycle")
                    self._profile.step()

        return profiled_batch

    @contextlib.contextmanager
    def recording(self, state: State) -> Iterator[None]:
        """Profiles the ``fit`` run inside it: the torch profiler runs, the optimizer steps are ranged, and at the end
        the summary is printed and saved with its chart (not if the fit raised: then the traces are flushed only).

        Args:
            state (State): The training state (its optimizers, its batch count for the trace names).

        Yields:
            None
        """
        config = self.config
        self.timer.reset()
        self._state = state
        self.folder.mkdir(parents=True, exist_ok=True)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profile = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(
                skip_first=config.skip_first,
                wait=config.wait,
                warmup=config.warmup,
                active=config.active,
                repeat=config.repeat,
            ),
            on_trace_ready=self._write_trace,
            record_shapes=config.record_shapes,
            profile_memory=config.profile_memory,
            with_stack=config.with_stack,
        )
        # The optimizer step in a range through torch's optimizer hooks: registered only while profiling.
        hooks = []
        for optimizer in state.optimizers:
            hooks.append(optimizer.register_step_pre_hook(lambda *_: self.timer.enter("trainer/optimizer_step")))
            hooks.append(optimizer.register_step_post_hook(lambda *_: self.timer.exit()))
        traces_before = len(self.traces)
        self._profile = profile
        profile.start()
        try:
            yield
        finally:
            self._profile = None
            profile.stop()  # a cycle cut short by the end of the run is written too
            for hook in hooks:
                hook.remove()
        if len(self.traces) == traces_before:
            log.warning(
                "The profiler wrote no trace: this fit trained fewer steps than the schedule's first cycle needs "
                "(skip_first + wait + warmup + active = %d). Lower them, or train longer.",
                config.skip_first + config.cycle_steps,
            )
        self.summary = ProfileSummary.from_totals(self.timer.totals)
        self._write_summary(self.summary)

    def _write_trace(self, profile: torch.profiler.profile) -> None:
        batch = int(self._state.timer.batch) if self._state is not None else profile.step_num
        # <worker>.<span>.pt.trace.json: the name TensorBoard's profiler plugin reads (worker = rank, span = batch).
        path = self.folder / f"rank{self.rank}.{batch}.pt.trace.json"
        profile.export_chrome_trace(str(path))
        self.traces.append(path)

    def _write_summary(self, summary: ProfileSummary) -> None:
        table = summary.table()
        (self.folder / f"summary-rank{self.rank}.txt").write_text(table + "\n")
        summary.save_chart(self.folder / f"summary-rank{self.rank}.png")
        if self.config.print_summary and self.rank == 0:
            print(table, file=sys.stdout, flush=True)
            print(f"Traces, summary and chart in {self.folder}", file=sys.stdout, flush=True)
