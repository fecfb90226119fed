"""SIGTERM and SIGINT while ``fit`` runs: the batch finishes, a checkpoint of it is saved, ``fit`` raises ``Preempted``.

In this process, with a guard handler in place (a signal that the Trainer does not handle reaches the guard, which
records it, instead of ending pytest): handlers only while ``fit`` runs, and none off the main thread (a warning);
SIGINT without ``save_folder`` and SIGTERM with it (the events, the closing, the exception); an upload that outlasts
the grace period, left at the deadline.

In real processes: the resumption command (tests/trainer/test_resumption.py) signalled at seeded moments, then run
again, bitwise equal to an uninterrupted run; a second signal ending it at once; ``composer train`` exiting with
status 75; and two torchrun jobs of 2 ranks (tests/trainer/preemption_worker.py): DDP with one rank signalled, and
FSDP with sharded checkpoints in the S3-compatible store with torchrun signalled, then both commands again.
``python scripts/preemption_soak.py`` signals at random wall-clock moments instead.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Trainer
from composer.core import Callback, Event, Logger, State
from composer.trainer.preemption import Interrupted, Preempted
from composer.utils.object_store import S3ObjectStore
from tests.common import EventRecorder, SimpleModel, make_dataloader
from tests.distributed import launch
from tests.distributed.test_fsdp_trainer import assert_equal
from tests.trainer import test_resumption as resumption

WORKER = Path(__file__).with_name("preemption_worker.py")
EVENTS = ["batch_start", "after_dataloader", "after_forward", "after_backward", "batch_end"]
_MOMENTS = random.Random(27)  # the seeded moments the suite signals at; scripts/preemption_soak.py draws many more
SINGLE_PROCESS = [(_MOMENTS.randint(1, 18), _MOMENTS.choice(EVENTS), name) for name in ("SIGTERM", "SIGINT")]
DDP_MOMENT = f"{_MOMENTS.randint(1, 14)}:{_MOMENTS.choice(EVENTS)}"  # rank 1 alone; 18 batches, a check every <= 2
SHARDED_MOMENT = f"{_MOMENTS.randint(1, 10)}:{_MOMENTS.choice(EVENTS)}"  # torchrun; 12 batches


class SignalAt(Callback):
    """Sends ``signum`` to this process at ``event`` of batch ``batch`` (1-based)."""

    def __init__(self, batch: int, event: str, signum: signal.Signals) -> None:
        self.batch, self.event, self.signum = batch, event, signum

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        current = state.timer.batch.value + (0 if event in (Event.BATCH_END, Event.BATCH_CHECKPOINT) else 1)
        if event.value == self.event and current == self.batch:
            signal.raise_signal(self.signum)


class Handlers(EventRecorder):
    """Records the events, the SIGTERM and SIGINT handlers in place at each ``BATCH_END``, and ``close``."""

    def __init__(self) -> None:
        super().__init__()
        self.handlers: list[tuple[Any, Any]] = []

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        super().run_event(event, state, logger)
        if event is Event.BATCH_END:
            self.handlers.append((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)))

    def close(self, state: State, logger: Logger) -> None:
        self.events.append("close")  # type: ignore[arg-type]


@pytest.fixture
def guard():
    """Puts a handler for SIGTERM and SIGINT in place that records what reaches it; yields (handler, received)."""
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield handler, received
    for sig, old in previous.items():
        signal.signal(sig, old)


def trainer(**kwargs: Any) -> Trainer:
    kwargs.setdefault("max_duration", "2ep")
    return Trainer(
        model=SimpleModel(), train_dataloader=make_dataloader(num_samples=24), progress_bar=False, seed=3, **kwargs
    )


# ---- in this process ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("handle_sigint", [True, False])
def test_handlers_are_installed_only_while_fit_runs_and_put_back_after(guard, handle_sigint):
    handler, received = guard
    recorder = Handlers()
    run = trainer(max_duration="2ba", callbacks=[recorder], handle_sigint=handle_sigint)
    assert signal.getsignal(signal.SIGTERM) is handler  # building the Trainer installs nothing
    run.fit()
    sigterm, sigint = recorder.handlers[0]
    assert sigterm is not handler and callable(sigterm)
    assert (sigint is not handler) == handle_sigint
    assert signal.getsignal(signal.SIGTERM) is handler and signal.getsignal(signal.SIGINT) is handler
    run.close()
    assert received == []


def test_fit_outside_the_main_thread_warns_once_and_installs_nothing(guard):
    handler, _ = guard
    recorder = Handlers()
    run = trainer(max_duration="1ba", callbacks=[recorder])
    caught: list[warnings.WarningMessage] = []

    def fit_twice() -> None:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run.fit()
            run.fit(duration="1ba")
        caught.extend(seen)

    thread = threading.Thread(target=fit_twice, name="fit-thread")
    thread.start()
    thread.join()
    messages = [str(w.message) for w in caught if "outside the main thread" in str(w.message)]
    assert len(messages) == 1 and "(fit-thread)" in messages[0] and "without saving a checkpoint" in messages[0]
    assert [sigterm for sigterm, _ in recorder.handlers] == [handler, handler]
    run.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_finishes_the_batch_saves_it_closes_and_raises(guard, tmp_path, signum):
    """SIGINT without save_folder: nothing saved, a KeyboardInterrupt; SIGTERM with it: that batch's checkpoint."""
    _, received = guard
    recorder = Handlers()
    save = {"save_folder": str(tmp_path), "save_interval": "1ep"} if signum == signal.SIGTERM else {}
    run = trainer(callbacks=[SignalAt(4, "after_forward", signum), recorder], **save)
    with pytest.raises(Preempted) as caught:
        run.fit()
    error = caught.value
    assert isinstance(error, KeyboardInterrupt) == (signum == signal.SIGINT) == isinstance(error, Interrupted)
    assert not isinstance(error, Exception)  # `except Exception` meant for errors does not swallow it
    assert error.signal == signum and error.batch == 4 and int(run.state.timer.batch) == 4
    if save:
        assert error.checkpoint == str(tmp_path / "ep0-ba4-rank0.pt") and error.complete
        assert str(error).startswith("fit stopped by SIGTERM after batch 4, ")
        assert str(error).endswith(
            f"saved the checkpoint {error.checkpoint}. Run the same command again (autoresume=True) to continue."
        )
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ep0-ba4-rank0.pt", "latest-rank0.pt"]
    else:
        assert error.checkpoint is None and "after batch 4" in str(error) and "nothing was saved" in str(error)
    # The batch's events up to BATCH_CHECKPOINT, then closing: no EPOCH_END, EPOCH_CHECKPOINT or FIT_END.
    assert recorder.events[-3:] == [Event.BATCH_END, Event.BATCH_CHECKPOINT, "close"]
    assert Event.EPOCH_END not in recorder.events and Event.FIT_END not in recorder.events
    assert received == [] and signal.getsignal(signal.SIGTERM) is guard[0]


GROUP_SIGNAL = """
import subprocess, sys, torch
from composer import Callback, Trainer
from composer.trainer import Preempted
from tests.common import SimpleModel, make_dataloader


class SignalGroupAt(Callback):  # SIGTERM to the whole process group, from another process: as torchrun sends it
    def after_forward(self, state, logger):
        if int(state.timer.batch) == 4:  # in batch 5
            subprocess.run(["kill", "-s", "TERM", "--", f"-{__import__('os').getpgrp()}"])


loader = torch.utils.data.DataLoader(make_dataloader(num_samples=48).dataset, batch_size=4, num_workers=2)
trainer = Trainer(model=SimpleModel(), train_dataloader=loader, max_duration="2ep", callbacks=[SignalGroupAt()],
                  save_folder=sys.argv[1], progress_bar=False, seed=3)
try:
    trainer.fit()
except Preempted as error:
    print(error.batch, error.checkpoint, loader.worker_init_fn)
    sys.exit(75)
"""


@pytest.mark.slow
def test_dataloader_workers_outlive_a_signal_to_the_process_group(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(GROUP_SIGNAL)
    done = subprocess.run(  # a session of its own: the signal to its process group reaches nothing else
        [sys.executable, str(script), str(tmp_path / "checkpoints")],
        capture_output=True,
        text=True,
        cwd=launch.REPO,
        env=launch._env(),
        start_new_session=True,
        timeout=120,
    )
    assert done.returncode == 75, done.stderr[-3000:]  # not "DataLoader worker (pid ...) is killed by signal"
    assert done.stdout.split() == ["5", str(tmp_path / "checkpoints" / "ep0-ba5-rank0.pt"), "None"]  # put back


def test_an_upload_slower_than_the_grace_period_is_left_at_the_deadline(guard, s3_env, tmp_path, monkeypatch):
    release = threading.Event()
    upload = S3ObjectStore.upload

    def stuck_upload(self, local_path, key, **kwargs):  # type: ignore[no-untyped-def]
        release.wait(60)  # a store slower than the grace period; let go when the test ends
        return upload(self, local_path, key, **kwargs)

    monkeypatch.setattr(S3ObjectStore, "upload", stuck_upload)
    bucket, local = s3_env.create_bucket(), tmp_path / "local"
    run = trainer(
        callbacks=[SignalAt(3, "batch_end", signal.SIGTERM)],
        save_folder=f"s3://{bucket}/run",
        save_interval="1ep",
        storage_options={"endpoint_url": s3_env.endpoint_url, "local_folder": str(local)},
        preemption_grace_period=1.0,
    )
    try:
        started = time.monotonic()
        with pytest.raises(Preempted) as caught:
            run.fit()
        stopped_after = time.monotonic() - started
    finally:
        release.set()
    error = caught.value
    assert error.checkpoint == str(local / "ep0-ba3-rank0.pt") and not error.complete
    assert (local / "ep0-ba3-rank0.pt").is_file()
    assert f"saved at {local / 'ep0-ba3-rank0.pt'}, but its upload to s3://{bucket}/run did not finish" in str(error)
    assert "preemption_grace_period=1 s" in str(error)
    assert stopped_after < 30  # the upload is stuck for 60 s: fit did not wait for it (nor did close)


# ---- one process, for real ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runner():
    runner = resumption.Runner()
    yield runner
    runner.close()


@pytest.mark.slow
@pytest.mark.parametrize(("batch", "event", "name"), SINGLE_PROCESS)
def test_a_signal_at_a_seeded_moment_saves_that_batch_and_the_same_command_finishes_bitwise_equal(
    runner, tmp_path, tmp_path_factory, batch, event, name
):
    expected = runner.baseline(tmp_path_factory, 0)
    assert runner.run(tmp_path, 0, KILL_AT=f"{batch}:{event}:{name}") == 1  # the command lets Preempted through
    log = (tmp_path / "log.txt").read_text()
    kind = "Interrupted" if name == "SIGINT" else "Preempted"
    assert f"{kind}: fit stopped by {name} after batch {batch}, " in log, log[-3000:]
    assert not (tmp_path / "final.pt").exists()
    saved = resumption.assert_every_checkpoint_is_valid(tmp_path)
    assert resumption.batch_of(saved[0].name) == batch  # nothing lost: the batch in progress is saved
    assert runner.run(tmp_path, 0) == 0, (tmp_path / "log.txt").read_text()
    assert (tmp_path / "resumed.txt").read_text().split() == ["-", saved[0].name]
    resumption.assert_bitwise_equal(resumption.final_weights(tmp_path), expected)


@pytest.mark.slow
def test_a_second_signal_ends_the_process_at_once(runner, tmp_path):
    code = runner.run(tmp_path, 0, KILL_AT="3:after_forward:SIGTERM,3:batch_end:SIGTERM")
    log = (tmp_path / "log.txt").read_text()
    assert code == -signal.SIGTERM, log[-3000:]
    assert "SIGTERM received" in log and "SIGTERM again: ending the process now, without saving" in log
    # Ended inside batch 3, before its BATCH_CHECKPOINT (where save_interval='3ba' saves) and before any other save.
    assert [p.name for p in resumption.assert_every_checkpoint_is_valid(tmp_path)] == []


def test_composer_train_returns_status_75_after_saving(guard, tmp_path, capsys):
    """``composer train``, sent SIGTERM from another thread once its first checkpoint is written."""
    from composer.cli.__main__ import main
    from tests.cli.recipes import write_recipe

    folder = tmp_path / "checkpoints"
    recipe = write_recipe(tmp_path, extra=f"save_folder: {folder}\nsave_interval: 2ba\n")
    returned = threading.Event()

    def signal_once_saved() -> None:
        deadline = time.monotonic() + 60
        while not list(folder.glob("*.pt")) and time.monotonic() < deadline and not returned.is_set():
            time.sleep(0.01)
        if not returned.is_set():
            signal.raise_signal(signal.SIGTERM)  # the process's handler runs in the main thread

    sender = threading.Thread(target=signal_once_saved)
    sender.start()
    try:
        assert main(["train", "-f", str(recipe), "max_duration=200ep"]) == 75
    finally:
        returned.set()
        sender.join()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("composer train: fit stopped by SIGTERM after batch "), line
    assert line.endswith("Run the same command again (autoresume=True) to continue.")
    batch = int(line.split("after batch ")[1].split(",")[0])
    assert (folder / f"ep{(batch - 1) // 4}-ba{batch}-rank0.pt").is_file() and guard[1] == []


# ---- 2 ranks, for real -------------------------------------------------------------------------------------------


def run_jobs(server: Any, folder: Path, moments: tuple[str, str]) -> dict[str, Any]:
    """Runs the ``signal`` job, then the ``rerun`` job, with the DDP and sharded ``moments``; returns what each rank
    recorded, by scenario and rank, with the moments, the server and the bucket (also scripts/preemption_soak.py's)."""
    bucket = server.create_bucket()
    results: dict[str, Any] = {"server": server, "bucket": bucket, "moments": moments}
    for scenario in ("signal", "rerun"):
        job = launch.torchrun(scenario, folder, WORKER, [server.endpoint_url, bucket, *moments], server.environment())
        files = [folder / f"{scenario}{rank}.pt" for rank in range(launch.WORLD_SIZE)]
        if not all(f.exists() for f in files):  # the signal job's launcher ends with an error: torchrun was stopped
            raise RuntimeError(f"The 2-rank job {scenario!r} failed ({job.returncode}):\n{job.stderr[-10000:]}")
        results[scenario] = [torch.load(f, weights_only=False) for f in files]
    return results


def check_ddp(jobs: dict[str, Any]) -> None:
    """Rank 1 alone was signalled: both ranks stopped after the same batch, within two of it (the check's interval
    is at most 2 batches here), saved it, and the rerun resumed from it and ended bitwise equal."""
    batch = int(jobs["moments"][0].split(":")[0])
    stopped = [jobs["signal"][rank]["ddp/preempted"] for rank in (0, 1)]
    assert [s["signal"] for s in stopped] == [None, "SIGTERM"]  # rank 0 learnt it from the agreement
    assert stopped[0]["batch"] == stopped[1]["batch"] and batch <= stopped[0]["batch"] <= batch + 2
    assert "by a signal to another rank" in stopped[0]["message"]
    name = Path(stopped[0]["checkpoint"]).name
    assert name.endswith(f"-ba{stopped[0]['batch']}-rank0.pt") and stopped[0]["complete"]
    for rank in (0, 1):
        assert jobs["rerun"][rank]["ddp/resumed_from"] == name
    assert_equal(jobs["rerun"][0]["ddp/weights"], jobs["signal"][0]["ddp-base/weights"])


def check_sharded(jobs: dict[str, Any]) -> None:
    """torchrun was signalled: both ranks stopped after the batch the signal came in (the next one when it came after
    that batch's counts), its sharded checkpoint is complete in the store, and a fresh machine resumed from it."""
    batch, event = jobs["moments"][1].split(":")
    expected = int(batch) + (1 if event == "batch_end" else 0)  # after the batch's counts: carried on the next ones
    stopped = [jobs["signal"][rank]["sharded/preempted"] for rank in (0, 1)]
    assert [s["signal"] for s in stopped] == ["SIGTERM", "SIGTERM"]  # torchrun passed it on to both
    assert [s["batch"] for s in stopped] == [expected, expected]
    url = f"s3://{jobs['bucket']}/sharded/ep{(expected - 1) // 6}-ba{expected}"
    assert [s["checkpoint"] for s in stopped] == [url, url] and stopped[0]["complete"]
    for rank in (0, 1):  # a fresh machine: empty local folders, the checkpoint downloaded from the store
        assert jobs["rerun"][rank]["sharded/resumed_from"] == Path(url).name
    assert_equal(jobs["rerun"][0]["sharded/weights"], jobs["signal"][0]["sharded-base/weights"])


@pytest.fixture(scope="module")
def jobs(s3_server, tmp_path_factory) -> dict[str, Any]:
    return run_jobs(s3_server, tmp_path_factory.mktemp("preemption"), (DDP_MOMENT, SHARDED_MOMENT))


@pytest.mark.dist
def test_ddp_ranks_stop_after_the_same_batch_when_one_rank_is_signalled_and_resume_bitwise(jobs):
    check_ddp(jobs)


@pytest.mark.dist
def test_sharded_checkpoints_in_the_store_when_torchrun_is_signalled_then_a_fresh_machine_resumes_bitwise(jobs):
    check_sharded(jobs)
