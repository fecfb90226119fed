"""Training progress on the console: bars on a terminal; elsewhere, plain lines at a time interval, at the end of each
epoch and after each evaluation."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.state import State
from composer.core.time import Timestamp, TimeUnit
from composer.loggers.bar_display import BarDisplay, RichDisplay, TqdmDisplay
from composer.loggers.log_value import to_builtin
from composer.loggers.optional_packages import is_package_available, require_package

__all__ = ["ProgressBarLogger", "ProgressBarLoggerHparams", "eval_title", "format_seconds"]

_BACKENDS = ("auto", "tqdm", "rich")
_LOSS = "loss/train"
_ETA = "time/eta"  # logged by the RuntimeEstimator callback: the whole run's time left, evaluations included


def format_seconds(seconds: float) -> str:
    """``MM:SS`` below an hour, ``H:MM:SS`` above (a negative or unknown time reads ``?``).

    Example:
        >>> format_seconds(65.4), format_seconds(3725), format_seconds(float("nan"))
        ('01:05', '1:02:05', '?')
    """
    if not seconds >= 0 or seconds == float("inf"):
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _number(value: Any) -> str:
    value = to_builtin(value)
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    get_ipython = getattr(shell, "get_ipython", None)
    return get_ipython is not None and "ipykernel" in sys.modules and get_ipython() is not None


class ProgressBarLogger(LoggerDestination):
    """Shows training progress: the loss, the evaluation metrics and the time left, per epoch and per evaluation.

    On a terminal (and in a notebook) it draws a bar per training epoch and per evaluation, with rich when it is
    installed and tqdm otherwise::

        Epoch 0:  100%|##########| 3/3 [00:00, ETA 00:00, loss=1.0986]
        Eval: 100%|##########| 1/1 [00:00, ETA 00:00, Accuracy=0.5000, CrossEntropy=1.0986]

    Text logged at the FIT or EPOCH level (:class:`~composer.callbacks.Generate`'s samples) is printed among them.

    Anywhere else (a log file, a CI job, captured output) it prints plain lines, never one per batch: the epoch's
    progress every ``interval_seconds``, and one line at the end of every epoch and every evaluation::

        Epoch 0: 468/468 batches, loss=1.0986, 01:40, ETA 01:40
        Eval at epoch 1, batch 468: 1/1 batches, Accuracy=0.5000, CrossEntropy=1.0986, 00:00

    The Trainer adds one unless ``progress_bar=False``; the monitoring guide says what each line shows and costs.

    Args:
        enabled (bool | None): None: bars on a terminal, lines elsewhere; True: always bars; False: nothing.
        stream (TextIO, optional): Where to write. Default: ``sys.stderr``, looked up when training starts.
        refresh_seconds (float): The least time between two redraws of a bar.
        interval_seconds (float | None): Off a terminal, the least time between two progress lines (default: 30);
            None prints only at the end of each epoch and evaluation.
        backend (str): ``'auto'`` (rich if installed, else tqdm), ``'tqdm'`` or ``'rich'``.
        time_fn (Callable[[], float]): The clock, in seconds (default: :func:`time.monotonic`); tests pass a fake.

    Example:
        >>> import io, torch
        >>> from composer import ComposerClassifier, Trainer
        >>> out, data = io.StringIO(), torch.utils.data.TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,)))
        >>> loader = torch.utils.data.DataLoader(data, batch_size=4)  # inputs and labels, 4 batches
        >>> trainer = Trainer(model=ComposerClassifier(torch.nn.Linear(8, 3), num_classes=3), train_dataloader=loader,
        ...                   eval_dataloader=loader, max_duration="1ep", loggers=[ProgressBarLogger(stream=out)],
        ...                   progress_bar=False)
        >>> trainer.fit()
        >>> trainer.close()
        >>> [line.split(":")[0] for line in out.getvalue().splitlines()]
        ['Epoch 0', 'Eval at epoch 1, batch 4']
    """

    def __init__(
        self,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        refresh_seconds: float = 0.5,
        backend: str = "auto",
        interval_seconds: float | None = 30.0,
        time_fn: Callable[[], float] = time.monotonic,
    ) -> None:
        if backend not in _BACKENDS:
            raise ValueError(f"backend={backend!r} is not supported; expected one of {list(_BACKENDS)}.")
        if backend == "rich":
            require_package("rich", "ProgressBarLogger(backend='rich')")
        if not refresh_seconds >= 0:
            raise ValueError(f"refresh_seconds={refresh_seconds!r} must be a non-negative number of seconds.")
        if interval_seconds is not None and not 0 < interval_seconds < float("inf"):
            raise ValueError(
                f"interval_seconds={interval_seconds!r} must be a positive number of seconds, or None to print only "
                "at the end of each epoch and evaluation (e.g. 30)."
            )
        self._enabled = enabled
        self._stream = stream
        self.refresh_seconds = refresh_seconds
        self.backend = backend
        self.interval_seconds = interval_seconds
        self._time_fn = time_fn
        # Off a terminal: when the next progress line within an epoch is due (every printed line moves it on).
        self._next_line = float("inf")
        self._loss_batch = -1  # the batch whose loss is in _latest (logged before the timer counts it)
        self._line_waited = False
        self._display: BarDisplay | None = None
        self._latest: dict[str, Any] = {}
        # The training bar: its handle, first batch, epoch, and when it was last drawn.
        self._train_bar: Any = None
        self._epoch_start_batch = 0
        self._epoch_index = 0
        self._next_draw = 0.0
        # Batches trained in the epoch, and how many it has (None: unknown), to know when the loss will be shown.
        self._epoch_batches = 0
        self._epoch_total: int | None = None
        # Training time of the run (for the ETA): finished epochs, plus the current one since _epoch_started_at.
        self._train_seconds = 0.0
        self._epoch_started_at: float | None = None
        self._eval_seconds_in_epoch = 0.0
        # The evaluation bar.
        self._eval_bar: Any = None
        self._eval_count = 0
        self._eval_total: int | None = None
        self._eval_started_at = 0.0
        self._next_eval_draw = 0.0
        self._in_fit = False
        self._evaluating = False
        # Metrics from evaluations inside the current epoch, shown on its bar.
        self._fresh_metrics: set[str] = set()

    # ---- configuration -----------------------------------------------------------------------------------------

    @property
    def stream(self) -> TextIO:
        """The stream written to."""
        return self._stream if self._stream is not None else sys.stderr

    @property
    def mode(self) -> str:
        """``'bars'``, ``'lines'`` or ``'off'``, from ``enabled`` and whether :attr:`stream` is a terminal."""
        if self._enabled is not None:
            return "bars" if self._enabled else "off"
        stream = self.stream
        is_terminal = bool(getattr(stream, "isatty", lambda: False)())
        if is_terminal or (_in_notebook() and stream in (sys.stderr, sys.stdout)):
            return "bars"
        return "lines"

    @property
    def enabled(self) -> bool:
        """Whether bars are drawn."""
        return self.mode == "bars"

    def _get_display(self) -> BarDisplay:
        if self._display is None:
            use_rich = self.backend == "rich" or (self.backend == "auto" and is_package_available("rich"))
            if use_rich and not _in_notebook():
                self._display = RichDisplay(self.stream, force_terminal=self._enabled is True)
            else:
                self._display = TqdmDisplay(self.stream)
        return self._display

    # ---- values ------------------------------------------------------------------------------------------------

    def will_log(self, state: State, log_level: LogLevel) -> bool:
        # FIT and EPOCH values (evaluation metrics) always; BATCH values (the loss) only when they will be shown: a
        # bar is due for a redraw, or this may be the last batch of the epoch. Declining the others spares the
        # logger (and lazily computed values) the work on most batches. An evaluation's metrics are always shown,
        # whatever their level (an evaluation every N batches logs them at BATCH level).
        if self._enabled is False:
            return False
        if log_level != LogLevel.BATCH or self._evaluating:
            return True
        if self._train_bar is not None and self._time_fn() >= self._next_draw:
            return True
        if self._train_bar is None and self._time_fn() >= self._next_line:
            return True
        total = self._epoch_total
        return total is None or self._epoch_batches + 1 >= total

    def log_metric(self, timestamp: Timestamp, log_level: LogLevel, data: dict[str, Any]) -> None:
        del log_level
        if _LOSS in data:
            self._loss_batch = int(timestamp.batch)
        self._latest.update(data)

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Prints text logged at the FIT or EPOCH level (:class:`~composer.callbacks.Generate`'s, by default) above
        the bars, or among the lines: ``<name> at epoch E, batch B:``, then the text, each line indented by two spaces.
        Text at the BATCH level is left to a :class:`~composer.loggers.ConsoleLogger` set to ``log_level='batch'``."""
        if self.mode == "off" or log_level == LogLevel.BATCH:
            return
        body = "\n".join("  " + line for line in text.splitlines() or [""])
        self._write(f"{name} at epoch {int(timestamp.epoch)}, batch {int(timestamp.batch)}:\n{body}")

    def _metrics(self, label: str) -> list[str]:
        # The evaluator's metrics by their short names: 'Accuracy=0.5000'.
        prefix = f"metrics/{label}/"
        return [f"{key.removeprefix(prefix)}={_number(v)}" for key, v in self._latest.items() if key.startswith(prefix)]

    def _train_postfix(self) -> str:
        parts = [f"loss={_number(self._latest[_LOSS])}"] if _LOSS in self._latest else []
        if _ETA in self._latest:
            parts.append(f"eta={format_seconds(float(to_builtin(self._latest[_ETA])))}")
        for key, value in self._latest.items():
            if key.startswith("metrics/") and key in self._fresh_metrics:
                parts.append(f"{key.removeprefix('metrics/')}={_number(value)}")
        return ", ".join(parts)

    # ---- training ----------------------------------------------------------------------------------------------

    def _start_epoch(self, state: State) -> None:
        timer = state.timer
        self._epoch_index = state.epoch
        self._epoch_start_batch = timer.batch.value - timer.batch_in_epoch.value
        self._epoch_started_at = self._time_fn()
        self._eval_seconds_in_epoch = 0.0
        self._fresh_metrics = set()
        total = state.steps_per_epoch
        duration = state.max_duration
        if total is not None and duration.unit == TimeUnit.BATCH:
            total = min(total, duration.value - self._epoch_start_batch)
        self._epoch_batches = timer.batch_in_epoch.value
        # Where the epoch ends, when known: a sample or token budget may end it at any batch.
        self._epoch_total = total if duration.unit in (TimeUnit.BATCH, TimeUnit.EPOCH) else None
        if self.mode != "bars":
            if self.mode == "lines" and self._next_line == float("inf") and self.interval_seconds is not None:
                self._next_line = self._epoch_started_at + self.interval_seconds
            return
        self._train_bar = self._get_display().open(f"Epoch {self._epoch_index}", total, nested=False)
        self._next_draw = self._time_fn() + self.refresh_seconds

    def epoch_start(self, state: State, logger: Logger) -> None:
        del logger
        self._start_epoch(state)

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        if self._epoch_started_at is None:
            self._start_epoch(state)  # resumed in the middle of an epoch: no EPOCH_START
        else:
            self._epoch_batches += 1
        if self._train_bar is None:
            if self._time_fn() >= self._next_line and not self._at_epoch_end():  # the epoch end prints its own line
                # A line falling due after this batch's loss was declined waits one batch, for a loss of its own.
                if self._loss_batch == state.timer.batch.value - 1 or self._line_waited:
                    self._print(self._epoch_line(state))
                else:
                    self._line_waited = True
            return
        now = self._time_fn()
        if now >= self._next_draw:
            self._next_draw = now + self.refresh_seconds
            count = state.timer.batch.value - self._epoch_start_batch
            self._get_display().update(self._train_bar, count, self._train_postfix())

    def epoch_end(self, state: State, logger: Logger) -> None:
        del logger
        if self._epoch_started_at is None:
            return
        count = state.timer.batch.value - self._epoch_start_batch
        if self._train_bar is not None:
            self._get_display().finish(self._train_bar, count, self._train_postfix())
            self._train_bar = None
        elif self.mode == "lines":
            self._print(self._epoch_line(state))
        self._train_seconds += self._epoch_seconds()
        self._epoch_started_at = None

    def _at_epoch_end(self) -> bool:
        return self._epoch_total is not None and self._epoch_batches >= self._epoch_total

    def _epoch_seconds(self) -> float:
        # Training time in the current epoch so far (evaluations inside it excluded).
        assert self._epoch_started_at is not None
        return self._time_fn() - self._epoch_started_at - self._eval_seconds_in_epoch

    def _epoch_line(self, state: State) -> str:
        count = state.timer.batch.value - self._epoch_start_batch
        total = state.steps_per_epoch
        parts = [f"{count}/{total if total is not None else '?'} batches"]
        if _LOSS in self._latest:
            parts.append(f"loss={_number(self._latest[_LOSS])}")
        epoch_seconds = self._epoch_seconds()
        parts.append(format_seconds(epoch_seconds))
        if _ETA in self._latest:  # the RuntimeEstimator's, which counts the evaluations to come
            eta = float(to_builtin(self._latest[_ETA]))
        else:
            eta = self._eta(state, self._train_seconds + epoch_seconds)
        parts.append(f"ETA {format_seconds(eta)}")
        return f"Epoch {self._epoch_index}: {', '.join(parts)}"

    @staticmethod
    def _eta(state: State, train_seconds: float) -> float:
        fraction = float(state.get_elapsed_duration().value)
        if fraction <= 0:
            return float("nan")
        return max(0.0, train_seconds * (1 - fraction) / fraction)

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._in_fit = True

    def fit_end(self, state: State, logger: Logger) -> None:
        self.epoch_end(state, logger)  # a fit that stops mid-epoch: the open epoch's bar (or line) ends here
        self._in_fit = False
        if state.stop_reason is not None and self.mode != "off":
            timer = state.timer
            self._print(
                f"Training stopped at epoch {timer.epoch.value}, batch {timer.batch.value}: {state.stop_reason}"
            )
        if self._display is not None:
            self._display.close()  # give the terminal back between fits

    # ---- evaluation --------------------------------------------------------------------------------------------

    def eval_start(self, state: State, logger: Logger) -> None:
        del logger
        self._eval_started_at = self._time_fn()
        self._eval_count = 0
        self._evaluating = True
        self._eval_total = _eval_length(state)
        if self.mode == "bars":
            nested = self._train_bar is not None
            self._eval_bar = self._get_display().open(eval_title(state.dataloader_label), self._eval_total, nested)
            self._next_eval_draw = 0.0

    def eval_batch_end(self, state: State, logger: Logger) -> None:
        del state, logger
        self._eval_count += 1
        if self._eval_bar is not None:
            now = self._time_fn()
            if now >= self._next_eval_draw:
                self._next_eval_draw = now + self.refresh_seconds
                self._get_display().update(self._eval_bar, self._eval_count, "")

    def eval_end(self, state: State, logger: Logger) -> None:
        del logger
        self._evaluating = False
        seconds = self._time_fn() - self._eval_started_at
        label = str(state.dataloader_label)
        if self._epoch_started_at is not None:  # an evaluation inside the epoch: not training time
            self._eval_seconds_in_epoch += seconds
            self._fresh_metrics.update(key for key in self._latest if key.startswith(f"metrics/{label}/"))
        metrics = self._metrics(label)
        if self._eval_bar is not None:
            self._get_display().finish(self._eval_bar, self._eval_count, ", ".join(metrics))
            self._eval_bar = None
            if self._train_bar is not None:  # show the new metrics on the training bar at once
                count = state.timer.batch.value - self._epoch_start_batch
                self._get_display().update(self._train_bar, count, self._train_postfix())
            elif not self._in_fit:  # Trainer.eval() outside fit: give the terminal back
                self._get_display().close()
        elif self.mode == "lines":
            total = self._eval_total if self._eval_total is not None else "?"
            timer = state.timer
            parts = [f"{self._eval_count}/{total} batches", *metrics, format_seconds(seconds)]
            where = f"at epoch {timer.epoch.value}, batch {timer.batch.value}"
            self._print(f"{eval_title(label)} {where}: {', '.join(parts)}")

    # ---- output ------------------------------------------------------------------------------------------------

    def _print(self, line: str) -> None:
        self._line_waited = False
        if self.interval_seconds is not None:
            self._next_line = self._time_fn() + self.interval_seconds
        self._write(line)

    def _write(self, line: str) -> None:
        if self._display is not None:
            self._display.write(line)
        else:
            print(line, file=self.stream, flush=True)

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._display is not None:
            self._display.close()
            self._display = None
        self._train_bar = self._eval_bar = None
        self._epoch_started_at = None
        self._next_line = float("inf")


def eval_title(label: Any) -> str:
    """How an evaluation is named on the console: ``'Eval'`` for the default label, else ``'Eval <label>'``.

    Example:
        >>> eval_title("eval"), eval_title("val")
        ('Eval', 'Eval val')
    """
    return "Eval" if label in (None, "eval") else f"Eval {label}"


def _eval_length(state: State) -> int | None:
    try:
        total: int | None = len(state.dataloader)  # type: ignore[arg-type]
    except TypeError:
        total = None
    for evaluator in state.evaluators:
        if evaluator.label == state.dataloader_label and evaluator.subset_num_batches is not None:
            total = evaluator.subset_num_batches if total is None else min(total, evaluator.subset_num_batches)
    return total


ProgressBarLoggerHparams = hparams_for(ProgressBarLogger)
"""See :class:`ProgressBarLogger`; the fields are its arguments (YAML key ``progress_bar``)."""
