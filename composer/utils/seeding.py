"""Seeding every random number generator a training run touches."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["configure_deterministic_mode", "new_seed", "seed_all"]


def new_seed() -> int:
    """A fresh random seed in [0, 2**32 - 1] (from the OS, not from any seeded generator).

    Returns:
        int: The seed.
    """
    return int.from_bytes(os.urandom(4), "little")


def seed_all(seed: int) -> None:
    """Seeds Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device) with ``seed``.

    The library's own code draws from explicit generators; this is for the user code it runs (models, datasets).

    Args:
        seed (int): In [0, 2**32 - 1].
    """
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed={seed!r} must be an integer in [0, 2**32 - 1].")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def configure_deterministic_mode() -> None:
    """Makes torch pick deterministic kernels (slower; raises on operations that have none)."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
