"""Callbacks and loggers are closed exactly once, even when a script never calls ``Trainer.close()``.

Each callback's ``close`` and then its ``post_close`` run once: on ``trainer.close()``, when the constructor raises,
when the Trainer is garbage-collected, or at the latest when the interpreter exits. ``fit`` itself does not close.

The interpreter-exit cases run this file as a script in a fresh process (``python test_close.py SCENARIO FOLDER``);
the :class:`CloseRecorder` appends one line per hook to ``FOLDER/hooks.txt``, so the order and count are read back
from the file after the process has exited.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Trainer
from composer.core import Callback, Logger, State
from composer.loggers import FileLogger
from tests.common import SimpleModel, make_dataloader

REPO = Path(__file__).resolve().parents[2]

CLOSED = ["close", "post_close"]


class CloseRecorder(Callback):
    """Appends ``close`` and ``post_close`` to a file when those hooks run (a file survives the process)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        self._append("close")

    def post_close(self) -> None:
        self._append("post_close")


class RaisesAtInit(Callback):
    def init(self, state: State, logger: Logger) -> None:
        del state, logger
        raise RuntimeError("init failed on purpose")


def hooks(folder: Path) -> list[str]:
    """The lines appended to ``folder/hooks.txt``, in order."""
    path = folder / "hooks.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def make_trainer(folder: Path, **kwargs: Any) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    kwargs.setdefault("callbacks", [CloseRecorder(folder / "hooks.txt")])
    if "loggers" not in kwargs:
        kwargs["loggers"] = [FileLogger(folder / "log.jsonl")]
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        max_duration="1ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def logged_keys(folder: Path) -> list[str]:
    """Every key the FileLogger wrote to ``folder/log.jsonl``, in order."""
    lines = (folder / "log.jsonl").read_text(encoding="utf-8").splitlines()
    return [key for line in lines for key in json.loads(line)["data"]]


# ---- the scenarios run in a fresh interpreter ----------------------------------------------------------------------


def scenario_fit_then_exit(folder: Path) -> None:
    trainer = make_trainer(folder)
    trainer.fit()
    # Buffered by the FileLogger (it flushed at FIT_END): only closing writes it to the file.
    trainer.logger.metric_fit({"after_fit": 1})
    with open(folder / "hooks.txt", "a", encoding="utf-8") as f:
        f.write("script_end\n")  # the script's last statement


def scenario_close_then_exit(folder: Path) -> None:
    trainer = make_trainer(folder)
    trainer.fit()
    trainer.close()
    trainer.close()
    with open(folder / "hooks.txt", "a", encoding="utf-8") as f:
        f.write("script_end\n")


def scenario_constructor_raises_then_exit(folder: Path) -> None:
    recorder = CloseRecorder(folder / "hooks.txt")
    with contextlib.suppress(RuntimeError):
        make_trainer(folder, callbacks=[recorder, RaisesAtInit()])  # raises after the engine exists (at INIT)
    with contextlib.suppress(ValueError):
        make_trainer(folder, callbacks=[recorder], loggers=[], grad_accum=0)  # raises before anything is built
    with open(folder / "hooks.txt", "a", encoding="utf-8") as f:
        f.write("script_end\n")


SCENARIOS = {
    "fit_then_exit": scenario_fit_then_exit,
    "close_then_exit": scenario_close_then_exit,
    "constructor_raises_then_exit": scenario_constructor_raises_then_exit,
}


def run_scenario(name: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, str(Path(__file__)), name, str(folder)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # A finalizer that fails at exit prints "Exception ignored in ..." or a traceback but keeps the exit code 0.
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    return result


# ---- interpreter exit ----------------------------------------------------------------------------------------------


@pytest.mark.slow  # a fresh interpreter
def test_exit_without_close_closes_each_callback_once_in_order(tmp_path: Path) -> None:
    run_scenario("fit_then_exit", tmp_path)
    assert hooks(tmp_path) == ["script_end", *CLOSED]  # at exit, after the script's last line, once each
    assert logged_keys(tmp_path)[-1] == "after_fit"  # the FileLogger flushed its buffer when closed


@pytest.mark.slow  # a fresh interpreter
def test_explicit_close_then_exit_closes_once(tmp_path: Path) -> None:
    run_scenario("close_then_exit", tmp_path)
    assert hooks(tmp_path) == [*CLOSED, "script_end"]  # by the first close(); not again, not at exit


@pytest.mark.slow  # a fresh interpreter
def test_constructor_that_raises_closes_at_once_and_leaves_nothing_for_exit(tmp_path: Path) -> None:
    run_scenario("constructor_raises_then_exit", tmp_path)
    # The INIT failure closed the callbacks before the exception reached the caller; the ValueError (raised before
    # the engine existed) closed nothing; interpreter exit found nothing left to close and printed no error.
    assert hooks(tmp_path) == [*CLOSED, "script_end"]


# ---- in the same process -------------------------------------------------------------------------------------------


def test_fit_does_not_close_and_may_be_called_again(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path)
    trainer.fit()
    assert hooks(tmp_path) == []
    trainer.fit(duration="1ep")
    assert int(trainer.state.timer.epoch) == 2
    assert hooks(tmp_path) == []
    trainer.close()
    trainer.close()
    assert hooks(tmp_path) == CLOSED


def test_garbage_collection_closes_once(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path)
    trainer.fit()
    trainer.logger.metric_fit({"after_fit": 1})
    collected = weakref.ref(trainer)
    del trainer
    gc.collect()
    assert collected() is None  # the finalizer does not keep the Trainer alive
    assert hooks(tmp_path) == CLOSED
    assert logged_keys(tmp_path)[-1] == "after_fit"
    gc.collect()
    assert hooks(tmp_path) == CLOSED


def test_close_then_garbage_collection_does_not_close_again(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path)
    trainer.fit()
    trainer.close()
    del trainer
    gc.collect()
    assert hooks(tmp_path) == CLOSED


def test_context_manager_closes_once(tmp_path: Path) -> None:
    with make_trainer(tmp_path) as trainer:
        trainer.fit()
        assert hooks(tmp_path) == []
    assert hooks(tmp_path) == CLOSED
    del trainer
    gc.collect()
    assert hooks(tmp_path) == CLOSED


def test_constructor_that_raises_at_init_closes_before_raising(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="init failed on purpose"):
        make_trainer(tmp_path, callbacks=[CloseRecorder(tmp_path / "hooks.txt"), RaisesAtInit()])
    assert hooks(tmp_path) == CLOSED
    gc.collect()
    assert hooks(tmp_path) == CLOSED


@pytest.mark.parametrize("damage", [b"x", b"not a checkpoint\n"])
def test_rerunning_a_script_whose_constructor_failed_fails_the_same_way_not_on_a_leftover_log(
    tmp_path: Path, damage: bytes
) -> None:
    (tmp_path / "ckpt.pt").write_bytes(damage)  # a corrupt load_path: the constructor fails after INIT

    def script() -> tuple[FileLogger, CloseRecorder, str]:
        # The same lines twice, as a user re-running the same script would.
        logger, recorder = FileLogger(tmp_path / "log.jsonl", log_level="batch"), CloseRecorder(tmp_path / "hooks.txt")
        with pytest.raises(Exception) as error:
            make_trainer(tmp_path, loggers=[logger], callbacks=[recorder], load_path=tmp_path / "ckpt.pt")
        return logger, recorder, f"{type(error.value).__name__}: {error.value}"

    first_logger, _, first_error = script()
    assert "not a checkpoint: truncated or corrupt" in first_error
    assert hooks(tmp_path) == CLOSED  # every callback and logger it started, closed
    assert first_logger._file is None  # the log file is not left open
    assert not (tmp_path / "log.jsonl").exists()  # nor on disk: nothing was logged, and it would block a rerun
    second_logger, _, second_error = script()
    assert second_error == first_error  # the same load error, not 'log.jsonl already exists'
    assert hooks(tmp_path) == CLOSED * 2 and second_logger._file is None


def test_a_constructor_that_fails_after_logging_leaves_its_log_and_says_so_on_a_rerun(tmp_path: Path) -> None:
    # What was logged is kept (it may explain the failure); the rerun is refused by the FileLogger, which names the
    # file and the fix, rather than failing on a half-made run.
    class LogsThenRaises(Callback):
        def init(self, state: State, logger: Logger) -> None:
            del state
            logger.metric_fit({"note": "init ran"})
            raise RuntimeError("init failed on purpose")

    with pytest.raises(RuntimeError, match="init failed on purpose"):
        make_trainer(tmp_path, callbacks=[LogsThenRaises()])
    assert logged_keys(tmp_path) == ["note"]
    rerun = make_trainer(tmp_path)  # building cannot know yet whether the run resumes; starting fresh refuses
    with pytest.raises(ValueError, match=r"log\.jsonl.* already exists and this run starts fresh.*overwrite=True"):
        rerun.fit()
    rerun.close()
    assert logged_keys(tmp_path) == ["note"]


def test_fit_that_raises_closes_once(tmp_path: Path) -> None:
    class RaisesAtBatchEnd(Callback):
        def batch_end(self, state: State, logger: Logger) -> None:
            del state, logger
            raise RuntimeError("batch failed on purpose")

    trainer = make_trainer(tmp_path, callbacks=[CloseRecorder(tmp_path / "hooks.txt"), RaisesAtBatchEnd()])
    with pytest.raises(RuntimeError, match="batch failed on purpose"):
        trainer.fit()
    assert hooks(tmp_path) == CLOSED
    trainer.close()
    del trainer
    gc.collect()
    assert hooks(tmp_path) == CLOSED


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](Path(sys.argv[2]))
