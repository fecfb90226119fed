"""Wall time of the getting-started guide's first run, as a newcomer runs it: a fresh interpreter, the block as written.

The first ```python block of ``docs/guides/getting-started.md`` runs as ``python -c <block>`` in an empty folder,
``--rounds`` times in a row; each round's wall time covers the whole process (start-up, imports, the data, six epochs
of training with an evaluation after each, the final evaluation). The host's load is read from ``/proc/loadavg``
before each round and printed with it, because on a shared machine the time depends on it. The first round's
output (standard output and the progress lines on standard error) is printed at the end: the guide's expected
output comes from it.

Run:  .venv/bin/python benchmarks/first_run.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "getting-started.md"


def first_block() -> str:
    """The guide's first ```python block."""
    match = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    if match is None:
        raise SystemExit(f"{GUIDE} has no python block")
    return match.group(1)


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, or 'unknown' off Linux."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    code = first_block()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times, first_output = [], ""
    print(f"{os.cpu_count()} CPUs; the guide's first run, {args.rounds} rounds")
    for index in range(args.rounds):
        load = load_average()
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True, check=False
            )
            seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"round {index} failed:\n{done.stderr}")
        times.append(seconds)
        first_output = first_output or done.stderr + done.stdout
        print(f"round {index}: {seconds:.1f} s (load average before: {load}); {done.stdout.strip()}", flush=True)
    print(f"median {statistics.median(times):.1f} s, range {min(times):.1f}-{max(times):.1f} s")
    print(f"load average after: {load_average()}")
    print("first round's output:\n" + first_output)


if __name__ == "__main__":
    main()
