"""Where a retried attempt at a batch starts from (``grad_accum='auto'``): :class:`RetryPoint`.

An attempt that runs out of memory is run again on the same batch with the same random draws
(:mod:`composer.distributed.microbatching`), so what it may change besides the gradients is kept before the first
attempt at every batch and put back before a retry. Kept every batch, it must cost little: see :class:`RetryPoint`.
"""

from __future__ import annotations

import ctypes
import random
from typing import Any

import numpy as np
import torch
from numpy.random.mtrand import get_bit_generator

from composer.core.state import State

__all__ = ["NumpyState", "RetryPoint"]


class NumpyState:
    """NumPy's global random state (``np.random.get_state()``), read again only when it may have changed.

    ``get_state`` copies the 624 words of the Mersenne Twister one by one (tens of microseconds). Its words and
    position are also readable where the bit generator keeps them (``ctypes.state_address``: 2.5 kB compared in about
    a microsecond), so :meth:`get` returns the state it read last while they are unchanged and no cached Gaussian was
    pending then (a pending one is taken without moving the words). Where that memory does not hold the state's words
    (another bit generator), every call reads the state.

    Example:
        >>> kept = NumpyState()
        >>> state = kept.get()
        >>> kept.get() is state  # nothing drew since
        True
        >>> _ = np.random.rand()
        >>> kept.get() is state
        False
    """

    def __init__(self) -> None:
        self._generator: Any = None
        self._words: Any = None  # the generator's words and position, where it keeps them; None when unknown
        self._seen = b""
        self._state: Any = None

    def get(self) -> Any:
        """The global state now, as ``np.random.get_state()`` gives it (the object read last, if still current)."""
        words = self._words
        if self._generator is not get_bit_generator():
            words = self._find_words()
        elif words is not None and self._state is not None and bytes(words) == self._seen:
            return self._state
        self._state = np.random.get_state()
        if words is not None:
            self._seen = bytes(words) if not self._state[3] else b""  # a pending Gaussian: read every time
        return self._state

    def _find_words(self) -> Any:
        generator = self._generator = get_bit_generator()
        self._words = None
        state: Any = np.random.get_state()
        if state[0] != "MT19937":
            return None
        words = (ctypes.c_uint32 * 625).from_address(generator.ctypes.state_address)  # key[624], then pos
        expected = np.append(state[1], np.uint32(state[2])).astype(np.uint32).tobytes()
        self._words = words if bytes(words) == expected else None
        return self._words


class RetryPoint:
    """Where a retried attempt starts from: what an attempt at a batch may change besides the gradients, kept before
    the first attempt and put back before each retry.

    That is the random states that user code and algorithms draw from (Python's, NumPy's, torch's CPU and CUDA
    generators, ``state.rng``) and the model's buffers (BatchNorm statistics, which a forward pass updates). The
    dataloader's generators are left out: the batch is already drawn.

    Kept before every batch under ``'auto'``, so at little cost: the buffers are copied with one call into copies made
    once (:meth:`track` finds them again, after ``FIT_START``'s algorithms), NumPy's state is read again only when it
    changed (:class:`NumpyState`), and the others are read as they are (about a microsecond each; Python's about 10).

    Args:
        state (State): The state whose ``rng`` is kept.
        model (torch.nn.Module): The model whose buffers are kept.
    """

    def __init__(self, state: State, model: torch.nn.Module) -> None:
        self._state = state
        self._model = model
        self._buffers: list[torch.Tensor] = []
        self._copies: list[torch.Tensor] = []
        self._numpy = NumpyState()
        self._kept: tuple[Any, Any, torch.Tensor, list[torch.Tensor] | None, torch.Tensor] | None = None
        self.track()

    def track(self) -> None:
        """Finds the model's buffers again (when its modules may have changed) and makes their copies."""
        self._buffers = list(self._model.buffers())
        self._copies = [torch.empty_like(buffer) for buffer in self._buffers]

    def keep(self) -> None:
        """Keeps the random states and copies the buffers, as they are before the first attempt at a batch."""
        cuda = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]  # initialised implies available
        self._kept = (
            random.getstate(),
            self._numpy.get(),
            torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if cuda else None,
            self._state.rng.get_state(),
        )
        if self._buffers:
            torch._foreach_copy_(self._copies, self._buffers)

    def restore(self) -> None:
        """Puts back what :meth:`keep` kept, before a retry."""
        assert self._kept is not None, "keep() first"
        python_rng, numpy_rng, torch_rng, cuda_rng, state_rng = self._kept
        random.setstate(python_rng)
        np.random.set_state(numpy_rng)
        torch.set_rng_state(torch_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        self._state.rng.set_state(state_rng)
        if self._buffers:
            with torch.no_grad():
                torch._foreach_copy_(self._buffers, self._copies)
