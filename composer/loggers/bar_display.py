"""Drawing progress bars on a terminal, with tqdm or rich; :class:`ProgressBarLogger` decides what they show."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol, TextIO

__all__ = ["BarDisplay", "RichDisplay", "TqdmDisplay"]


class BarDisplay(Protocol):
    """Where bars are drawn. A bar is opened, moved to a count with a text after it, and finished.

    Bars are redrawn only when :meth:`update` or :meth:`finish` is called: the caller decides how often.
    """

    def open(self, description: str, total: int | None, nested: bool) -> Any:
        """Starts a bar and returns its handle; a ``nested`` bar is drawn under the current one and not kept."""
        ...

    def update(self, bar: Any, count: int, postfix: str) -> None:
        """Sets the bar's count and the text after it, and redraws."""
        ...

    def finish(self, bar: Any, count: int, postfix: str) -> None:
        """Draws the final state; a top-level bar stays on the screen, a nested one disappears."""
        ...

    def write(self, line: str) -> None:
        """Prints ``line`` above the bars."""
        ...

    def close(self) -> None:
        """Removes every open bar and releases the terminal (at the end of ``fit``, after an error); bars may be
        opened again afterwards."""
        ...


class TqdmDisplay:
    """Bars drawn with tqdm: ``Epoch 0:  67%|######    | 2/3 [00:01, ETA 00:00, loss=1.0986]``.

    Args:
        stream (TextIO): Where to draw.
    """

    _FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, ETA {remaining}{postfix}]"
    _FORMAT_NO_TOTAL = "{desc}: {n_fmt} [{elapsed}, {rate_fmt}{postfix}]"

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._open: list[Any] = []

    def open(self, description: str, total: int | None, nested: bool) -> Any:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total,
            desc=description,
            position=1 if nested else 0,
            leave=not nested,
            file=self.stream,
            dynamic_ncols=True,
            mininterval=0,  # the caller throttles redraws
            bar_format=self._FORMAT if total is not None else self._FORMAT_NO_TOTAL,
        )
        self._open.append(bar)
        return bar

    def update(self, bar: Any, count: int, postfix: str) -> None:
        bar.set_postfix_str(postfix, refresh=False)
        bar.update(count - bar.n)

    def finish(self, bar: Any, count: int, postfix: str) -> None:
        bar.set_postfix_str(postfix, refresh=False)
        bar.update(count - bar.n)
        bar.close()
        if bar in self._open:
            self._open.remove(bar)

    def write(self, line: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(line, file=self.stream)

    def close(self) -> None:
        for bar in reversed(self._open):
            bar.close()
        self._open.clear()


class RichDisplay:
    """Bars drawn with rich, one row per open bar; a finished top-level bar stays as a line of text.

    Args:
        stream (TextIO): Where to draw.
        force_terminal (bool): Draw even when ``stream`` is not a terminal.
    """

    def __init__(self, stream: TextIO, force_terminal: bool = False) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(file=stream, force_terminal=True if force_terminal else None, soft_wrap=False)
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[postfix]}", markup=False),
            console=console,
            auto_refresh=False,  # no drawing thread: the caller throttles redraws
            transient=True,  # finished bars are printed as lines instead (see finish)
            redirect_stdout=False,  # leave sys.stdout and sys.stderr alone
            redirect_stderr=False,
        )
        self._started = False

    def open(self, description: str, total: int | None, nested: bool) -> Any:
        task = self._progress.add_task(description, total=total, postfix="")
        return (task, nested)

    def update(self, bar: Any, count: int, postfix: str) -> None:
        task, _ = bar
        self._progress.update(task, completed=count, postfix=postfix)
        if self._started:
            self._progress.refresh()
        else:
            # The live display starts at the first redraw, so a bar shorter than the redraw interval costs only
            # its final line.
            self._progress.start()
            self._started = True

    def finish(self, bar: Any, count: int, postfix: str) -> None:
        task, nested = bar
        progress = self._progress
        progress.update(task, completed=count, postfix=postfix)
        line = None if nested else self._final_line(task)
        progress.remove_task(task)
        if self._started and not progress.tasks:
            progress.stop()
            self._started = False
        elif self._started:
            progress.refresh()
        if line is not None:
            progress.console.print(line, soft_wrap=True)  # the terminal wraps a long line; rich would split it

    def _final_line(self, task_id: Any) -> Any:
        # The finished bar as one line of styled text (far cheaper to print than a rendered progress row).
        from rich.text import Text

        task = next(t for t in self._progress.tasks if t.id == task_id)
        total = "?" if task.total is None else f"{int(task.total)}"
        elapsed = str(timedelta(seconds=int(task.elapsed or 0)))
        postfix = task.fields.get("postfix", "")
        return Text.assemble(
            f"{task.description} ",
            ("━" * 24, "bar.finished"),
            " ",
            (f"{int(task.completed)}/{total}", "progress.download"),
            " ",
            (elapsed, "progress.elapsed"),
            " ETA ",
            ("0:00:00", "progress.remaining"),
            f" {postfix}" if postfix else "",
        )

    def write(self, line: str) -> None:
        self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self._started:
            for task in list(self._progress.task_ids):
                self._progress.remove_task(task)
            self._progress.stop()
            self._started = False
