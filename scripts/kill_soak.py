"""Kill soak: SIGKILL a training command at random batches and at random wall-clock moments, re-run it, and check that
every re-run finishes bitwise equal to an uninterrupted run.

The command is the one the resumption tests kill (``tests/trainer/test_resumption.py FOLDER NUM_WORKERS``: autoresume,
a save every 3 batches, MixUp, LabelSmoothing, SelectiveBackprop, a random transform, Dropout, shuffling, 3 epochs
of 6 batches). Each trial gets a fresh folder:

* a batch kill sets ``KILL_AT=<batch>:<event>`` (a random batch of the 18 and a random training event), so the
  process kills itself at exactly that point;
* a clock kill starts the command and SIGKILLs it after a random delay drawn uniformly over the part of an
  uninterrupted run's wall time in which it trains (after the imports and the Trainer's construction), so kills land
  anywhere in a batch, between batches, or inside a checkpoint write (counted when a temporary checkpoint file is
  left behind). The tiny model saves in well under a millisecond, so ``--ballast-mb N`` adds an N-MB buffer to it
  (``SOAK_BALLAST_MB``): each save then writes N MB more and takes long enough for clock kills to land inside writes.

After the kill every checkpoint left in the folder must read back (no torn file), and the same command run again must
finish with weights bitwise equal to the uninterrupted run's. The suite runs two kills
(``tests/trainer/test_resumption.py``); this script is the soak.

Usage::

    python scripts/kill_soak.py --batch-kills 20 --clock-kills 30 --seed 0 [--ballast-mb 64]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = REPO / "tests" / "trainer" / "test_resumption.py"
EVENTS = ["batch_start", "after_dataloader", "after_forward", "after_backward", "batch_end"]
BATCHES = 18

__all__: list[str] = []


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KILL_AT", "KILL_IN_SAVE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _start(folder: Path, **extra: str) -> subprocess.Popen[bytes]:
    log = open(folder / "log.txt", "ab")  # noqa: SIM115 - handed to the child, closed with it
    return subprocess.Popen(
        [sys.executable, str(COMMAND), str(folder), "0"], cwd=REPO, env=_env(**extra), stdout=log, stderr=log
    )


def _final_weights(folder: Path) -> list[object]:
    import torch

    return list(torch.load(folder / "final.pt", weights_only=True))


def _equal(a: list[object], b: list[object]) -> bool:
    import torch

    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]


def _checkpoints_read_back(folder: Path) -> bool:
    from composer.utils.checkpoint import CheckpointError, find_checkpoints, read_checkpoint

    try:
        for path in find_checkpoints(folder, "ep{epoch}-ba{batch}-rank{rank}.pt"):
            read_checkpoint(path)
    except CheckpointError:
        return False
    return True


def _resume_and_compare(folder: Path, expected: list[object], **extra: str) -> bool:
    if not _checkpoints_read_back(folder):
        print(f"  {folder.name}: a checkpoint left by the kill does not read back")
        return False
    if _start(folder, **extra).wait() != 0:
        print(f"  {folder.name}: the re-run failed; see {folder / 'log.txt'}")
        return False
    return _equal(_final_weights(folder), expected)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-kills", type=int, default=20, help="kills at a random batch and event")
    parser.add_argument("--clock-kills", type=int, default=30, help="kills at a random wall-clock moment")
    parser.add_argument("--seed", type=int, default=0, help="seeds the choice of kill points")
    parser.add_argument("--ballast-mb", type=int, default=0, help="MB added to every checkpoint (slower saves)")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (printed) for inspection")
    args = parser.parse_args()
    # Every run of the command (the baseline, each killed run and its re-run) gets the same ballast.
    ballast = {"SOAK_BALLAST_MB": str(args.ballast_mb)}
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kill-soak-"))

    baseline = root / "baseline"
    baseline.mkdir()
    started = time.perf_counter()
    process = _start(baseline, **ballast)
    # The command writes resumed.txt once its Trainer is built, just before fit: training starts about then.
    while process.poll() is None and not (baseline / "resumed.txt").exists():
        time.sleep(0.01)
    fit_starts = time.perf_counter() - started
    assert process.wait() == 0, (baseline / "log.txt").read_text()
    run_seconds = time.perf_counter() - started
    expected = _final_weights(baseline)
    print(f"uninterrupted run: {run_seconds:.1f} s, fit from {fit_starts:.1f} s on; folders under {root}")

    bitwise = {"batch": 0, "clock": 0}
    inside_save = 0
    for trial in range(args.batch_kills):
        folder = root / f"batch{trial}"
        folder.mkdir()
        at = f"{rng.randint(1, BATCHES)}:{rng.choice(EVENTS)}"
        code = _start(folder, KILL_AT=at, **ballast).wait()
        ok = code == -signal.SIGKILL and _resume_and_compare(folder, expected, **ballast)
        bitwise["batch"] += ok
        print(f"batch kill {trial + 1}/{args.batch_kills} at {at}: {'bitwise equal' if ok else 'FAILED'}")
    for trial in range(args.clock_kills):
        folder = root / f"clock{trial}"
        folder.mkdir()
        delay = rng.uniform(fit_starts, run_seconds)  # while it trains and saves
        process = _start(folder, **ballast)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        code = process.wait()
        leftover = any(".tmp-" in p.name for p in folder.iterdir())
        inside_save += leftover
        if code == 0:  # finished before the kill: nothing to resume, the run itself must match
            ok = _equal(_final_weights(folder), expected)
        else:
            ok = _resume_and_compare(folder, expected, **ballast)
        bitwise["clock"] += ok
        where = "inside a checkpoint write" if leftover else ("after the end" if code == 0 else "")
        print(
            f"clock kill {trial + 1}/{args.clock_kills} at {delay:.2f} s {where}: {'bitwise equal' if ok else 'FAILED'}"
        )

    print(
        f"\nbatch kills: {bitwise['batch']}/{args.batch_kills} resumed bitwise; clock kills: "
        f"{bitwise['clock']}/{args.clock_kills} resumed bitwise, {inside_save} of them inside a checkpoint write"
    )
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0 if bitwise["batch"] == args.batch_kills and bitwise["clock"] == args.clock_kills else 1


if __name__ == "__main__":
    sys.exit(main())
