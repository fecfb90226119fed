"""Runs the whole composition matrix of issue 15 and prints which ordered pairs compose, are refused, or fail.

Every ordered pair of registered methods trains a fresh ResNet-8 (image and optimization methods) or one-layer GPT
(language methods with optimization and language methods) for 2 batches, with ``grad_accum`` 1 and 2, in the setting
of ``tests/algorithms/composition_settings.py``; the suite's ``tests/algorithms/test_composition.py`` runs the same
checks (a sample of them once the matrices outgrow CI's budget). 25-60 ms a run on one CPU thread: today's 1152 runs
take about a minute.

Usage::

    .venv/bin/python scripts/composition_matrix.py                # both matrices
    .venv/bin/python scripts/composition_matrix.py --matrix language
    .venv/bin/python scripts/composition_matrix.py --method mixup   # only the pairs with MixUp

Each cell of the printed grids is the row method listed first and the column method second, one character per
``grad_accum`` (1, then 2): ``.`` composed, ``r`` refused as expected, ``F`` failed (crashed, refused unexpectedly,
fewer than 2 optimizer steps, a non-finite loss, or a method whose ``apply`` never ran); blank: not in that matrix
(two optimization methods, in the language grid). The failures follow the grids with their causes. Exits with status
1 if any run failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.algorithms

from tests.algorithms.composition_settings import (  # after the path above
    EXCLUDED,
    GRAD_ACCUMS,
    SETTINGS,
    Run,
    image_runs,
    language_runs,
    problem,
    run_pair,
    single_threaded,
)


def _grid(title: str, runs: list[Run], marks: dict[Run, str]) -> str:
    """The matrix as text: a row per first method, a column per second method (numbered, with a legend)."""
    firsts = sorted({run.first for run in runs})
    seconds = sorted({run.second for run in runs})
    number = {name: i for i, name in enumerate(seconds)}
    width = max(len(GRAD_ACCUMS), len(str(len(seconds) - 1)))
    name_width = max(len(name) for name in firsts)
    lines = [f"{title} (row first, column second; one mark per grad_accum in {GRAD_ACCUMS})"]
    lines.append(" " * name_width + " | " + " ".join(f"{number[s]:>{width}}" for s in seconds))
    for first in firsts:
        cells = []
        for second in seconds:
            cell = "".join(marks.get(Run(first, second, g), " ") for g in GRAD_ACCUMS) if first != second else "-"
            cells.append(f"{cell:>{width}}")
        lines.append(f"{first:<{name_width}} | " + " ".join(cells))
    lines.append("columns: " + ", ".join(f"{number[s]} {s}" for s in seconds))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", choices=("image", "language", "both"), default="both", help="which matrix to run")
    parser.add_argument("--method", action="append", default=[], help="only pairs with this method (repeatable)")
    args = parser.parse_args()

    matrices: list[tuple[str, list[Run]]] = []
    if args.matrix in ("image", "both"):
        matrices.append(("image matrix", image_runs()))
    if args.matrix in ("language", "both"):
        matrices.append(("language matrix", language_runs()))
    if args.method:
        wanted = set(args.method)
        excluded = sorted(wanted & set(EXCLUDED))
        if excluded:
            parser.error(
                "; ".join(f"--method {name} is kept out of the matrices: {EXCLUDED[name]}" for name in excluded)
            )
        unknown = sorted(wanted - set(SETTINGS))
        if unknown:
            parser.error(f"--method {', '.join(unknown)}: not a registered method; choose from {sorted(SETTINGS)}")
        matrices = [(title, [r for r in runs if {r.first, r.second} & wanted]) for title, runs in matrices]

    counts: Counter[str] = Counter()
    failures: list[tuple[Run, str]] = []
    start = time.perf_counter()
    with single_threaded():
        for title, runs in matrices:
            if not runs:
                continue
            marks: dict[Run, str] = {}
            for run in runs:
                outcome = run_pair(run)
                found = problem(outcome)
                if found is not None:
                    marks[run], verdict = "F", "failed"
                    failures.append((run, found))
                else:
                    marks[run], verdict = ("r", "refused") if outcome.status == "refused" else (".", "composed")
                counts[verdict] += 1
            print(_grid(title, runs, marks), end="\n\n")

    total = sum(counts.values())
    print(
        f"{total} runs in {time.perf_counter() - start:.1f} s: {counts['composed']} composed, "
        f"{counts['refused']} refused as expected, {counts['failed']} failed"
    )
    for name, reason in EXCLUDED.items():
        print(f"not in the matrices: {name} ({reason})")
    for run, found in failures:
        print(f"FAILED {run}: {found}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
