"""Seeding and deterministic kernels, under the module name of MosaicML Composer v0.32.1.

``from composer.utils import reproducibility; reproducibility.seed_all(42)`` works as it did there. The functions
are those of :mod:`composer.utils.seeding`; the Trainer calls them itself with its ``seed`` and
``deterministic_mode`` arguments, so a script needs them only for what it does before building the Trainer (its
model's initialisation, say). v0.32.1's ``get_rng_state`` and ``load_rng_state`` are not here: the Trainer saves every
random state in its checkpoints and restores it on resumption, and a loop of one's own uses
:meth:`~composer.core.state.State.capture_rng` and :meth:`~composer.core.state.State.restore_rng`.

Example:
    >>> import torch
    >>> from composer.utils import reproducibility
    >>> reproducibility.seed_all(42)
    >>> first = torch.rand(1)
    >>> with reproducibility.seed_context(42):
    ...     again = torch.rand(1)
    >>> torch.equal(first, again)
    True
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch

from composer.utils.porting import pointer_getattr
from composer.utils.seeding import configure_deterministic_mode, new_seed, seed_all

__all__ = ["MAX_SEED", "configure_deterministic_mode", "get_random_seed", "seed_all", "seed_context"]

MAX_SEED = 2**32 - 1
"""The largest seed :func:`seed_all` accepts (NumPy's limit)."""


def get_random_seed() -> int:
    """A fresh random seed in ``[0, MAX_SEED]``, drawn from the operating system (v0.32.1's name for :func:`new_seed`).

    Returns:
        int: The seed.
    """
    return new_seed()


@contextlib.contextmanager
def seed_context(seed: int) -> Iterator[None]:
    """Seeds Python, NumPy and torch (:func:`seed_all`) for the ``with`` block, then puts their states back.

    Args:
        seed: The seed, in ``[0, MAX_SEED]``.

    Yields:
        None: The block runs seeded.
    """
    python_state, numpy_state = random.getstate(), np.random.get_state()
    torch_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
    seed_all(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


_POINTER = (
    "the Trainer saves every random state in its checkpoints and restores it when it resumes; in a loop of your own "
    "use State.capture_rng() and State.restore_rng()."
)
__getattr__ = pointer_getattr(__name__, {"get_rng_state": _POINTER, "load_rng_state": _POINTER})
