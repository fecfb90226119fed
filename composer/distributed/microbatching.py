"""Automatic microbatching (``grad_accum='auto'``): when a batch runs out of GPU memory, split it into twice as many
microbatches and train it again from its start, until it fits.

The Trainer's loop runs each batch's gradient as one *attempt* (``BEFORE_TRAIN_BATCH`` to the last microbatch's
backward) through :meth:`Microbatching.run`. With ``'auto'``, before the first attempt it keeps a
:class:`~composer.distributed.retry_point.RetryPoint` (the random states and the model's buffers); when an attempt
raises :class:`torch.cuda.OutOfMemoryError` it frees the attempt's memory, doubles the count (:func:`next_grad_accum`;
a microbatch of one sample that still fails raises :class:`MicrobatchTooSmallError`), logs it, keeps it in
``state.grad_accum`` (checkpoints carry it), puts the retry point back and runs the attempt again on the same batch,
with the same random draws. No optimizer step, scheduler step or timer update happens in an attempt, so the update
equals that of a run started at the final count. Launched, the ranks agree after every attempt
(:meth:`Microbatching.agree`) and all retry when one ran out of memory; evaluation batches are split the same way.
Which events fire again is in the guide "How it works"; the protocol across ranks, under DDP and FSDP, and its cost
are in ``composer/distributed/DISTRIBUTED.md``.

Example:
    >>> next_grad_accum(1, num_samples=8)
    2
    >>> next_grad_accum(4, num_samples=6)  # microbatches of 2, 2, 1, 1 -> of one sample each
    6
    >>> next_grad_accum(8, num_samples=8) is None  # already one sample per microbatch
    True
"""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch

from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.distributed.oom_agreement import OutOfMemoryAgreement, PeerOutOfMemoryError, Settlement
from composer.distributed.retry_point import RetryPoint
from composer.utils import dist

__all__ = [
    "MicrobatchTooSmallError",
    "Microbatching",
    "average_gradients",
    "broadcast_buffers",
    "describe_out_of_memory",
    "free_attempt_memory",
    "is_out_of_memory",
    "join_outputs",
    "next_grad_accum",
    "sum_losses",
    "weight_loss",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_BUCKET_BYTES = 25 * 1024 * 1024  # DDP's default bucket size


class MicrobatchTooSmallError(RuntimeError):
    """Raised when a microbatch of one sample runs out of memory: ``grad_accum='auto'`` cannot split it further."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is CUDA running out of memory (the errors ``grad_accum='auto'`` recovers from).

    Example:
        >>> is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        True
        >>> is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
        False
    """
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    # Errors raised by a kernel's own allocator (cuBLAS, cuDNN workspaces) are plain RuntimeErrors.
    return isinstance(error, RuntimeError) and str(error).startswith("CUDA out of memory")


def describe_out_of_memory(error: BaseException) -> tuple[str | None, bool]:
    """``(failure, told)`` for an attempt that ended with ``error``: the first line of this rank's own out-of-memory
    error (None when it was told at an FSDP collective), and whether it was told that another rank ran out.

    Example:
        >>> describe_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        ('CUDA out of memory. Tried to allocate 2.00 GiB', False)
    """
    if isinstance(error, PeerOutOfMemoryError):
        return None, True
    return (str(error).splitlines()[0] if str(error) else type(error).__name__), False


def next_grad_accum(grad_accum: int, num_samples: int) -> int | None:
    """The microbatch count after ``grad_accum`` microbatches of a ``num_samples`` batch ran out of memory: twice as
    many (half the samples each), at most one sample each; None when the microbatches already hold one sample."""
    if min(grad_accum, num_samples) >= num_samples:
        return None
    return min(2 * grad_accum, num_samples)


def join_outputs(parts: Sequence[Any]) -> Any:
    """The outputs of a batch's parts put together along the sample dimension: tensors concatenated, tuples, lists
    and dicts joined entry by entry; anything else (a 0-d tensor, an object) stays the list of the parts' values.

    Example:
        >>> join_outputs([torch.zeros(2, 3), torch.ones(1, 3)]).shape
        torch.Size([3, 3])
        >>> joined = join_outputs([{"logits": torch.zeros(2, 3), "n": 2}, {"logits": torch.ones(1, 3), "n": 1}])
        >>> joined["logits"].shape, joined["n"]
        (torch.Size([3, 3]), [2, 1])
    """
    first = parts[0]
    if isinstance(first, torch.Tensor) and first.dim() > 0:
        return torch.cat(list(parts))
    if isinstance(first, dict):
        return {key: join_outputs([part[key] for part in parts]) for key in first}
    if isinstance(first, (tuple, list)) and not hasattr(first, "_fields"):
        return type(first)(join_outputs([part[i] for part in parts]) for i in range(len(first)))
    return list(parts)


def sum_losses(loss: Any) -> torch.Tensor:
    """One tensor to backpropagate from a loss that may be a tensor, or a sequence or mapping of tensors.

    Example:
        >>> sum_losses({"ce": torch.tensor(1.5), "aux": torch.tensor(0.5)})
        tensor(2.)
    """
    if isinstance(loss, torch.Tensor):
        return loss
    parts = list(loss.values()) if isinstance(loss, dict) else list(loss)
    return torch.stack([p.float() for p in parts]).sum()


def weight_loss(loss: Any, weight: float) -> Any:
    """``loss`` (a tensor, or a sequence or mapping of them) times ``weight``: a microbatch's loss weighted by its
    share of the batch's samples, so that uneven microbatches add up to the batch's mean loss.

    Example:
        >>> weight_loss((torch.tensor(2.0), torch.tensor(4.0)), 0.25)
        (tensor(0.5000), tensor(1.))
    """
    if isinstance(loss, torch.Tensor):
        return loss * weight
    if isinstance(loss, dict):
        return {k: v * weight for k, v in loss.items()}
    return type(loss)(v * weight for v in loss)


def microbatch_size(num_samples: int, grad_accum: int) -> int:
    """The largest microbatch of a ``num_samples`` batch split into ``grad_accum`` parts (as ``split_batch`` does)."""
    return math.ceil(num_samples / max(1, min(grad_accum, num_samples)))


def free_attempt_memory(state: State, parameters: Iterator[torch.nn.Parameter]) -> None:
    """Releases what a failed attempt allocated: its outputs and loss, every gradient, then the allocator's cache.

    The caller must already have dropped the error (its traceback holds the frames, and so the activations).
    """
    state.outputs, state.loss = None, None
    for optimizer in state.optimizers:
        optimizer.zero_grad(set_to_none=True)
    for parameter in parameters:  # parameters no optimizer holds get gradients too
        parameter.grad = None
    _empty_cache()


def _empty_cache() -> None:
    gc.collect()  # reference cycles through autograd's graph, if any
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()  # hand the freed blocks back, so that fragmentation does not fail the retry


def average_gradients(parameters: Sequence[torch.nn.Parameter], has_grad: Sequence[bool]) -> None:
    """Averages the gradients over the ranks as DistributedDataParallel does, after its ``no_sync`` microbatches.

    ``has_grad`` says, per parameter, whether any rank has a gradient for it: those that none has stay None (as DDP
    leaves a parameter unused on every rank); a rank without one where another has one contributes zeros. Each
    gradient is multiplied by ``1 / world_size`` and the products summed over the ranks (DDP's order of operations),
    one all-reduce per bucket of at most 25 MB of one dtype and device.
    """
    world_size = dist.get_world_size()
    grads: list[torch.Tensor] = []
    for parameter, any_rank in zip(parameters, has_grad, strict=True):
        if not any_rank:
            continue
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        grads.append(parameter.grad)
    for bucket in _buckets(grads):
        flat = torch.cat([g.reshape(-1) for g in bucket])
        flat.mul_(1.0 / world_size)
        dist.all_reduce(flat, "sum")
        offset = 0
        for grad in bucket:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()


def broadcast_buffers(module: torch.nn.Module) -> None:
    """Copies rank 0's buffers (BatchNorm statistics) to every rank, as DistributedDataParallel does before a synced
    forward pass (``broadcast_buffers=True``), which the deferred synchronisation never runs."""
    with torch.no_grad():
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)


def _buckets(grads: list[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for grad in grads:
        groups.setdefault((grad.dtype, grad.device), []).append(grad)
    for group in groups.values():
        bucket: list[torch.Tensor] = []
        size = 0
        for grad in group:
            nbytes = grad.numel() * grad.element_size()
            if bucket and size + nbytes > _BUCKET_BYTES:
                yield bucket
                bucket, size = [], 0
            bucket.append(grad)
            size += nbytes
        if bucket:
            yield bucket


class Microbatching:
    """The microbatch counts of training and evaluation, and with ``auto`` the search for the largest that fit.

    The training count is ``state.grad_accum`` (saved in checkpoints); the evaluation counts are per evaluator label
    and start at 1 in each run. The Trainer's :class:`~composer.distributed.parallelism.Parallelism` builds it
    (:meth:`~composer.distributed.parallelism.Parallelism.microbatching`), and the loop runs each batch's gradient
    through :meth:`run`. See the module docstring for the whole procedure.

    Args:
        state (State): The run's state: its batch, ``grad_accum``, random generator and timer.
        auto (bool): Whether out-of-memory errors are recovered from (``grad_accum='auto'``).
        logger (Logger): Where the new counts are logged.
        model (torch.nn.Module): The model: whose parameters' gradients failed attempts free (and :meth:`agree`
            averages, with ``defer_sync``), and whose buffers a retry puts back (and :meth:`agree` broadcasts from
            rank 0 after averaging, with ``defer_sync``, as DDP's ``broadcast_buffers`` does).
        defer_sync (bool): The attempt runs every microbatch without gradient synchronisation, and
            :meth:`agree` averages the gradients (``'auto'`` under DistributedDataParallel).
        launched (bool): Whether this process trains with others: then every attempt is settled with them.
        agreement (OutOfMemoryAgreement, optional): How the ranks agree after an attempt; default: a new one (its
            settling rounds are one all-reduce when no FSDP checkpoint is installed).
        heartbeat (Callable, optional): Gives the running :class:`composer.utils.dist.Heartbeat` (None when there is
            none). Its count of forward passes is put back to its value at the start of an attempt that every rank
            runs again, so that the ranks' counts stay equal (a failed attempt runs different numbers of passes on
            different ranks, and the heartbeat names a rank whose count is behind as the one that stopped answering).
        reset_sharded (Callable, optional): With FSDP: puts the sharded model back in a state to run again after a
            failed attempt (the root's ``FSDPModule.reset_iter_state``). Given, evaluation attempts are settled
            across the ranks too (under FSDP an evaluation forward is a chain of collectives) and every rank runs
            exactly as many evaluation forward passes per batch (see :meth:`eval_parts`).
    """

    def __init__(
        self,
        state: State,
        *,
        auto: bool,
        logger: Logger,
        model: torch.nn.Module,
        defer_sync: bool = False,
        launched: bool = False,
        agreement: OutOfMemoryAgreement | None = None,
        heartbeat: Callable[[], dist.Heartbeat | None] = lambda: None,
        reset_sharded: Callable[[], None] | None = None,
    ) -> None:
        self.auto = auto
        self.defer_sync = defer_sync
        self.agreement = agreement or OutOfMemoryAgreement()
        self.lockstep_eval = auto and reset_sharded is not None
        # Taken before every batch with 'auto' only: without, nothing is kept and no batch pays for it.
        self.retry_point = RetryPoint(state, model) if auto else None
        self._state = state
        self._launched = launched
        self._reset_sharded = reset_sharded
        self._heartbeat = heartbeat
        self._eval_mark: int | None = None  # the heartbeat's count when the current evaluation attempt started
        self._logger = logger
        self._parameters = model.parameters
        self._buffers = model if any(True for _ in model.buffers()) else None
        self._eval_counts: dict[str, int] = {}

    # ---- training --------------------------------------------------------------------------------------------------

    def run(self, attempt: Callable[[], T]) -> T:
        """Runs ``attempt``, one attempt at the gradient of the batch in ``state.batch``, and returns its result, with
        ``state.batch`` and ``state.batch_num_samples`` as they were before it (the attempt sets them to each of its
        microbatches in turn).

        With ``auto``, an attempt that runs out of memory, on this rank or another, is run again until one succeeds
        on every rank: its memory freed, ``state.grad_accum`` doubled (and logged), and the
        :class:`~composer.distributed.retry_point.RetryPoint` (kept before the first attempt) put back, so that the retry draws the same random numbers. Errors other than
        running out of memory propagate as they are.

        Raises:
            MicrobatchTooSmallError: If a rank ran out of memory with one sample per microbatch.
        """
        state = self._state
        batch, num_samples = state.batch, state.batch_num_samples
        retry_point = self.retry_point
        if retry_point is None:
            result = attempt()
            state.batch, state.batch_num_samples = batch, num_samples
            return result
        retry_point.keep()
        while True:
            mark = self._progress() if self._launched else None
            failure, told = None, False
            try:
                result = attempt()
            except Exception as error:
                if not self.recovers(error):
                    raise
                failure, told = describe_out_of_memory(error)
            # Out of the except block: the error and its traceback (the attempt's frames and activations) are gone.
            state.batch, state.batch_num_samples = batch, num_samples
            if (failure is None and not self._launched) or not self._settle(failure, told, num_samples):
                return result
            retry_point.restore()
            self._rewind(mark)

    def _settle(self, failure: str | None, told: bool, num_samples: int) -> bool:
        """Ends an attempt: agrees with the other ranks; returns whether to run it again, after freeing its memory and
        doubling ``state.grad_accum``."""
        state = self._state
        grad_accum = state.grad_accum
        proposal = next_grad_accum(grad_accum, num_samples)
        settled = self.agree(
            out_of_memory=failure is not None or told,
            at_one_sample=failure is not None and proposal is None,
            proposal=proposal,
        )
        if not settled.out_of_memory:
            return False
        self._forget_attempt(state)
        agreed_next = settled.proposal
        if settled.at_one_sample or agreed_next is None:
            where = "this rank" if failure is not None else "another rank"
            raise MicrobatchTooSmallError(
                f"Out of memory training batch {state.timer.batch.value} with microbatches of one sample "
                f"(grad_accum={grad_accum} for a batch of {num_samples} samples, on {where}: "
                f"{failure or 'see its error'}). grad_accum='auto' cannot split a batch further. To fix: make one "
                "sample fit, with a smaller model or shorter inputs, precision='bf16' or 'amp', or fsdp_config to "
                "shard the model over more devices."
            )
        state.grad_accum = agreed_next
        size = microbatch_size(num_samples, agreed_next)
        log.warning(
            "Out of memory at batch %d with grad_accum=%d (microbatches of up to %d samples)%s; retrying the batch "
            "with grad_accum=%d (microbatches of up to %d samples).",
            state.timer.batch.value,
            grad_accum,
            microbatch_size(num_samples, grad_accum),
            "" if failure is not None else " on another rank",
            agreed_next,
            size,
        )
        self._logger.metric_batch({"trainer/grad_accum": agreed_next, "trainer/microbatch_size": size})
        return True

    def agree(self, *, out_of_memory: bool, at_one_sample: bool, proposal: int | None) -> Settlement:
        """What every rank learns after an attempt (:class:`Settlement`): whether any ran out of memory, whether
        any did so with one sample per microbatch, and the next microbatch count (the largest proposed); with
        ``defer_sync``, if none ran out of memory, it then averages the gradients (over the parameters that have
        one on some rank, as DDP does).

        One all-reduce (MAX) of a small integer tensor when launched, or more under FSDP while another rank is still
        inside its attempt (:meth:`OutOfMemoryAgreement.settle`); nothing in a single process.
        """
        parameters = [p for p in self._parameters() if p.requires_grad] if self.defer_sync else []
        settled = self.agreement.settle(
            out_of_memory=out_of_memory,
            at_one_sample=at_one_sample,
            proposal=proposal,
            extra=[int(p.grad is not None) for p in parameters],
        )
        launched = dist.is_initialized() and dist.get_world_size() > 1
        if launched and not settled.out_of_memory and self.defer_sync:
            average_gradients(parameters, [bool(v) for v in settled.extra])
            if self._buffers is not None:
                broadcast_buffers(self._buffers)
        return settled

    def _progress(self) -> int | None:
        beat = self._heartbeat()
        return None if beat is None else beat.progress

    def _rewind(self, mark: int | None) -> None:
        beat = self._heartbeat()
        if beat is not None and mark is not None:
            beat.progress = mark

    def _forget_attempt(self, state: State) -> None:
        if self._reset_sharded is not None:
            self._reset_sharded()  # FSDP: wait for its collectives in flight, reshard, clear its per-pass state
        free_attempt_memory(state, self._parameters())

    # ---- evaluation ------------------------------------------------------------------------------------------------

    def eval_count(self, label: str) -> int:
        """How many parts each batch of evaluator ``label`` is split into (1 until one ran out of memory)."""
        return self._eval_counts.get(label, 1)

    def eval_parts(self, label: str, num_samples: int) -> tuple[int, int]:
        """How a batch of ``num_samples`` of evaluator ``label`` is run: ``(parts, fillers)``, the number of parts
        it is split into and, with :attr:`lockstep_eval`, the forward passes to add (of a part whose outputs are
        dropped) so that every rank runs :meth:`eval_count` passes, whatever the size of its batch.

        Called at the start of every attempt at an evaluation batch (a retry rewinds the heartbeat to this point)."""
        self._eval_mark = self._progress()
        count = self.eval_count(label)
        parts = min(count, num_samples)
        return parts, (count - parts if self.lockstep_eval else 0)

    def recovers(self, error: BaseException) -> bool:
        """Whether an attempt that raised ``error`` is run again: with ``auto``, when this rank ran out of memory or
        learnt at an FSDP collective that another did (:class:`PeerOutOfMemoryError`)."""
        return self.auto and (isinstance(error, PeerOutOfMemoryError) or is_out_of_memory(error))

    def eval_settle(self, state: State, label: str, num_samples: int, *, failure: str | None, told: bool) -> bool:
        """Ends an attempt at an evaluation batch of ``label`` of ``num_samples``; returns whether to run the batch
        again, in :meth:`eval_count` parts (doubled).

        ``failure`` says how this rank ran out of memory (None: it did not); ``told``: another rank did, and this
        one learnt it at an FSDP collective. With :attr:`lockstep_eval` every rank settles
        (:meth:`OutOfMemoryAgreement.settle`) and all retry when one ran out of memory; else only this rank counts.

        Raises:
            MicrobatchTooSmallError: If a rank ran out of memory with one sample per part.
        """
        out_of_memory = failure is not None or told
        if not (out_of_memory or self.lockstep_eval):  # per evaluation batch: nothing to agree on or undo
            return False
        count = self.eval_count(label)
        proposal = next_grad_accum(count, num_samples)
        at_one_sample = failure is not None and proposal is None
        if self.lockstep_eval:
            settled = self.agreement.settle(out_of_memory=out_of_memory, at_one_sample=at_one_sample, proposal=proposal)
            out_of_memory, at_one_sample, proposal = settled.out_of_memory, settled.at_one_sample, settled.proposal
            if out_of_memory and self._reset_sharded is not None:
                self._reset_sharded()
        if not out_of_memory:
            return False
        state.outputs = None  # the training state (gradients, loss) is left alone
        _empty_cache()
        if at_one_sample or proposal is None:
            where = "" if failure is not None else " (on another rank)"
            raise MicrobatchTooSmallError(
                f"Out of memory evaluating {label!r} one sample at a time{where} ({failure or 'see its error'}). "
                "grad_accum='auto' cannot split an evaluation batch further. To fix: make one sample fit (a smaller "
                "model or shorter inputs, precision='bf16' or 'amp'), or evaluate on a device with more memory."
            )
        self._eval_counts[label] = proposal
        size = microbatch_size(num_samples, proposal)
        log.warning(
            "Out of memory evaluating %r in parts of up to %d samples%s; evaluating the batch again in %d parts of "
            "up to %d samples.",
            label,
            microbatch_size(num_samples, count),
            "" if failure is not None else " on another rank",
            proposal,
            size,
        )
        self._logger.metric_batch({f"trainer/eval_microbatches/{label}": proposal})
        self._rewind(self._eval_mark)
        return True
