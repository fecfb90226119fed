"""Preemption soak: SIGTERM or SIGINT at random moments, then the same command again; every rerun must finish bitwise
equal to an uninterrupted run, and the batch in progress at the signal must be the one saved (nothing lost).

* ``--clock N``: the resumption command (``tests/trainer/test_resumption.py FOLDER NUM_WORKERS``: autoresume, a save
  every 3 batches, MixUp, LabelSmoothing, SelectiveBackprop, a random transform, Dropout, shuffling, 3 epochs of 6
  batches) gets SIGTERM or SIGINT (drawn) after a random delay over the part of an uninterrupted run's wall time in
  which it trains, so the signal lands anywhere: in a batch, in a save, in a DataLoader worker's fetch
  (``--num-workers``; ``--process-group`` signals them too, as a terminal's Ctrl-C does), in the epoch's end.
  ``--ballast-mb N`` makes every save write N MB more. A run
  signalled while training must end with ``Preempted`` (or ``Interrupted``) naming a batch, and the rerun must resume
  from exactly that batch; one signalled before ``fit`` (or after it) ends by the signal, and the rerun starts over
  (or finds the run done). The time from the signal to the exit is reported.
* ``--jobs N``: the 2-rank torchrun jobs of ``tests/trainer/test_preemption.py`` (DDP with rank 1 alone signalled;
  FSDP with sharded checkpoints in an S3-compatible store, moto on loopback, with torchrun signalled), each pair at a
  random batch and event, checked as the tests check them.

Usage::

    python scripts/preemption_soak.py --clock 20 --jobs 3 --seed 0 [--num-workers 2] [--ballast-mb 64]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = REPO / "tests" / "trainer" / "test_resumption.py"
SIGNALS = (signal.SIGTERM, signal.SIGINT)

__all__: list[str] = []


def _run(folder: Path, num_workers: int, ballast_mb: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("KILL_AT", "KILL_IN_SAVE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["SOAK_BALLAST_MB"] = str(ballast_mb)
    log = open(folder / "log.txt", "ab")  # noqa: SIM115 - handed to the child, closed with it
    command = [sys.executable, str(COMMAND), str(folder), str(num_workers)]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)


def _weights(folder: Path) -> list[object]:
    import torch

    return list(torch.load(folder / "final.pt", weights_only=True))


def _wait_for_fit(process: subprocess.Popen[bytes], folder: Path) -> float:
    """Waits until the command has built its Trainer (it writes resumed.txt just before fit); returns when."""
    while process.poll() is None and not (folder / "resumed.txt").exists():
        time.sleep(0.002)
    return time.monotonic()


def clock_trials(args: argparse.Namespace, rng: random.Random) -> list[str]:
    """The clock trials; returns their failures (and prints each trial)."""
    import torch

    base = Path(tempfile.mkdtemp(prefix="preemption-soak-"))
    process = _run(base, args.num_workers, args.ballast_mb)
    fit_started = _wait_for_fit(process, base)
    while process.poll() is None and not (base / "final.pt").exists():  # written once fit has returned
        time.sleep(0.002)
    fit_seconds = time.monotonic() - fit_started
    assert process.wait() == 0, (base / "log.txt").read_text()[-3000:]
    expected = _weights(base)
    print(f"uninterrupted run: fit takes {fit_seconds:.2f} s")
    failures, exits = [], []
    for trial in range(args.clock):
        folder = Path(tempfile.mkdtemp(prefix=f"preemption-soak-{trial}-"))
        # From fit's start (importing and building the Trainer take most of a run) to a little after its end.
        signum, delay = rng.choice(SIGNALS), rng.uniform(0, 1.1 * fit_seconds)
        process = _run(folder, args.num_workers, args.ballast_mb)
        _wait_for_fit(process, folder)
        time.sleep(delay)
        sent = time.monotonic()
        if args.process_group:  # its DataLoader workers too, as a terminal's Ctrl-C or Slurm's scancel
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        code = process.wait()
        exits.append(time.monotonic() - sent)
        log = (folder / "log.txt").read_text()
        stopped = [line for line in log.splitlines() if "fit stopped by" in line]
        batch = int(stopped[-1].split("after batch ")[1].split(",")[0]) if stopped else None
        rerun = _run(folder, args.num_workers, args.ballast_mb).wait()
        resumed = (folder / "resumed.txt").read_text().split()
        problems = []
        if rerun != 0:
            problems.append(f"the rerun failed ({rerun})")
        elif not all(torch.equal(a, b) for a, b in zip(_weights(folder), expected, strict=True)):  # type: ignore[arg-type]
            problems.append("the rerun's weights differ from the uninterrupted run's")
        if batch is not None and (code != 1 or len(resumed) < 2 or f"-ba{batch}-" not in resumed[1]):
            problems.append(f"stopped after batch {batch} (exit {code}) but the rerun resumed from {resumed[1:]}")
        outcome = f"saved batch {batch}" if batch is not None else f"ended by the signal (exit {code})"
        print(
            f"trial {trial}: {signum.name} at {delay:.2f} s: {outcome}, exit {exits[-1]:.2f} s after the signal; "
            f"rerun resumed from {resumed[1] if len(resumed) > 1 else '?'}: {'; '.join(problems) or 'ok'}"
        )
        failures += [f"clock trial {trial} ({folder}): {p}" for p in problems]
    if exits:
        print(f"signal to exit: median {statistics.median(exits):.2f} s, max {max(exits):.2f} s")
    return failures


def job_trials(args: argparse.Namespace, rng: random.Random) -> list[str]:
    """The 2-rank job pairs at random moments; returns their failures."""
    sys.path.insert(0, str(REPO))
    from tests.common.s3_server import S3Server
    from tests.trainer import test_preemption as tests

    server = S3Server().start()
    failures = []
    try:
        for trial in range(args.jobs):
            moments = (
                f"{rng.randint(1, 14)}:{rng.choice(tests.EVENTS)}",
                f"{rng.randint(1, 10)}:{rng.choice(tests.EVENTS)}",
            )
            folder = Path(tempfile.mkdtemp(prefix=f"preemption-jobs-{trial}-"))
            try:
                jobs = tests.run_jobs(server, folder, moments)
                tests.check_ddp(jobs)
                tests.check_sharded(jobs)
                print(f"jobs {trial} at {moments}: ok")
            except (AssertionError, RuntimeError) as error:
                print(f"jobs {trial} at {moments}: FAILED {error!r}"[:2000])
                failures.append(f"jobs {trial} at {moments} ({folder}): {error!r}"[:2000])
    finally:
        server.stop()
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clock", type=int, default=20, help="single-process trials at random wall-clock moments")
    parser.add_argument("--jobs", type=int, default=0, help="pairs of 2-rank jobs at random batches and events")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers of the single-process command")
    parser.add_argument("--ballast-mb", type=int, default=0, help="MB added to every single-process checkpoint")
    parser.add_argument("--process-group", action="store_true", help="signal the command's whole process group")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    failures = clock_trials(args, rng) + job_trials(args, rng)
    print(f"{args.clock} clock trials, {args.jobs} job pairs: {len(failures)} failed")
    for failure in failures:
        print("  " + failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
