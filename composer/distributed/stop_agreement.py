"""Stopping every rank after the same batch, at almost no cost per batch: :class:`StopAgreement`.

A signal (SIGTERM, SIGINT) reaches one rank, or all of them at slightly different batches; a sharded checkpoint needs
every rank's shard of one batch. The Trainer's preemption handling (:mod:`composer.trainer.preemption`) sets
:attr:`StopAgreement.requested` in its signal handler and asks :meth:`StopAgreement.agreed` after every batch.
"""

from __future__ import annotations

import time

import torch

from composer.utils import dist

__all__ = ["StopAgreement"]


class StopAgreement:
    """Whether to stop after this batch: the same answer on every rank, at almost no cost per batch.

    A rank that receives a signal sets :attr:`requested`. Unlaunched, that is the answer. Launched, every rank must
    stop after the same batch, so the ranks combine their requests, but without a collective of their own per step:

    * when the batch's sample and token counts are all-reduced anyway (batches of different sizes, or token counts:
      :func:`~composer.distributed.data.batch_totals`), the request rides on that all-reduce (:meth:`carried`), and
      the answer is known after every batch;
    * otherwise the ranks all-reduce (MAX) their requests every ``k`` batches, ``k`` chosen so that a check comes
      about every ``check_every`` seconds: the same all-reduce carries the longest time per batch any rank measured
      since the previous check, from which every rank computes the same next ``k``. A signal is then acted on within
      about ``check_every`` seconds plus a batch, for one all-reduce of two numbers per ``check_every`` seconds.

    Args:
        launched (bool): Whether this process trains with others (``torch.distributed``, world size > 1).
        check_every (float): Seconds between checks, when the request cannot ride on the counts.

    Example:
        >>> agreement = StopAgreement(launched=False)
        >>> agreement.agreed()
        False
        >>> agreement.requested = True
        >>> agreement.agreed()
        True
    """

    MAX_BATCHES = 10_000  # at most this many batches between two checks

    def __init__(self, launched: bool, check_every: float = 1.0) -> None:
        self.launched = launched
        self.check_every = check_every
        self.requested = False
        self._carried: bool | None = None
        self._countdown = 1
        self._every = 1
        self._since: float | None = None

    def reset(self) -> None:
        """Forgets the request and starts the schedule again (every rank, when ``fit`` starts)."""
        self.requested, self._carried = False, None
        self._countdown = self._every = 1
        self._since = None

    def carried(self, any_requested: bool | None) -> None:
        """What the batch's counts' all-reduce said (whether any rank requested a stop); None: it made none."""
        self._carried = any_requested

    def agreed(self) -> bool:
        """Called after every batch, on every rank: whether the ranks stop now."""
        if not self.launched:
            return self.requested
        carried, self._carried = self._carried, None
        if carried is not None:
            return carried
        self._countdown -= 1
        return self._countdown <= 0 and self._check()

    def _check(self) -> bool:
        per_batch = 0.0 if self._since is None else (time.monotonic() - self._since) / self._every
        votes = torch.tensor([float(self.requested), per_batch], dtype=torch.float64, device=dist.collective_device())
        stop, per_batch = (float(v) for v in dist.all_reduce(votes, "max").tolist())
        # The same reduced numbers on every rank, so the same next interval.
        self._every = max(1, int(min(self.MAX_BATCHES, self.check_every / per_batch))) if per_batch > 0 else 1
        self._countdown = self._every
        self._since = time.monotonic()
        return stop > 0
