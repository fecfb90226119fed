"""Throughput of the batch-level augmentation ops against the best plain-torch expression of the same op, on CPU.

Each op runs on a batch of 256 images of 3x32x32 (smooth_labels: 256 rows of 1000-class logits). The library call
(``composer.functional``) and a plain-torch baseline written here do the same work, including any random draws, from
the same inputs; where several torch expressions are natural, each is timed and the fastest is the baseline. Rounds
interleave the two (alternating which goes first, so drift in machine speed hits both) and the best round of each
is reported, in samples per second. ``blur_2d`` is included when ``composer.algorithms.blurpool`` provides it.

Run:  .venv/bin/python benchmarks/batch_ops.py [--rounds 15] [--iters 50] [--threads 1]
Target: every ratio (baseline samples/s / library samples/s) <= 1.3, with no per-sample Python loop in any op.
"""

from __future__ import annotations

import argparse
import ctypes
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import composer.functional as CF

__all__: list[str] = []

BATCH, CHANNELS, SIZE, CLASSES, LOGIT_CLASSES = 256, 3, 32, 10, 1000


def _seeded() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def make_cases() -> dict[str, tuple[Callable[[], Any], list[Callable[[], Any]]]]:
    """op name -> (library call, [plain-torch baselines]); each callable does one batch."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE, generator=g)
    y = torch.randint(0, CLASSES, (BATCH,), generator=g)
    perm = torch.randperm(BATCH, generator=g)
    lam = 0.3
    top, bottom, left, right = 4, 20, 10, 26  # a 16x16 box: lam' = 1 - 256 / 1024
    own = 1 - (bottom - top) * (right - left) / (SIZE * SIZE)
    logits = torch.randn(BATCH, LOGIT_CLASSES, generator=g)
    labels = torch.randint(0, LOGIT_CLASSES, (BATCH,), generator=g)
    gen = _seeded()

    def mixup_lerp() -> Any:
        one_hot = F.one_hot(y, CLASSES).float()
        return torch.lerp(x[perm], x, lam), torch.lerp(one_hot[perm], one_hot, lam)

    def mixup_arith() -> Any:
        one_hot = F.one_hot(y, CLASSES).float()
        return lam * x + (1 - lam) * x[perm], lam * one_hot + (1 - lam) * one_hot[perm]

    def cutmix_slice() -> Any:
        mixed = x.clone()
        mixed[:, :, top:bottom, left:right] = x[perm, :, top:bottom, left:right]
        one_hot = F.one_hot(y, CLASSES).float()
        return mixed, torch.lerp(one_hot[perm], one_hot, own)

    def cutmix_where() -> Any:
        mask = torch.zeros(SIZE, SIZE, dtype=torch.bool)
        mask[top:bottom, left:right] = True
        one_hot = F.one_hot(y, CLASSES).float()
        return torch.where(mask, x[perm], x), torch.lerp(one_hot[perm], one_hot, own)

    def cutout_slice() -> Any:
        cy, cx = torch.randint(0, SIZE, (2,), generator=gen).tolist()
        out = x.clone()
        out[..., max(cy - 8, 0) : cy + 8, max(cx - 8, 0) : cx + 8] = 0
        return out

    def cutout_mask() -> Any:
        cy, cx = torch.randint(0, SIZE, (2,), generator=gen).tolist()
        rows, cols = torch.arange(SIZE)[:, None], torch.arange(SIZE)[None, :]
        hole = (rows >= cy - 8) & (rows < cy + 8) & (cols >= cx - 8) & (cols < cx + 8)
        return x.masked_fill(hole, 0)

    kept = int(0.85 * SIZE)

    def colout_gather() -> Any:
        rows = torch.randperm(SIZE, generator=gen)[:kept].sort().values
        cols = torch.randperm(SIZE, generator=gen)[:kept].sort().values
        return x[:, :, rows[:, None], cols]

    def colout_index_select() -> Any:
        rows = torch.randperm(SIZE, generator=gen)[:kept].sort().values
        cols = torch.randperm(SIZE, generator=gen)[:kept].sort().values
        return x.index_select(2, rows).index_select(3, cols)

    def smooth_one_hot() -> Any:
        return F.one_hot(labels, LOGIT_CLASSES).float() * 0.9 + 0.1 / LOGIT_CLASSES

    def smooth_scatter() -> Any:
        full = torch.full((BATCH, LOGIT_CLASSES), 0.1 / LOGIT_CLASSES)
        return full.scatter_(1, labels[:, None], 0.9 + 0.1 / LOGIT_CLASSES)

    cases: dict[str, tuple[Callable[[], Any], list[Callable[[], Any]]]] = {
        "mixup": (lambda: CF.mixup_batch(x, y, lam, CLASSES, indices=perm), [mixup_lerp, mixup_arith]),
        "cutmix": (
            lambda: CF.cutmix_batch(x, y, CLASSES, bbox=(top, bottom, left, right), indices=perm),
            [cutmix_slice, cutmix_where],
        ),
        "cutout": (lambda: CF.cutout(x, 1, 16, generator=gen), [cutout_slice, cutout_mask]),
        "colout": (lambda: CF.colout(x, 0.15, 0.15, generator=gen), [colout_gather, colout_index_select]),
        "smooth_labels": (lambda: CF.smooth_labels(logits, labels, 0.1), [smooth_one_hot, smooth_scatter]),
    }
    try:
        from composer.algorithms.blurpool import blur_2d
    except ImportError:
        print("blur_2d: composer.algorithms.blurpool is not available; skipped")
    else:
        taps = torch.tensor([1.0, 2.0, 1.0])
        weight = (torch.outer(taps, taps) / 16).expand(CHANNELS, 1, 3, 3).contiguous()

        def blur_conv() -> Any:
            return F.conv2d(x, weight, padding=1, groups=CHANNELS)

        cases["blur_2d"] = (lambda: blur_2d(x), [blur_conv])
    return cases


def keep_freed_memory() -> None:
    """Asks glibc to serve tensors of this size from the heap and keep freed memory for reuse.

    Otherwise each large tensor may come from a fresh ``mmap`` whose pages fault in on first touch; on a busy machine
    those faults dominate and swing the timings of whichever op allocates more. Both sides benefit alike.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: keep the allocator's defaults
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # the largest value glibc accepts
    libc.mallopt(m_trim_threshold, 1024 * 1024 * 1024)


def samples_per_second(fn: Callable[[], Any], iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return BATCH * iters / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    cases = make_cases()
    print(f"batch {BATCH} x {CHANNELS}x{SIZE}x{SIZE} (smooth_labels: {BATCH} x {LOGIT_CLASSES} logits), CPU, ", end="")
    print(f"{args.threads} thread(s), best of {args.rounds} rounds of {args.iters} batches")
    print(f"{'op':<14}{'library (samples/s)':>22}{'baseline (samples/s)':>23}{'ratio':>8}  baseline")
    worst = 0.0
    for name, (library, baselines) in cases.items():
        for fn in (library, *baselines):
            samples_per_second(fn, 10)  # warm up
        best_lib = 0.0
        best_base = [0.0] * len(baselines)
        for r in range(args.rounds):
            if r % 2 == 0:
                best_lib = max(best_lib, samples_per_second(library, args.iters))
            for i, base in enumerate(baselines):
                best_base[i] = max(best_base[i], samples_per_second(base, args.iters))
            if r % 2 == 1:
                best_lib = max(best_lib, samples_per_second(library, args.iters))
        fastest = max(range(len(baselines)), key=lambda i: best_base[i])
        ratio = best_base[fastest] / best_lib
        worst = max(worst, ratio)
        print(f"{name:<14}{best_lib:>22,.0f}{best_base[fastest]:>23,.0f}{ratio:>8.2f}  {baselines[fastest].__name__}")
    print(f"worst ratio: {worst:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
