"""How the ranks of a launched run agree that one of them ran out of memory, so that no rank is left waiting in a
collective that another will never join: :class:`OutOfMemoryAgreement`.

With ``grad_accum='auto'`` an attempt at a batch may fail on one rank and not on the others. Afterwards every rank
must learn of it (and retry) and none may be stuck. Under DistributedDataParallel the attempt communicates nothing
(its gradients are averaged once the ranks agree, see :mod:`composer.distributed.microbatching`), so one all-reduce
after the attempt suffices. Under FSDP the forward and backward passes are chains of collectives (each unit
all-gathers its parameters before it runs, the backward reduce-scatters the gradients): a rank that ran out of memory
stops in the middle of the chain while the others go on to the next collective.

So every FSDP collective is preceded by a *checkpoint* (:meth:`OutOfMemoryAgreement.checkpoint`): FSDP calls a
communication object of ours (:func:`install_fsdp_checkpoints`, through ``FSDPModule.set_custom_all_gather`` and
``set_custom_reduce_scatter``), which first all-reduces a small flag tensor on the default process group and only
then runs the collective. FSDP allocates a collective's buffers before it calls the object, so a rank that runs out
of memory anywhere (in its own computation or allocating a buffer) has issued nothing the others have not: every
collective it started, they started too. After an attempt, whether it succeeded or failed, every rank *settles*
(:meth:`OutOfMemoryAgreement.settle`): it all-reduces the same tensor in rounds until no rank is still running.

Each round is one all-reduce (MAX) of ``[out_of_memory, at_one_sample, proposal, running, *extra]``:

* a rank at a checkpoint sends ``[0, 0, 0, 1]``: if the result says some rank ran out of memory, it raises
  :class:`PeerOutOfMemoryError` instead of running the collective, which ends its attempt too;
* a rank that settles sends what it knows with ``running=0``, and repeats until the result says no rank is
  running (every other rank has settled as well).

Since every rank issues the same sequence of all-reduces, a checkpoint of one rank always meets either the same
checkpoint of the others or their settling rounds, and every rank ends the attempt with the same answer. Without
failures the cost is one all-reduce per FSDP collective (and a host synchronisation: the flag is read) and one per
attempt.

Example:
    >>> agreement = OutOfMemoryAgreement()  # a single process: nothing to agree with, no collective
    >>> agreement.checkpoint()
    >>> agreement.settle(out_of_memory=True, at_one_sample=False, proposal=4)
    Settlement(out_of_memory=True, at_one_sample=False, proposal=4, extra=[])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from composer.utils import dist

__all__ = ["OutOfMemoryAgreement", "PeerOutOfMemoryError", "Settlement", "install_fsdp_checkpoints"]

_RUNNING = 3  # the index of the ``running`` flag in a round's tensor


class PeerOutOfMemoryError(RuntimeError):
    """Raised at an FSDP collective on a rank whose attempt was going well, because another rank ran out of memory:
    the collective is not run and this rank's attempt ends too (``grad_accum='auto'`` then retries it everywhere)."""


@dataclass(frozen=True)
class Settlement:
    """What every rank learns when it settles an attempt (the maximum over all ranks and rounds of each entry).

    Attributes:
        out_of_memory (bool): Some rank ran out of memory.
        at_one_sample (bool): Some rank ran out of memory with one sample per microbatch.
        proposal (int | None): The largest next microbatch count proposed (None: no rank proposed one).
        extra (list[int]): The maximum of each of the ``extra`` integers the ranks passed.
    """

    out_of_memory: bool
    at_one_sample: bool
    proposal: int | None
    extra: list[int]


class OutOfMemoryAgreement:
    """The checkpoints and the settling rounds of the module docstring, on the default process group.

    Unlaunched (no process group, or one process) nothing is communicated: :meth:`checkpoint` returns at once and
    :meth:`settle` returns what it was given.
    """

    def checkpoint(self) -> None:
        """Called just before an FSDP collective: learns whether any rank ran out of memory in this attempt.

        Raises:
            PeerOutOfMemoryError: Another rank ran out of memory (and settles): skip the collective, end the attempt.
        """
        if not _launched():
            return
        agreed = _all_reduce_max([0, 0, 0, 1])
        if agreed[0]:
            raise PeerOutOfMemoryError(
                "Another rank ran out of memory during this attempt; this rank stops before its next FSDP collective "
                "so that every rank retries the batch together."
            )

    def settle(
        self, *, out_of_memory: bool, at_one_sample: bool, proposal: int | None, extra: Sequence[int] = ()
    ) -> Settlement:
        """Ends an attempt on this rank: rounds of all-reduces until no rank is still running it.

        Args:
            out_of_memory (bool): This rank ran out of memory (or learnt that another did).
            at_one_sample (bool): It did so with one sample per microbatch.
            proposal (int | None): The microbatch count it proposes next (None: none).
            extra (Sequence[int]): More integers to take the maximum of over the ranks; every rank passes as many.
                Only where no checkpoint is installed (DistributedDataParallel): a checkpoint's tensor has no room
                for them.
        """
        flags = [int(out_of_memory), int(at_one_sample), proposal or 0, 0, *extra]
        if not _launched():
            return Settlement(out_of_memory, at_one_sample, proposal, list(extra))
        agreed = flags
        while True:
            result = _all_reduce_max(flags)
            agreed = [max(a, b) for a, b in zip(agreed, result, strict=True)]
            if not result[_RUNNING]:
                break
        return Settlement(bool(agreed[0]), bool(agreed[1]), agreed[2] or None, agreed[4:])


def install_fsdp_checkpoints(model: torch.nn.Module, agreement: OutOfMemoryAgreement) -> int:
    """Makes every FSDP unit of ``model`` (sharded with ``fully_shard``) pass ``agreement``'s checkpoint before each
    of its all-gathers and reduce-scatters; returns how many units it changed.

    The communication objects allocate their buffers with ``torch.empty`` and run the collectives as FSDP's own
    defaults do (``all_gather_single``, ``reduce_scatter_single``).
    """
    from torch.distributed.fsdp import FSDPModule

    all_gather, reduce_scatter = _checkpointed_comms(agreement)
    units = [module for module in model.modules() if isinstance(module, FSDPModule)]
    for unit in units:
        unit.set_custom_all_gather(all_gather)
        unit.set_custom_reduce_scatter(reduce_scatter)
    return len(units)


def _checkpointed_comms(agreement: OutOfMemoryAgreement) -> tuple[Any, Any]:
    # FSDP's communication interfaces, imported on use (torch.distributed.fsdp is not loaded with the Trainer).
    import torch.distributed as torch_dist
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter

    class CheckpointedAllGather(AllGather):
        def allocate(self, size: Sequence[Any], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(
            self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: Any, async_op: bool = False
        ) -> Any:
            agreement.checkpoint()
            return torch_dist.all_gather_single(output_tensor, input_tensor, group=group, async_op=async_op)

    class CheckpointedReduceScatter(ReduceScatter):
        def allocate(self, size: Sequence[Any], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(
            self,
            output_tensor: torch.Tensor,
            input_tensor: torch.Tensor,
            group: Any,
            op: Any,
            async_op: bool = False,
        ) -> Any:
            agreement.checkpoint()
            return torch_dist.reduce_scatter_single(
                output=output_tensor, input=input_tensor, group=group, op=op, async_op=async_op
            )

    return CheckpointedAllGather(), CheckpointedReduceScatter()


def _launched() -> bool:
    return dist.is_initialized() and dist.get_world_size() > 1


def _all_reduce_max(flags: Sequence[int]) -> list[int]:
    return dist.all_reduce(torch.tensor(flags, dtype=torch.int64, device=dist.collective_device()), "max").tolist()
