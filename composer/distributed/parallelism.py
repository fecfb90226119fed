"""The Trainer's one handle on training as one of several processes: :class:`Parallelism`.

The Trainer talks to a single object about the process group, the data each rank reads, how the model is replicated
(DistributedDataParallel) or sharded (FSDP), when gradients synchronise, what a batch counts over all ranks, how
evaluation keeps the ranks in step, which log destinations a rank keeps, and which rank an error came from. The
pieces it calls are in :mod:`composer.distributed.process_group`, :mod:`~composer.distributed.data`,
:mod:`~composer.distributed.ddp` and :mod:`~composer.distributed.fsdp`; this module only decides when each applies, so
the Trainer's loop reads the same launched or not.

Unlaunched (one process, no ``fsdp_config``) every method returns at once with what it was given: no process group,
no wrapper, no collective, and no context entered per microbatch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from composer.core.data_spec import DataSpec
from composer.core.evaluator import Evaluator
from composer.core.logging.logger import Logger, LoggerDestination
from composer.core.state import State
from composer.core.time import Timer
from composer.distributed.data import (
    batch_totals,
    distribute_evaluator,
    distribute_train_data,
    lockstep_batches,
    set_sampler_epoch,
)
from composer.distributed.ddp import DDPSyncStrategy, ddp_sync_context, parameter_layout, rewrap_ddp, wrap_ddp
from composer.distributed.fsdp import FSDPConfig, prepare_fsdp_module, resolve_fsdp_config
from composer.distributed.microbatching import Microbatching
from composer.distributed.oom_agreement import OutOfMemoryAgreement, install_fsdp_checkpoints
from composer.distributed.process_group import (
    add_rank_note,
    agree_on_seed,
    heartbeat,
    init_distributed,
    is_launched,
    rank_zero_destinations,
    seed_rank,
)
from composer.distributed.stop_agreement import StopAgreement
from composer.utils import dist
from composer.utils.devices import resolve_device

__all__ = ["Parallelism"]


class Parallelism:
    """How this process trains together with the others, if any: everything the Trainer does differently when launched.

    Built first thing in the Trainer's constructor (it creates the process group, which the seed and the state's rank
    need). Launched (``torchrun`` sets ``WORLD_SIZE`` > 1), it agrees on rank 0's seed (:meth:`agree_on_seed`), shards
    the data (:meth:`shard_train_data`, :meth:`shard_evaluator`), prepares the model (:meth:`prepare`: on its device,
    FSDP-sharded before the checkpoint loads, DDP-wrapped after; :meth:`rewrap` after ``FIT_START``), runs the
    accumulating microbatches under ``no_sync`` (:meth:`sync_context`), totals the counts of all ranks
    (:meth:`totals`), has every rank stop after the same batch on a signal (:attr:`stop`), and while ``fit`` runs
    names the rank that raised or stopped answering (:meth:`running`). Unlaunched, each returns what it was given.
    ``composer/distributed/DISTRIBUTED.md`` tells the whole story.

    The model has two handles: :attr:`model`, the user's ``ComposerModel`` (``state.model``, FSDP-sharded in place
    when sharded), which checkpoints save; and :attr:`ddp_model`, the ``DistributedDataParallel`` wrapper (None
    without one), which the training forward calls and on which DDP communication hooks are registered.

    Args:
        device (str | torch.device, optional): The device asked for; default: CUDA when available. Launched on CUDA,
            each rank takes the device of its ``LOCAL_RANK``.
        dist_timeout (float): Seconds any collective may wait.
        fsdp_config (FSDPConfig | Mapping, optional): Shard the model with FSDP instead of replicating it.
        ddp_sync_strategy (str | DDPSyncStrategy): When accumulated gradients synchronise.
        grad_accum_auto (bool): Whether the run uses ``grad_accum='auto'``: with FSDP, every FSDP collective is
            then preceded by a checkpoint of :attr:`oom_agreement` (see :mod:`composer.distributed.oom_agreement`).

    Example:
        >>> parallel = Parallelism(device="cpu", dist_timeout=60.0)
        >>> parallel.launched, parallel.device, parallel.totals(DataSpec([]), 8, None)
        (False, device(type='cpu'), (8, 0))
    """

    def __init__(
        self,
        *,
        device: str | torch.device | None = None,
        dist_timeout: float = 300.0,
        fsdp_config: FSDPConfig | Mapping[str, Any] | None = None,
        ddp_sync_strategy: str | DDPSyncStrategy = DDPSyncStrategy.SINGLE_AUTO_SYNC,
        grad_accum_auto: bool = False,
    ) -> None:
        self.sync_strategy = DDPSyncStrategy.parse(ddp_sync_strategy)
        self.device = init_distributed(resolve_device(device), dist_timeout)
        self.launched = is_launched()
        self.fsdp_config = resolve_fsdp_config(fsdp_config)  # needs the process group: after init
        # grad_accum='auto' under FSDP: a checkpoint before every FSDP collective (composer.distributed.oom_agreement).
        self.oom_agreement = OutOfMemoryAgreement()
        self._grad_accum_auto = grad_accum_auto
        self._fsdp_checkpoints = grad_accum_auto and self.fsdp_config is not None
        self._microbatching: Microbatching | None = None  # built once the model is prepared
        self.model: torch.nn.Module | None = None
        self.ddp_model: DistributedDataParallel | None = None
        self._layout: list[tuple[Any, ...]] = []  # the parameters as the DDP wrapper was built over them
        self._beat_hook: torch.utils.hooks.RemovableHandle | None = None  # the heartbeat's, on a rewrapped model
        # The heartbeat while fit runs launched (else None); Microbatching rewinds its count after a retry.
        self.beat: dist.Heartbeat | None = None
        # What no_sync and the heartbeat's hook apply to: the DDP wrapper or the FSDP-sharded model; None unlaunched.
        self._synced: torch.nn.Module | None = None
        # After a signal, the batch every rank stops after (the Trainer's preemption), agreed at little cost per step.
        self.stop = StopAgreement(self.launched)

    @property
    def sharded_checkpoints(self) -> bool:
        """Whether checkpoints are folders of per-rank shards (``fsdp_config``'s ``state_dict_type='sharded'``)."""
        return self.fsdp_config is not None and self.fsdp_config.state_dict_type == "sharded"

    # ---- the process group and seeds -------------------------------------------------------------------------------

    def agree_on_seed(self, seed: int) -> int:
        """Rank 0's ``seed`` on every rank (a seed drawn at random included); ``seed`` itself unlaunched."""
        return agree_on_seed(seed) if self.launched else seed

    # ---- data ------------------------------------------------------------------------------------------------------

    def shard_train_data(self, spec: DataSpec, *, seed: int) -> DataSpec:
        """The training data with this rank's share (``spec`` itself unlaunched); see
        :func:`~composer.distributed.data.distribute_train_data`."""
        return distribute_train_data(spec, seed=seed) if self.launched else spec

    def shard_evaluator(self, evaluator: Evaluator) -> Evaluator:
        """The evaluator with this rank's share of its data, no sample on two ranks (``evaluator`` unlaunched)."""
        return distribute_evaluator(evaluator) if self.launched else evaluator

    @staticmethod
    def set_epoch(dataloader: Any, epoch: int) -> None:
        """Tells the loader's distributed sampler the epoch to shuffle for (any sampler with ``set_epoch``)."""
        set_sampler_epoch(dataloader, epoch)

    # ---- the model -------------------------------------------------------------------------------------------------

    def prepare(
        self,
        model: torch.nn.Module,
        optimizers: Sequence[torch.optim.Optimizer],
        *,
        find_unused_parameters: bool,
        seed: int,
        load: Callable[[], object],
        compile_model: Callable[[], object] | None = None,
    ) -> None:
        """Makes ``model`` ready to train on this rank, calling ``load`` when its parameters are final.

        In order: the model goes to :attr:`device`; with ``fsdp_config`` it is compiled (``compile_model``) and
        sharded in place (rank 0's weights broadcast first, ``optimizers`` switched to the shards); ``load`` runs (the
        checkpoint, loaded into the parameters the run trains); without FSDP it is compiled now, after the load, and
        launched it is wrapped in ``DistributedDataParallel`` (which broadcasts rank 0's weights); launched, each rank
        is reseeded with ``seed + rank``. Compiling in place before the wrapper is PyTorch's order
        (``model.compile()``, then DDP or ``fully_shard``); nothing is traced before the first forward, so the graph
        sees the loaded weights either way.

        Args:
            model (torch.nn.Module): The model after ``Event.INIT`` surgery (``state.model``).
            optimizers (Sequence[torch.optim.Optimizer]): Its optimizers, built and remapped, not yet stepped.
            find_unused_parameters (bool): Passed to DistributedDataParallel.
            seed (int): The run's (rank 0's) seed.
            load (Callable): Loads the checkpoint to resume or start from, if any.
            compile_model (Callable, optional): Compiles the model in place (``compile_config``); None: eager.
        """
        model.to(self.device)
        if self.fsdp_config is not None:  # shard before loading (load_path, autoresume): the parameters change
            if compile_model is not None:
                compile_model()
            prepare_fsdp_module(model, self.fsdp_config, optimizers, sync_module_states=True)
            if self._fsdp_checkpoints:
                install_fsdp_checkpoints(model, self.oom_agreement)
        load()
        if self.fsdp_config is None:
            if compile_model is not None:
                compile_model()
            self.ddp_model = wrap_ddp(model, self.device, find_unused_parameters=find_unused_parameters)
            self._layout = parameter_layout(model)
        self.model = model
        self._synced = model if self.fsdp_config is not None else self.ddp_model
        seed_rank(seed)

    def microbatching(self, state: State, logger: Logger) -> Microbatching:
        """The run's :class:`~composer.distributed.microbatching.Microbatching`, through which the loop runs each
        batch's gradient (``run(attempt)``); built after :meth:`prepare`, over the prepared model. With
        ``grad_accum_auto`` under DDP every microbatch of an attempt runs unsynchronised and the gradients are
        averaged once the ranks agree that none ran out of memory; under FSDP every collective is a checkpoint where
        the ranks learn whether one did (:attr:`oom_agreement`), and a failed attempt resets the sharded model.

        Args:
            state (State): The run's state.
            logger (Logger): Where a new microbatch count is logged.

        Returns:
            Microbatching: The new microbatching, also kept here (:meth:`rewrap` has it find the model's buffers again).
        """
        assert self.model is not None, "prepare() first"
        self._microbatching = Microbatching(
            state,
            auto=self._grad_accum_auto,
            logger=logger,
            model=self.model,
            defer_sync=self._grad_accum_auto and self.ddp_model is not None,
            launched=self.launched,
            agreement=self.oom_agreement,
            heartbeat=lambda: self.beat,
            reset_sharded=self.reset_sharded,
        )
        return self._microbatching

    def rewrap(self) -> bool:
        """Called after the algorithms of ``Event.FIT_START`` (every ``fit``): when they changed the parameters the
        ``DistributedDataParallel`` wrapper was built over (ChannelsLast's memory format, a parameter replaced or
        frozen: :func:`~composer.distributed.ddp.parameter_layout`), wraps the model anew for them
        (:func:`~composer.distributed.ddp.rewrap_ddp`, keeping communication hooks registered on the old
        wrapper), so that no gradient is copied into a bucket laid out for other strides. Returns whether
        :attr:`ddp_model` changed (the training forward must call the new one). Nothing unlaunched or under FSDP
        (see ``composer/distributed/DISTRIBUTED.md``). With ``grad_accum_auto``, the retry point of
        :meth:`microbatching` finds the model's buffers again, for algorithms that replaced modules."""
        retry_point = self._microbatching.retry_point if self._microbatching is not None else None
        if retry_point is not None:
            retry_point.track()
        old = self.ddp_model
        if old is None or parameter_layout(old.module) == self._layout:
            return False
        self.ddp_model = self._synced = rewrap_ddp(old, self.device)
        self._layout = parameter_layout(old.module)
        beat = self.beat
        if beat is not None and self.ddp_model is not None:  # fit's heartbeat counts the new wrapper's passes
            self._beat_hook = self.ddp_model.register_forward_pre_hook(lambda module, args: beat.advance())
        return True

    # ---- the training step -----------------------------------------------------------------------------------------

    def sync_context(
        self, is_final_microbatch: bool = False, *, deferred: bool = False
    ) -> contextlib.AbstractContextManager[Any]:
        """The context to run a microbatch's forward and backward in: ``no_sync`` when its gradients are only
        accumulated (not the final microbatch of the batch, with ``ddp_sync_strategy='single_auto_sync'``), else
        nothing.

        ``deferred``: every microbatch runs without synchronising, whatever the strategy (``grad_accum='auto'``
        under DDP averages the gradients itself once the ranks agree; see :mod:`composer.distributed.microbatching`).
        """
        if deferred and isinstance(self._synced, DistributedDataParallel):
            return self._synced.no_sync()
        return ddp_sync_context(self._synced, self.sync_strategy, is_final_microbatch)

    @property
    def reset_sharded(self) -> Callable[[], None] | None:
        """With FSDP and ``grad_accum='auto'``, what puts the sharded model back in a state to run again after a
        forward or backward pass that raised (the root's ``FSDPModule.reset_iter_state``: it waits for the
        collectives in flight, reshards every unit and clears FSDP's per-pass state); else None."""
        model = self.model
        if not self._fsdp_checkpoints or model is None:
            return None
        return model.reset_iter_state  # type: ignore[return-value]  # an FSDPModule method

    def totals(self, spec: DataSpec, num_samples: int, num_tokens: int | None) -> tuple[int, int]:
        """The samples and tokens of this batch over all ranks (tokens 0 when the data counts none), for the timer:
        this rank's counts unlaunched; see :func:`~composer.distributed.data.batch_totals`. When the counts are
        all-reduced, the all-reduce carries this rank's request to stop (:attr:`stop`)."""
        if not self.launched:  # per batch: no call beyond this one
            return num_samples, num_tokens or 0
        samples, tokens, stop = batch_totals(spec, num_samples, num_tokens, self.stop.requested)
        self.stop.carried(stop)  # a signal's request to stop rides on the counts' all-reduce, when there is one
        return samples, tokens

    # ---- evaluation ------------------------------------------------------------------------------------------------

    def eval_batches(self, batches: Iterable[Any], pad: Callable[[Any], None]) -> Iterator[Any]:
        """This rank's evaluation ``batches``; with FSDP (every forward a collective) the ranks stay in step: one
        whose share has run out calls ``pad(its last batch)`` until all are done (see
        :func:`~composer.distributed.data.lockstep_batches`). Unlaunched and under DDP the batches as they are."""
        return lockstep_batches(batches, pad if self.fsdp_config is not None else None)

    # ---- logging and errors ----------------------------------------------------------------------------------------

    @staticmethod
    def rank_zero_destinations(
        destinations: Sequence[LoggerDestination], rank_zero_only: tuple[type[LoggerDestination], ...]
    ) -> list[LoggerDestination]:
        """The destinations this rank keeps: all on rank 0; on the others, those that are no instance of
        ``rank_zero_only`` (the Trainer passes the destinations that write to the console, files or a tracker: see
        :func:`~composer.distributed.process_group.rank_zero_destinations`)."""
        return rank_zero_destinations(destinations, rank_zero_only)

    @contextlib.contextmanager
    def running(self, timer: Timer, *, together: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
        """The block ``fit`` trains in. Launched: a heartbeat names the rank that stops answering (its hook on the
        training forward advances it), and an error leaving the block gets a note naming the rank that raised it,
        unless it is one of ``together``: errors every rank raises at once (the Trainer's ``Preempted``), for which no
        rank is to blame."""
        if not self.launched:
            yield
            return
        try:
            with heartbeat(self._synced, timer) as self.beat:
                yield
        except BaseException as error:
            if not isinstance(error, together):
                add_rank_note(error)
            raise
        finally:
            self.beat = None
            if self._beat_hook is not None:
                self._beat_hook.remove()
                self._beat_hook = None
