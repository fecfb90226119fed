"""Checkpoint save and load time and peak extra memory, for a ~100M-parameter model, against plain torch.save/load.

The model is an MLP of ``--layers`` Linear(width, width) layers (6 x 4096 x 4096 ~ 100.7M parameters, 403 MB in
fp32) with an SGD-with-momentum optimizer that has taken one step (so the checkpoint also holds a momentum buffer per
weight). Each round times, interleaved (in an order that rotates from round to round, each operation starting after an
``os.sync()``) so that drift in machine speed hits all of them:

* save: ``composer.utils.checkpoint.save_checkpoint(state, path)`` (whole State: atomic write, fsync, checksum)
  against ``torch.save(state.state_dict(), path)`` over the previous file, and against the same torch.save made
  atomic by hand (a new temporary file, fsync, rename: what crash safety costs without the checksum);
* load: ``load_checkpoint(state, path)`` (checksum check, weights-only unpickling, restore into the State) against
  ``torch.load(path, weights_only=True)`` followed by ``state.load_state_dict``.

Peak extra memory is the process's peak resident set size during the operation minus its size just before (Linux:
the peak is reset through /proc/self/clear_refs), reported in MB and in copies of the model's weights. Saving should
need at most one extra copy.

Run:  .venv/bin/python benchmarks/checkpoint_io.py [--rounds 3] [--layers 6] [--width 4096] [--folder /tmp]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from composer.core import State
from composer.utils.checkpoint import load_checkpoint, save_checkpoint

__all__: list[str] = []


def _status(field: str) -> int:
    """A /proc/self/status size in bytes (VmRSS: now; VmHWM: the peak since the last reset)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status (this benchmark reads Linux memory counters)")


def measure(operation: Callable[[], object]) -> tuple[float, int]:
    """Seconds and peak extra resident bytes of ``operation`` (its result is dropped before returning)."""
    gc.collect()
    os.sync()  # start every operation with no other file's dirty pages in flight
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current size
    before = _status("VmRSS")
    start = time.perf_counter()
    result = operation()
    elapsed = time.perf_counter() - start
    peak = _status("VmHWM") - before
    del result
    gc.collect()
    return elapsed, peak


def build_state(layers: int, width: int) -> State:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(torch.randn(2, width)).sum().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # gradients are not part of a checkpoint
    return State(model=model, max_duration="1ep", optimizers=optimizer)


def torch_save_atomically(state: State, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state.state_dict(), tmp)
    fd = os.open(tmp, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--folder", default=None, help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    state = build_state(args.layers, args.width)
    num_params = sum(p.numel() for p in state.model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in state.model.parameters())
    print(f"model: {num_params / 1e6:.1f}M parameters, {weight_bytes / 1e6:.0f} MB of weights (+ momentum buffers)")

    folder = Path(args.folder or tempfile.mkdtemp())
    ours, plain = folder / "composer.pt", folder / "plain.pt"
    names = ["save", "save (torch.save)", "save (torch.save, atomic)", "load", "load (torch)"]
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in names}
    operations: dict[str, Callable[[], object]] = {
        "save": lambda: save_checkpoint(state, ours),
        "save (torch.save)": lambda: torch.save(state.state_dict(), plain),
        "save (torch.save, atomic)": lambda: torch_save_atomically(state, plain),
        "load": lambda: load_checkpoint(state, ours),
        "load (torch)": lambda: state.load_state_dict(torch.load(plain, weights_only=True, map_location="cpu")),
    }
    for r in range(args.rounds):
        # Saves before loads (the loads read the files); within each, the order rotates from round to round.
        for group in (names[:3], names[3:]):
            for name in group[r % len(group) :] + group[: r % len(group)]:
                results[name].append(measure(operations[name]))
        print(f"round {r}: " + "  ".join(f"{name} {runs[-1][0]:.2f}s" for name, runs in results.items()))
    print(f"file size: composer {ours.stat().st_size / 1e6:.0f} MB, torch.save {plain.stat().st_size / 1e6:.0f} MB")
    print(f"{'operation':<26}{'median s':>10}{'best s':>10}{'peak extra MB':>16}{'x weights':>12}")
    for name, runs in results.items():
        seconds = [s for s, _ in runs]
        peak = max(p for _, p in runs)
        print(
            f"{name:<26}{statistics.median(seconds):>10.2f}{min(seconds):>10.2f}{peak / 1e6:>16.0f}"
            f"{peak / weight_bytes:>12.2f}"
        )
    save_peak = max(p for _, p in results["save"])
    print(f"saving holds at most one extra copy of the weights: {'yes' if save_peak <= weight_bytes else 'NO'}")
    ours.unlink()
    plain.unlink()


if __name__ == "__main__":
    main()
