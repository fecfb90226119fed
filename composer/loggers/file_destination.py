"""The base of destinations that write one local file, and the file handling they share.

A :class:`FileDestination` fills its file name at INIT, decides at FIT_START (once a checkpoint, if any, is loaded)
whether this run starts the file or continues it, opens it at the first write, and saves in a checkpoint how many
records the file holds, so that a resumed run cuts what the interrupted run wrote after the checkpoint.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import IO, Any, ClassVar

from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time
from composer.loggers.buffered_destination import BufferedDestination
from composer.loggers.log_path import check_writable, fill_log_path

__all__ = ["FileDestination", "open_mode", "rewrite_atomically", "warn_if_short"]


class FileDestination(BufferedDestination):
    """A buffered destination that writes one file: ``filename`` with ``{run_name}``, ``{rank}``, ... filled in.

    Subclasses implement :meth:`keep_records` (cut the file to what a checkpoint counted) and ``write``, which opens
    the file with :meth:`open_file` at its first call. The arguments are :class:`BufferedDestination`'s, plus
    ``filename`` and ``overwrite`` (replace a file a fresh run finds; without it the run refuses to start).
    """

    count_key: ClassVar[str] = "records"
    """The key under which a checkpoint saves how many records the file holds (``rows``, ``lines``)."""

    def __init__(
        self,
        filename: str | os.PathLike[str],
        log_level: LogLevel | str,
        log_interval: str | Time[Any] | int,
        flush_interval: int,
        overwrite: bool,
    ) -> None:
        super().__init__(log_level, log_interval, flush_interval)
        self._pattern = str(filename)
        self.filename = check_writable(filename, "filename", is_dir=False)
        self.overwrite = overwrite
        self._file: IO[str] | None = None
        self._state: State | None = None  # between INIT and close: records are written (the file opened at the first)
        self._mode: str | None = None  # how the file is opened, once fresh-or-resumed is settled: "w", "x" or "a"
        self._count = 0  # records of this run's output in the file (what a checkpoint saves)

    def keep_records(self, path: Path, resumed_from: dict[str, Any] | None) -> int:
        """Cuts ``path`` to the records the checkpoint counted (all without a count); returns how many it holds."""
        raise NotImplementedError(f"{type(self).__name__} must implement keep_records(path, resumed_from).")

    def init(self, state: State, logger: Logger) -> None:
        del logger
        if self._state is None:  # a second Trainer built with the same destination keeps appending
            self.filename = fill_log_path(self._pattern, state, "filename")
            Path(self.filename).parent.mkdir(parents=True, exist_ok=True)
            self._state = state

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        if self._state is not None and self._mode is None:
            self._settle(state)

    def _settle(self, state: State) -> None:
        """Decides, once the checkpoint (if any) is loaded, whether this run starts the file or continues it."""
        resuming = self.resumed_from is not None or int(state.timer.batch) > 0
        if resuming:
            self._count = self.keep_records(self.filename, self.resumed_from)
        self._mode = open_mode(self.filename, self.overwrite, resuming)

    def resume_state(self) -> dict[str, Any]:
        return {self.count_key: self._count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._count = int(state.get(self.count_key, 0))  # until the file is settled at FIT_START (what it holds)

    def open_file(self, state: State) -> IO[str]:
        """Opens the file: fresh, or appended to when the run resumes (settled now if FIT_START has not)."""
        if self._mode is None:
            self._settle(state)
        assert self._mode is not None
        try:
            self._file = open(self.filename, self._mode, encoding="utf-8", newline="")  # noqa: SIM115
        except OSError as error:
            raise ValueError(
                f"filename={str(self.filename)!r} cannot be opened for writing ({error}); choose another path."
            ) from error
        return self._file

    def flush(self) -> None:
        super().flush()
        if self._file is not None:
            self._file.flush()

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        self._state = self._mode = None
        if self._file is not None:
            self._file.close()
            self._file = None


def open_mode(path: Path, overwrite: bool, resuming: bool) -> str:
    """The mode a file destination opens ``path`` in: ``'a'`` to continue a resumed run, else ``'w'``/``'x'``.

    Raises:
        ValueError: If a fresh run would replace an existing file without ``overwrite``.
    """
    if resuming:
        return "a"
    if path.exists() and not overwrite:
        raise ValueError(
            f"filename={str(path)!r} already exists and this run starts fresh (no checkpoint was loaded); pass "
            "overwrite=True to replace it, choose a new name, or resume the run that wrote it (autoresume=True with "
            "its save_folder and run_name)."
        )
    return "w" if overwrite else "x"


def warn_if_short(argument: str, path: Path, found: int, wanted: int | None, unit: str) -> None:
    """Warns when a resumed file holds fewer records (``unit``) than the checkpoint counted."""
    if wanted is not None and found < wanted:
        warnings.warn(
            f"{argument}={str(path)!r} holds {found} {unit}, but the checkpoint this run resumes from was saved after "
            f"{wanted}; the missing ones are not written again. The run continues the file from here.",
            stacklevel=4,
        )


def rewrite_atomically(path: Path, text: str) -> None:
    """Replaces ``path``'s content with ``text`` through a temporary file in the same folder and a rename."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8", newline="") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
