import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from composer import Trainer
from composer.callbacks import EarlyStopper
from composer.core import Callback
from composer.loggers import ConsoleLogger, InMemoryLogger, ProgressBarLogger, ProgressBarLoggerHparams
from composer.loggers.optional_packages import is_package_available
from tests.common import SimpleModel, make_dataloader

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BACKENDS = ["tqdm", pytest.param("rich", marks=pytest.mark.skipif(not is_package_available("rich"), reason="no rich"))]


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def train(*loggers, max_duration="2ep", callbacks=(), lr=0.1, eval_dataloader=None, train_samples=12, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=train_samples, batch_size=4),
        eval_dataloader=eval_dataloader if eval_dataloader is not None else make_dataloader(num_samples=4, seed=1),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=lr),
        loggers=list(loggers),
        callbacks=list(callbacks),
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    trainer.close()
    return trainer


@pytest.mark.parametrize("backend", BACKENDS)
def test_draws_epoch_and_eval_bars_on_a_terminal(backend):
    stream = FakeTerminal()
    train(ProgressBarLogger(stream=stream, refresh_seconds=0.0, backend=backend))
    out = ANSI.sub("", stream.getvalue())
    assert "Epoch 0" in out and "Epoch 1" in out
    assert "3/3" in out  # three batches per epoch
    assert re.search(r"\bEval\b", out) and "Eval eval" not in out and "1/1" in out
    assert re.search(r"loss=\d\.\d{4}", out)
    assert re.search(r"Accuracy=\d\.\d{4}, CrossEntropy=\d\.\d{4}", out)
    assert "ETA" in out


def test_bars_are_redrawn_at_most_every_refresh_seconds():
    stream = FakeTerminal()
    train(ProgressBarLogger(stream=stream, refresh_seconds=3600, backend="tqdm"))
    # Each epoch bar is drawn when opened, at the first batch, and when finished (twice: update and close): never
    # once per batch.
    draws = stream.getvalue().count("Epoch 0:")
    assert draws <= 4


def test_plain_lines_outside_a_terminal_only_at_epoch_and_eval_ends():
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream))
    lines = stream.getvalue().splitlines()
    number = r"\d\.\d{4}"
    patterns = [
        rf"Epoch 0: 3/3 batches, loss={number}, \d\d:\d\d, ETA \d\d:\d\d",
        rf"Eval at epoch 1, batch 3: 1/1 batches, Accuracy={number}, CrossEntropy={number}, \d\d:\d\d",
        rf"Epoch 1: 3/3 batches, loss={number}, \d\d:\d\d, ETA 00:00",
        rf"Eval at epoch 2, batch 6: 1/1 batches, Accuracy={number}, CrossEntropy={number}, \d\d:\d\d",
    ]
    assert len(lines) == len(patterns)
    for line, pattern in zip(lines, patterns):
        assert re.fullmatch(pattern, line), line


def test_a_run_that_stops_mid_epoch_prints_the_open_epoch_at_its_end():
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream), max_duration="4ba")  # 3 batches an epoch: the second stays open
    heads = [line.split(":")[0] for line in stream.getvalue().splitlines()]
    assert heads == ["Epoch 0", "Eval at epoch 1, batch 3", "Eval at epoch 1, batch 4", "Epoch 1"]
    assert stream.getvalue().splitlines()[-1].startswith("Epoch 1: 1/3 batches")


def test_plain_lines_with_evaluation_every_two_batches():
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream), eval_interval="2ba")
    heads = [line.split(":")[0] for line in stream.getvalue().splitlines()]
    assert heads == [
        "Eval at epoch 0, batch 2",
        "Epoch 0",
        "Eval at epoch 1, batch 4",
        "Eval at epoch 1, batch 6",
        "Epoch 1",
    ]


def test_an_evaluation_early_in_a_long_epoch_shows_its_metrics():
    # Metrics of an evaluation every N batches are logged at BATCH level; the logger must not decline them as it
    # declines the losses of batches it will not show.
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream), eval_interval="2ba", max_duration="1ep", train_samples=32)
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("Eval")]
    assert [line.split(":")[0] for line in lines] == [f"Eval at epoch 0, batch {b}" for b in (2, 4, 6, 8)]
    number = r"\d\.\d{4}"
    for line in lines:
        assert re.search(rf"1/1 batches, Accuracy={number}, CrossEntropy={number}, ", line), line


class FakeClock(Callback):
    """A time function for the logger, moved on by ``step`` seconds at the start of every training batch."""

    def __init__(self, step):
        self.step = step
        self.now = 1000.0

    def __call__(self):
        return self.now

    def batch_start(self, state, logger):
        self.now += self.step


def test_plain_lines_also_every_interval_seconds_within_an_epoch():
    # 12 batches an epoch, 10 (fake) seconds each: a line when 30 s have passed since the last (batches 3, 6, 9),
    # and the epoch line at its end (batch 12, not repeated as an interval line). No sleeping.
    clock = FakeClock(step=10.0)
    stream = io.StringIO()
    memory = InMemoryLogger()
    bar = ProgressBarLogger(stream=stream, interval_seconds=30, time_fn=clock)
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=48, batch_size=4),
        max_duration="2ep",
        loggers=[bar, memory],
        callbacks=[clock],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    trainer.close()
    lines = stream.getvalue().splitlines()
    losses = {int(t.batch): float(v) for t, _, v in memory.data["loss/train"]}  # batch index -> its loss
    expected = []
    for epoch in range(2):
        for count, seconds in [(3, 30), (6, 60), (9, 90), (12, 120)]:
            batch = epoch * 12 + count
            done = batch / 24
            eta = round(10 * batch * (1 - done) / done)  # training seconds so far, scaled to what is left
            expected.append(
                f"Epoch {epoch}: {count}/12 batches, loss={losses[batch - 1]:.4f}, "
                f"{seconds // 60:02d}:{seconds % 60:02d}, ETA {eta // 60:02d}:{eta % 60:02d}"
            )
    assert lines == expected


def test_an_interval_line_shows_the_loss_of_its_own_batch():
    # The line falls due after batch 2's loss was declined (not due yet) but before its BATCH_END: it waits for
    # batch 3, whose loss it shows, rather than show batch 0's.
    from composer.core import State
    from composer.core.logging.logger import Logger

    now = [0.0]
    state = State(model=torch.nn.Linear(1, 1), max_duration="10ba", steps_per_epoch=10)
    stream = io.StringIO()
    bar = ProgressBarLogger(stream=stream, interval_seconds=30, time_fn=lambda: now[0])
    logger = Logger(state, [bar])
    bar.epoch_start(state, logger)
    for batch, (seconds_at_loss, seconds_at_end) in enumerate([(0, 1), (10, 11), (29, 31), (40, 42)]):
        now[0] = seconds_at_loss
        logger.metric_batch({"loss/train": float(batch)})
        state.timer.on_batch_complete(4)
        now[0] = seconds_at_end
        bar.batch_end(state, logger)
    assert stream.getvalue().splitlines() == ["Epoch 0: 4/10 batches, loss=3.0000, 00:42, ETA 01:03"]


def test_interval_seconds_none_prints_only_at_epoch_ends():
    clock = FakeClock(step=100.0)
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream, interval_seconds=None, time_fn=clock), callbacks=[clock])
    assert [line.split(" ")[0] for line in stream.getvalue().splitlines()] == ["Epoch", "Eval", "Epoch", "Eval"]


def test_the_default_trainer_prints_epoch_lines_on_stderr_and_nothing_on_stdout(capsys):
    torch.manual_seed(0)
    model = SimpleModel()
    Trainer(model=model, train_dataloader=make_dataloader(), max_duration="1ep", seed=0).fit()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert re.fullmatch(r"Epoch 0: 4/4 batches, loss=\d\.\d{4}, \d\d:\d\d, ETA 00:00\n", captured.err)


def test_progress_bar_false_and_enabled_false_print_nothing(capsys):
    torch.manual_seed(0)
    model = SimpleModel()
    Trainer(model=model, train_dataloader=make_dataloader(), max_duration="1ep", progress_bar=False).fit()
    stream = io.StringIO()
    train(ProgressBarLogger(enabled=False, stream=stream))
    assert capsys.readouterr().err == "" and stream.getvalue() == ""


def test_an_early_stop_is_reported():
    stream = io.StringIO()
    stopper = EarlyStopper("metrics/eval/Accuracy", patience="1ep")
    trainer = train(ProgressBarLogger(stream=stream), callbacks=[stopper], max_duration="5ep", lr=0.0)
    assert trainer.state.stop_reason is not None
    assert stream.getvalue().splitlines()[-1].startswith("Training stopped at epoch 2, batch 6: EarlyStopper:")


def test_console_logger_prints_epoch_metrics_only():
    stream = io.StringIO()
    train(ConsoleLogger(stream=stream))
    lines = stream.getvalue().splitlines()
    assert sum("metrics/eval/Accuracy" in line for line in lines) == 2
    assert not any("loss/train" in line for line in lines)


def test_each_evaluation_is_printed_once_with_the_console_logger_on_the_same_stream():
    # log_to_console=True next to the progress bar: the evaluation's metrics appear once, on the progress line.
    stream = io.StringIO()
    memory = InMemoryLogger()
    train(ProgressBarLogger(stream=stream), ConsoleLogger(stream=stream), memory)
    lines = stream.getvalue().splitlines()
    accuracies = [f"{float(v):.4f}" for v in memory.values("metrics/eval/Accuracy")]
    assert len(accuracies) == 2
    eval_lines = [line for line in lines if "Accuracy" in line]
    assert [line.split(" at ")[0] for line in eval_lines] == ["Eval", "Eval"]  # not 'Eval eval'
    assert [re.search(r"Accuracy=(\S+),", line).group(1) for line in eval_lines] == accuracies
    assert not any("Eval eval" in line for line in lines)


def test_an_evaluator_with_its_own_label_is_named_once():
    from composer.core import Evaluator

    stream = io.StringIO()
    evaluator = Evaluator(label="val", dataloader=make_dataloader(num_samples=4, seed=1), eval_interval="1ep")
    train(ProgressBarLogger(stream=stream), eval_dataloader=evaluator, max_duration="1ep")
    assert [line.split(":")[0] for line in stream.getvalue().splitlines()] == [
        "Epoch 0",
        "Eval val at epoch 1, batch 3",
    ]


def test_console_logger_alone_still_prints_evaluation_metrics():
    stream = io.StringIO()
    train(ConsoleLogger(stream=stream), ProgressBarLogger(enabled=False))
    assert sum("metrics/eval/Accuracy" in line for line in stream.getvalue().splitlines()) == 2


@pytest.mark.slow  # a subprocess that imports torch and trains on the digits
def test_the_digits_example_prints_each_evaluation_once():
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "examples/train_digits.py", "--epochs", "2", "--seed", "0"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    out = result.stdout + result.stderr
    eval_lines = [line for line in out.splitlines() if "Accuracy" in line and "held-out" not in line]
    assert [line.split(" at ")[0] for line in eval_lines] == ["Eval", "Eval"], out  # one per epoch, no repeats
    final = re.search(r"final accuracy on 359 held-out digits: (\d\.\d{4})", out)
    assert final is not None, out
    assert f"Accuracy={final.group(1)}," in eval_lines[-1]  # the last evaluation of fit, not a second one


def test_bad_arguments_and_hparams():
    with pytest.raises(
        ValueError, match=r"backend='curses' is not supported; expected one of \['auto', 'tqdm', 'rich'\]"
    ):
        ProgressBarLogger(backend="curses")
    with pytest.raises(ValueError, match="refresh_seconds=-1"):
        ProgressBarLogger(refresh_seconds=-1)
    with pytest.raises(ValueError, match=r"interval_seconds=0 must be a positive number of seconds, or None"):
        ProgressBarLogger(interval_seconds=0)
    assert ProgressBarLogger().interval_seconds == 30.0
    assert ProgressBarLoggerHparams(interval_seconds=5).initialize_object().interval_seconds == 5
    assert ProgressBarLoggerHparams(backend="tqdm").initialize_object().backend == "tqdm"


PTY_SCRIPT = """
import torch
from composer import Trainer
from tests.common import SimpleModel, make_dataloader
torch.manual_seed(0)
model = SimpleModel()
trainer = Trainer(model=model, train_dataloader=make_dataloader(num_samples=12, batch_size=4),
                  eval_dataloader=make_dataloader(num_samples=4, seed=1), max_duration="2ep",
                  optimizers=torch.optim.SGD(model.parameters(), lr=0.1), seed=0)
trainer.fit()
trainer.close()
"""


def run_in_pty(script: str) -> str:
    """Runs ``script`` with its standard streams on a pseudo-terminal of 120 x 40 and returns what it drew."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=slave, stdout=slave, stderr=slave, cwd=root, env=env, close_fds=True
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert process.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return ANSI.sub("", b"".join(chunks).decode(errors="replace"))


@pytest.mark.slow  # a subprocess that imports torch
@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_the_default_trainer_draws_bars_on_a_pseudo_terminal():
    out = run_in_pty(PTY_SCRIPT)
    assert "Epoch 0" in out and "Epoch 1" in out and "3/3" in out
    assert re.search(r"loss=\d\.\d{4}", out)
    assert re.search(r"\bEval\b", out) and "Eval eval" not in out and re.search(r"Accuracy=\d\.\d{4}", out)
    assert "ETA" in out
    assert "batches," not in out  # bars, not the plain lines used off a terminal
