"""Saves through the Trainer onto disks too small for the checkpoints; run by tests/utils/checkpoint/test_local_io.py.

Usage: ``python tests/utils/checkpoint/disk_full_worker.py <tmpfs|emulated> <folder>``. With ``tmpfs`` the process
runs in user and mount namespaces of its own (the test starts it under ``unshare --user --map-root-user --mount``) and
each disk is a real tmpfs of a few hundred KiB mounted under ``<folder>``: the kernel itself refuses the write that does
not fit (``ENOSPC``). ``emulated`` is for machines that do not allow those namespaces: every file opened for writing
under a disk's folder is wrapped, and a write raises ``OSError(ENOSPC)`` once the files there would exceed the
disk's size (the lowest seam Python code can reach). Three disks, one per kind of save:

* ``one_file``: room for 2.5 checkpoints, ``save_num_checkpoints_to_keep=2``: batches 1 and 2 are saved, batch 3
  (written before batch 1's is deleted) does not fit;
* ``safetensors``: the weights alone (``save_weights_only``, a ``.safetensors`` name), on a disk of half their size;
* ``sharded``: a sharded checkpoint (FSDP over a process group of one), on a disk of half its size.

What each save raised, and what is left on its disk, goes to ``<folder>/result.json`` (outside the disks).
"""

from __future__ import annotations

import builtins
import datetime
import errno
import io
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist

from composer import Trainer
from composer.utils.checkpoint import read_checkpoint
from tests.common import SimpleModel, make_dataloader

FEATURES = 1024  # a first layer of 16K weights: a full checkpoint of about 140 KB, many pages of a tmpfs
PAGE = 4096


def trainer(folder: Path, **kwargs: Any) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel(num_features=FEATURES)
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, num_features=FEATURES),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        save_folder=str(folder),
        save_interval="1ba",
        progress_bar=False,
        seed=0,
        **{"max_duration": "4ba", **kwargs},
    )


def fit_until_it_fails(folder: Path, **kwargs: Any) -> dict[str, Any]:
    """Trains, saving every batch onto ``folder``'s disk; what the save raised and what the disk holds after."""
    run = trainer(folder, **kwargs)
    try:
        run.fit()
        failure = None
    except BaseException as e:  # the test says what it should be (a raw DCP error is not an Exception)
        failure = e
    finally:
        run.close()
    names = sorted(os.listdir(folder)) if folder.is_dir() else []
    readable = [n for n in names if n.endswith(".pt") and not n.startswith("latest") and _reads(folder / n)]
    latest = folder / "latest-rank0.pt"
    return {
        "error": None if failure is None else type(failure).__name__,
        "message": str(failure),
        "names": names,
        "readable": readable,
        "latest": os.readlink(latest) if latest.is_symlink() else None,
    }


def _reads(path: Path) -> bool:
    try:
        read_checkpoint(path)
        return True
    except Exception:
        return False


def size_of(folder: Path) -> int:
    return sum(Path(root, name).lstat().st_size for root, _, names in os.walk(folder) for name in names)


def pages(size: float) -> int:
    return math.ceil(size / PAGE) * PAGE


# ---- the disks -----------------------------------------------------------------------------------------------------


def mount_tmpfs(folder: Path, size: int) -> None:
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)


class EmulatedDisks:
    """Wraps ``open`` (the built-in one and ``io.open``, which pathlib calls) so that writes under a disk's folder
    fail with ENOSPC once that folder's files would exceed its size (deleted files give their room back), and
    ``shutil.disk_usage`` so that it reports what is left."""

    def __init__(self) -> None:
        self.sizes: dict[Path, int] = {}
        self.original_open, self.original_usage = io.open, shutil.disk_usage
        builtins.open = io.open = self.open  # type: ignore[assignment]
        shutil.disk_usage = self.usage  # type: ignore[assignment]

    def add(self, folder: Path, size: int) -> None:
        folder.mkdir(parents=True)
        self.sizes[folder.resolve()] = size

    def disk(self, path: Any) -> Path | None:
        return next((f for f in self.sizes if Path(path).resolve().is_relative_to(f)), None)

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = self.original_open(file, mode, *args, **kwargs)
        folder = None if isinstance(file, int) or not any(c in mode for c in "wax+") else self.disk(file)
        if folder is None:
            return handle
        return _Limited(handle, lambda n: size_of(folder) + n <= self.sizes[folder])

    def usage(self, path: Any) -> Any:
        folder = self.disk(path)
        if folder is None:
            return self.original_usage(path)
        used = size_of(folder)
        return shutil._ntuple_diskusage(self.sizes[folder], used, self.sizes[folder] - used)  # type: ignore[attr-defined]


class _Limited:
    def __init__(self, handle: Any, fits: Callable[[int], bool]) -> None:
        self.handle, self.fits = handle, fits

    def write(self, data: Any) -> int:
        self.handle.flush()
        if not self.fits(memoryview(data).nbytes):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.handle.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.handle.close()


# ---- the three saves -----------------------------------------------------------------------------------------------


def main() -> None:
    mode, folder = sys.argv[1], Path(sys.argv[2])
    emulated = EmulatedDisks() if mode == "emulated" else None

    def disk(name: str, size: int) -> Path:
        path = folder / name
        emulated.add(path, size) if emulated is not None else mount_tmpfs(path, size)
        return path

    # The sizes of one checkpoint of each kind, saved to the test's own disk first.
    probe = folder / "probe"
    trainer(probe / "full", max_duration="1ba").fit()
    trainer(probe / "weights", max_duration="1ba", save_weights_only=True, save_filename="w.safetensors").fit()
    full = (probe / "full" / "ep0-ba1-rank0.pt").stat().st_size
    weights = (probe / "weights" / "w.safetensors").stat().st_size
    result = {"full_size": full}
    result["one_file"] = fit_until_it_fails(disk("one_file", pages(2.5 * full)), save_num_checkpoints_to_keep=2)
    result["safetensors"] = fit_until_it_fails(
        disk("safetensors", pages(weights / 2)),
        save_weights_only=True,
        save_filename="ep{epoch}-ba{batch}-rank{rank}.safetensors",
    )
    store = torch_dist.FileStore(str(folder / "store"), 1)
    torch_dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        sharded = {"module_classes": ["Linear"], "min_params": None, "state_dict_type": "sharded"}
        result["sharded"] = fit_until_it_fails(disk("sharded", pages(full / 2)), fsdp_config=sharded)
    finally:
        torch_dist.destroy_process_group()
    (folder / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
