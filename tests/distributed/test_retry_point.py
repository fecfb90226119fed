"""What a retried attempt starts from: composer.distributed.retry_point (the bitwise retries themselves are tested
through the Trainer in tests/distributed/test_microbatching.py)."""

from __future__ import annotations

import collections
import random
from typing import Any

import numpy as np
import torch

from composer.distributed.retry_point import NumpyState, RetryPoint


def test_numpy_state_is_read_again_whenever_it_may_have_changed():
    kept = NumpyState()
    np.random.seed(0)
    first = kept.get()
    assert kept.get() is first  # nothing drew: the state read last
    np.random.rand()
    moved = kept.get()
    assert moved is not first and np.array_equal(moved[1], np.random.get_state()[1])
    np.random.seed(0)
    assert kept.get()[2] == first[2] and np.array_equal(kept.get()[1], first[1])
    np.random.standard_normal()  # leaves a Gaussian pending: taking it moves no word
    pending = kept.get()
    np.random.standard_normal()
    taken = kept.get()
    assert pending[3] == 1 and taken[3] == 0 and taken[2] == pending[2]


def test_a_retry_point_puts_back_the_random_states_and_the_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.5))
    state = collections.namedtuple("Rng", "rng")(torch.Generator().manual_seed(1))

    def draws() -> list[Any]:
        model(torch.randn(8, 4, generator=state.rng))
        return [
            random.random(),
            np.random.standard_normal(),
            torch.rand(2),
            *[b.clone() for b in model.buffers()],
        ]

    point = RetryPoint(state, model)  # type: ignore[arg-type]  # only its rng is read
    np.random.standard_normal()  # a Gaussian pending
    point.keep()
    first = draws()
    point.restore()
    again = draws()
    for a, b in zip(first, again, strict=True):
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b))
