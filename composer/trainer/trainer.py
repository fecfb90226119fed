"""The Trainer: runs the loop that :class:`~composer.core.event.Event` documents, top to bottom, in one place."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from inspect import signature
from pathlib import Path
from typing import Any

import torch

from composer.algorithms.composition import check_composition
from composer.algorithms.gradient_clipping import apply_gradient_clipping
from composer.callbacks.checkpoint_saver import CheckpointSaver
from composer.callbacks.nan_monitor import DeferredNaNMonitor, NaNMonitor
from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.data_spec import DataSpec, ensure_data_spec
from composer.core.engine import Engine
from composer.core.evaluator import Evaluator
from composer.core.event import Event
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.precision import Precision
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.distributed.ddp import DDPSyncStrategy
from composer.distributed.fsdp import FSDPConfig
from composer.distributed.microbatching import sum_losses, weight_loss
from composer.distributed.parallelism import Parallelism
from composer.loggers import RANK_ZERO_DESTINATIONS
from composer.loggers.progress_bar import ProgressBarLogger
from composer.models.base import ComposerModel
from composer.profiler.profiler import Profiler, ProfilerSession, resolve_profiler, unprofiled, unprofiled_batches
from composer.trainer.arguments import (
    algorithm_list,
    callback_list,
    check_arguments,
    check_grad_accum,
    check_optimizer_params,
    check_optimizers,
    check_scheduler_optimizers,
    check_schedulers,
    check_train_data,
    console_loggers,
    evaluator_list,
    logger_list,
    steps_per_epoch,
)
from composer.trainer.checkpointing import Checkpointing, epoch_batches, run_config
from composer.trainer.compilation import Compilation, compile_options
from composer.trainer.evaluation import EvaluationLoop
from composer.trainer.fit_warnings import warn_before_fit
from composer.trainer.keywords import explain_unknown_keywords
from composer.trainer.precision import autocasting, make_grad_scaler, precision_context
from composer.trainer.preemption import Preempted, Preemption
from composer.trainer.schedulers import TrainerSchedulers
from composer.utils.checkpoint import DEFAULT_FILENAME, DEFAULT_LATEST_FILENAME, save_checkpoint
from composer.utils.devices import batch_to_device
from composer.utils.module_surgery import update_optimizer_params
from composer.utils.seeding import configure_deterministic_mode, new_seed, seed_all

__all__ = ["Trainer"]

log = logging.getLogger(__name__)


def _check_model(model: object) -> None:
    if not isinstance(model, ComposerModel):
        raise TypeError(
            f"model must be a ComposerModel, got {type(model).__name__}. Wrap a classifier with "
            "composer.models.ComposerClassifier(module), or subclass ComposerModel (forward and loss)."
        )


class Trainer:
    """Trains a :class:`~composer.models.ComposerModel`, firing every :class:`~composer.core.event.Event` in order.

    Build it with a model, training data and a duration, call :meth:`fit` (again to train longer), :meth:`eval` or
    :meth:`predict`, and :meth:`close` when done (or use it as a context manager); the guides show the rest.

    Args:
        model (ComposerModel): The model (wrap a plain ``nn.Module`` classifier in ``ComposerClassifier``).
        train_dataloader (Iterable | DataSpec): Training batches.
        max_duration (str | Time | int): How long to train: ``'10ep'``, ``'500ba'``, ``'1e6sp'``, ``'2048tok'``, or
            an int (epochs); times ``scale_schedule_ratio``. A run that stops mid-epoch leaves the epoch open
            (schedulers guide, "Stopping mid-epoch, extending, resuming").
        eval_dataloader (Iterable | DataSpec | Evaluator | Sequence, optional): Evaluation data; a plain loader
            becomes ``Evaluator(label='eval', eval_interval=eval_interval)``.
        algorithms (Sequence[Algorithm], optional): Speed-up methods, in order.
        optimizers (torch.optim.Optimizer | Sequence, optional): Default: ``DecoupledSGDW(lr=0.1)``, built after
            ``INIT`` surgery; an optimizer built before it is updated to the new parameters.
        schedulers (callable | torch LRScheduler | Sequence, optional): Composer scheduler functions (multiplied
            together, stepped every batch) and/or torch schedulers.
        device (str | torch.device, optional): ``'cpu'`` or ``'cuda'``; default: CUDA when available.
        grad_accum (int | str): Split each batch into this many microbatches (the update equals the full batch's);
            ``'auto'`` doubles it whenever a batch runs out of GPU memory (distributed guide).
        grad_clip_norm (float, optional): Clip the global gradient norm (after unscaling) to this value.
        precision (str | Precision): ``'fp32'``, ``'amp'`` (fp16 with a gradient scaler) or ``'bf16'``.
        scale_schedule_ratio (float): Train ``ratio x max_duration``; composer schedulers stretch to match.
        step_schedulers_every_batch (bool): Step torch schedulers every batch (True) or every epoch.
        eval_interval (str | Time | int): How often a plain eval loader runs (``'1ep'``, ``'100ba'``; int = epochs).
        eval_at_fit_end (bool): Also evaluate the weights ``fit`` ends with, with each evaluator not just run there.
        eval_subset_num_batches (int, optional): Evaluate on at most this many batches.
        train_subset_num_batches (int, optional): Use at most this many batches per epoch.
        seed (int, optional): Seeds torch, NumPy and Python; default: a fresh random seed (logged).
        deterministic_mode (bool): Use deterministic kernels only.
        loggers (Sequence[LoggerDestination], optional): Where logged values go.
        callbacks (Sequence[Callback], optional): Observers of the loop, run after the loggers.
        progress_bar (bool): Show progress on standard error (bars on a terminal, a line every 30 s in a job log).
        log_to_console (bool): Print epoch-level metrics to standard error.
        console_log_interval (str | Time | int, optional): MosaicML Composer v0.32.1's keyword: print the loss every
            ``'2ba'``, or epoch metrics every ``'2ep'`` (or ``2``).
        run_name (str, optional): Fills ``{run_name}`` in ``save_folder``; default: made from the time. Give the same
            one on every launch of a run that uses ``autoresume``.
        save_folder (str, optional): Save checkpoints here: a local path, ``file:///PATH`` or ``s3://BUCKET/PREFIX``
            (uploaded in the background); None saves nothing (checkpoints guide).
        save_filename (str): Checkpoint file name pattern over ``{epoch}``, ``{batch}``, ``{rank}``, ``{run_name}``,
            ...; a ``.safetensors`` name saves the weights in that format.
        save_latest_filename (str | None): A symbolic link to the newest checkpoint; None for none.
        save_interval (str | Time | int | Callable): How often to save (``'1ep'``, ``'500ba'``, ``'0.25dur'``, an int
            of epochs, or a function ``(state, event) -> bool``); the final state is always saved.
        save_num_checkpoints_to_keep (int): Keep the newest N checkpoints (-1: all).
        save_overwrite (bool): Allow saving into a folder that already holds this run's checkpoints.
        save_weights_only (bool): Save only the model's weights.
        preemption_grace_period (float): Seconds from a SIGTERM (or SIGINT) within which the batch in progress is
            saved and uploaded before ``fit`` raises ``Preempted`` (:mod:`~composer.trainer.preemption`).
        handle_sigint (bool): Handle SIGINT (Ctrl-C) like SIGTERM, raising ``Interrupted``, a ``KeyboardInterrupt``.
        load_path (str | PathLike, optional): Load this checkpoint (a file, or a folder's newest readable one, local
            or ``s3://``) after ``INIT``: the whole training state, or with ``load_weights_only`` the weights.
        load_weights_only (bool): Load only the model's weights from ``load_path``.
        load_strict_model_weights (bool): Require the checkpoint's model keys to match the model's exactly.
        load_ignore_keys (Sequence[str], optional): Glob patterns over the model's keys not to load.
        autoresume (bool): Continue exactly from the newest valid checkpoint in ``save_folder``, if there is one.
        storage_options (Mapping | StorageOptions, optional): How to reach the store of an ``s3://`` path (see
            :class:`~composer.utils.object_store.StorageOptions`); credentials come from the standard AWS chain.
        on_upload_failure (str): An upload that fails for good: ``'raise'`` ends the run; ``'keep_local'`` warns,
            trains on and keeps the checkpoints locally until the store answers.
        dist_timeout (float): Launched: seconds any collective may wait before the job fails.
        ddp_sync_strategy (str | DDPSyncStrategy): When gradients are all-reduced under gradient accumulation:
            ``'single_auto_sync'`` (on the last microbatch) or ``'multi_auto_sync'`` (after every microbatch).
        find_unused_parameters (bool, optional): Tell DistributedDataParallel that some parameters may get no
            gradient; default: True when an algorithm declares it.
        fsdp_config (FSDPConfig | Mapping, optional): Shard the model with FSDP instead of replicating it with
            DistributedDataParallel (:class:`~composer.distributed.fsdp.FSDPConfig` or a mapping of its fields).
        check_finite (bool): Stop with :class:`~composer.callbacks.NonFiniteLossError` when the training loss is
            NaN or infinite, and never save non-finite weights; read without a device sync per batch.
        profiler (Profiler | Mapping | bool, optional): Profile every ``fit`` with ``torch.profiler``
            (:class:`~composer.profiler.profiler.Profiler`, a mapping of its fields, or True for its defaults).
        compile_config (bool | Mapping, optional): Compile the model's forward with ``torch.compile``: True, or a
            dict of its keyword arguments; None or False runs eagerly.

    Attributes:
        parallel (Parallelism): The process group, data sharding, model wrapping and gradient synchronisation.
        compilation (Compilation | None): How the forward is compiled (``compile_config``); None when it is not.
        profiler (ProfilerSession | None): The profiler at work (its ``folder``, ``traces``, ``summary``), or None.

    Example:
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> eval_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(8, 8, 3, seed=1), batch_size=4)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, eval_dataloader=eval_dataloader,
        ...                   optimizers=optimizer, max_duration="2ep")
        >>> trainer.fit()
        >>> int(trainer.state.timer.epoch)
        2
        >>> trainer.close()
    """

    @explain_unknown_keywords  # an unknown keyword (max_epochs=2) raises naming the nearest parameter
    def __init__(
        self,
        *,
        model: ComposerModel,
        train_dataloader: Iterable[Any] | DataSpec,
        max_duration: str | Time[Any] | int,
        eval_dataloader: Any = None,
        algorithms: Sequence[Algorithm] | None = None,
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
        schedulers: Any = None,
        device: str | torch.device | None = None,
        grad_accum: int | str = 1,
        grad_clip_norm: float | None = None,
        precision: str | Precision = Precision.FP32,
        scale_schedule_ratio: float = 1.0,
        step_schedulers_every_batch: bool = True,
        eval_interval: str | Time[Any] | int = 1,
        eval_at_fit_end: bool = True,
        eval_subset_num_batches: int | None = None,
        train_subset_num_batches: int | None = None,
        seed: int | None = None,
        deterministic_mode: bool = False,
        loggers: Sequence[LoggerDestination] | None = None,
        callbacks: Sequence[Callback] | None = None,
        progress_bar: bool = True,
        log_to_console: bool = False,
        console_log_interval: str | Time[Any] | int | None = None,
        run_name: str | None = None,
        save_folder: str | None = None,
        save_filename: str = DEFAULT_FILENAME,
        save_latest_filename: str | None = DEFAULT_LATEST_FILENAME,
        save_interval: str | Time[Any] | int | Callable[..., bool] = "1ep",
        save_num_checkpoints_to_keep: int = -1,
        save_overwrite: bool = False,
        save_weights_only: bool = False,
        preemption_grace_period: float = 20.0,
        handle_sigint: bool = True,
        load_path: str | os.PathLike[str] | None = None,
        load_weights_only: bool = False,
        load_strict_model_weights: bool = True,
        load_ignore_keys: Sequence[str] | None = None,
        autoresume: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        on_upload_failure: str = "raise",
        dist_timeout: float = 300.0,
        ddp_sync_strategy: str | DDPSyncStrategy = DDPSyncStrategy.SINGLE_AUTO_SYNC,
        find_unused_parameters: bool | None = None,
        fsdp_config: FSDPConfig | Mapping[str, Any] | None = None,
        check_finite: bool = True,
        profiler: Profiler | Mapping[str, Any] | bool | None = None,
        compile_config: bool | Mapping[str, Any] | None = None,
    ) -> None:
        arguments = dict(locals())  # the run's config, saved in checkpoints
        check_arguments(arguments)  # every value problem at once (trainer/arguments.py, which recipes call too)
        _check_model(model)
        grad_accum, auto_microbatching = check_grad_accum(grad_accum)
        # One object where a list is expected becomes a list of one; a class, a name or a wrong kind raises here.
        algorithms, callbacks, loggers = algorithm_list(algorithms), callback_list(callbacks), logger_list(loggers)
        optimizers = check_optimizers(optimizers)
        check_schedulers(schedulers)
        options = compile_options(compile_config)
        self.compilation = None if options is None else Compilation(options)
        check_composition(algorithms)  # before anything starts: a pair that has no meaning together
        precision = Precision(precision)
        # Before INIT (the Event docstring's order): the processes, the run's name and seed, the data, the loggers,
        # the checkpoint saver, and the State that INIT's algorithms see.
        self._start_processes(device, dist_timeout, fsdp_config, precision, ddp_sync_strategy, auto_microbatching)
        self._checkpoint_settings(arguments)
        self._seed(seed, deterministic_mode)
        self._train_spec = self._train_data(train_dataloader)
        self.grad_clip_norm = grad_clip_norm
        self._train_subset_num_batches = train_subset_num_batches
        self._eval_subset_num_batches = eval_subset_num_batches
        destinations = self._destinations(progress_bar, log_to_console, console_log_interval, loggers)
        saver = self._saver_and_preemption(arguments, check_finite, preemption_grace_period, handle_sigint)
        self.state = State(
            model=model,
            max_duration=max_duration,
            scale_schedule_ratio=scale_schedule_ratio,
            rank_zero_seed=self.seed,
            train_dataloader=self._train_spec.dataloader,
            steps_per_epoch=steps_per_epoch(self._train_spec, train_subset_num_batches),
            evaluators=self._make_evaluators(eval_dataloader, eval_interval, eval_subset_num_batches),
            grad_accum=grad_accum,
            precision=precision,
            optimizers=optimizers,
            algorithms=algorithms,
            callbacks=self._callbacks(destinations, callbacks, saver, check_finite),
            device=self.device,
            run_name=self.run_name,
        )
        self._model = model  # typed handle on state.model (which algorithms may not replace wholesale)
        self.logger = Logger(self.state, destinations)
        self._start_profiler(profiler)
        self.engine = Engine(self.state, self.logger, None if self.profiler is None else self.profiler.wrap)
        # For scripts that never call close(): close once when this Trainer is collected or the interpreter exits.
        # The finalizer holds the engine, never the Trainer (nothing the engine reaches refers back to it).
        self._closer = weakref.finalize(self, self.engine.close)
        try:
            params_before = dict(model.named_parameters())
            self._fire(Event.INIT)
            # After INIT: the optimizers see the model surgery left; then the precision and the schedules; then the
            # model goes on the device and is wrapped (the wrap point); last, the training step's stages.
            model = self._model_after_init(model)
            self._optimizers_after_init(model, optimizers is None, params_before)
            self._precision_and_schedules(precision, schedulers, step_schedulers_every_batch)
            self._place_and_wrap(model, find_unused_parameters)
            self._build_step(model, eval_at_fit_end)
        except BaseException:
            self.close()  # callbacks may have opened files at INIT; the caller never gets a Trainer to close
            raise

    @property
    def ddp_model(self) -> torch.nn.parallel.DistributedDataParallel | None:
        """The wrapped model when launched (register DDP communication hooks on it before ``fit``); None in a single
        process and with ``fsdp_config``."""
        return self.parallel.ddp_model

    @property
    def fsdp_config(self) -> FSDPConfig | None:
        """How the model is sharded; None when it is not."""
        return self.parallel.fsdp_config

    # ---- construction phases, in the order __init__ runs them -------------------------------------------------

    def _start_processes(
        self,
        device: str | torch.device | None,
        dist_timeout: float,
        fsdp_config: FSDPConfig | Mapping[str, Any] | None,
        precision: Precision,
        ddp_sync_strategy: str | DDPSyncStrategy,
        auto_microbatching: bool,
    ) -> None:
        # Launched: create the process group first, so that the state's seed and rank are per process.
        self.parallel = Parallelism(
            device=device,
            dist_timeout=dist_timeout,
            fsdp_config=fsdp_config,
            ddp_sync_strategy=ddp_sync_strategy,
            grad_accum_auto=auto_microbatching,
        )
        self.device = self.parallel.device
        self._moves_batches = self.device.type != "cpu"  # read per batch: a bool is cheaper than torch.device.type
        if precision == Precision.BF16 and self.device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError("precision='bf16' but this GPU does not support bfloat16; use 'amp' or 'fp32'.")

    def _checkpoint_settings(self, arguments: dict[str, Any]) -> None:
        # The Trainer's keywords that Checkpointing takes, by name (save_*, load_*, autoresume, storage, run_name).
        keywords = {name: arguments[name] for name in signature(Checkpointing).parameters if name in arguments}
        self.checkpointing = Checkpointing(**keywords, sharded=self.parallel.sharded_checkpoints)
        self.run_name = self.checkpointing.run_name

    def _seed(self, seed: int | None, deterministic_mode: bool) -> None:
        # Launched: rank 0's seed, on every rank.
        self.seed = self.parallel.agree_on_seed(new_seed() if seed is None else seed)
        if seed is None:
            log.info("No seed given; using seed=%d.", self.seed)
        seed_all(self.seed)
        if deterministic_mode:
            configure_deterministic_mode()

    def _train_data(self, train_dataloader: Iterable[Any] | DataSpec) -> DataSpec:
        # Launched: each rank's share.
        return check_train_data(self.parallel.shard_train_data(ensure_data_spec(train_dataloader), seed=self.seed))

    def _destinations(
        self,
        progress_bar: bool,
        log_to_console: bool,
        console_log_interval: str | Time[Any] | int | None,
        loggers: list[LoggerDestination],
    ) -> list[LoggerDestination]:
        destinations: list[LoggerDestination] = [ProgressBarLogger()] if progress_bar else []
        destinations.extend(console_loggers(log_to_console, console_log_interval))
        destinations.extend(loggers)
        # Launched: one progress bar, each file written once.
        return self.parallel.rank_zero_destinations(destinations, RANK_ZERO_DESTINATIONS)

    def _saver_and_preemption(
        self, arguments: dict[str, Any], check_finite: bool, grace_period: float, handle_sigint: bool
    ) -> CheckpointSaver | None:
        if self.fsdp_config is not None:
            arguments["fsdp_config"] = self.fsdp_config.to_dict()
        self._run_config = run_config({**arguments, "run_name": self.run_name, "seed": self.seed})
        self._check_finite = check_finite
        saver = self.checkpointing.make_saver(self._run_config, check_finite)
        self._preemption = Preemption(
            grace_period=grace_period, handle_sigint=handle_sigint, saver=saver, agreement=self.parallel.stop
        )
        return saver

    @staticmethod
    def _callbacks(
        destinations: list[LoggerDestination],
        callbacks: list[Callback],
        saver: CheckpointSaver | None,
        check_finite: bool,
    ) -> list[Callback]:
        # The loggers first, then the user's callbacks, then the saver.
        listed: list[Callback] = [*destinations, *callbacks, *([saver] if saver is not None else [])]
        if check_finite and not any(isinstance(c, (NaNMonitor, DeferredNaNMonitor)) for c in listed):
            # A NaN or infinite loss stops the run, read without a device sync per batch.
            listed.insert(len(destinations), DeferredNaNMonitor())
        return listed

    def _start_profiler(self, profiler: Profiler | Mapping[str, Any] | bool | None) -> None:
        # Profiling or not is decided here, once: without a profiler nothing below is wrapped.
        config = resolve_profiler(profiler)
        cuda = self.device.type == "cuda"
        self.profiler = None if config is None else ProfilerSession(config, self.run_name, self.state.rank, cuda)

    def _model_after_init(self, model: ComposerModel) -> ComposerModel:
        if self.state.model is model:
            return model
        replacement = self.state.model  # an algorithm replaced the model at INIT (NoOpModel): train that one
        if not isinstance(replacement, ComposerModel):
            raise TypeError(
                f"An algorithm replaced the model at Event.INIT with a {type(replacement).__name__}, which is "
                "not a ComposerModel. An algorithm that swaps state.model must put a ComposerModel there."
            )
        self._model = replacement
        return replacement

    def _optimizers_after_init(
        self, model: ComposerModel, default: bool, params_before: dict[str, torch.nn.Parameter]
    ) -> None:
        if default:
            from composer.optim.decoupled_weight_decay import DecoupledSGDW

            self.state.optimizers = [DecoupledSGDW(model.parameters(), lr=0.1)]
        else:
            update_optimizer_params(self.state.optimizers, params_before, dict(model.named_parameters()))
            # After surgery and the remap, with requires_grad as algorithms left it (what they freeze is exempt).
            check_optimizer_params(model, self.state.optimizers)

    def _precision_and_schedules(self, precision: Precision, schedulers: Any, every_batch: bool) -> None:
        self._precision_context = precision_context(precision, self.device)
        # Training's forward and loss: None runs them as they are (fp32), without entering a context per batch.
        self._autocast = None if precision == Precision.FP32 else self._precision_context
        self.state.scaler = make_grad_scaler(precision, self.device)
        # Read back from the state: an algorithm (ScaleSchedule) may have set the ratio at INIT.
        self._schedulers = TrainerSchedulers(self.state, schedulers, self.state.scale_schedule_ratio, every_batch)
        check_scheduler_optimizers(self.state.schedulers, self.state.optimizers)
        self._warned_before_fit = False

    def _place_and_wrap(self, model: ComposerModel, find_unused_parameters: bool | None) -> None:
        algorithms = self.state.algorithms
        self._create_graph = any(a.backwards_create_graph for a in algorithms)
        if find_unused_parameters is None:
            find_unused_parameters = any(a.find_unused_parameters for a in algorithms)
        # On the device; FSDP shards, then the checkpoint loads (load_path, or with autoresume the newest of this
        # run), then DDP wraps (and again after FIT_START if its algorithms change the parameters' layout, as
        # ChannelsLast does: Parallelism.rewrap); launched, each rank then draws its own random numbers.
        self.parallel.prepare(
            model,
            self.state.optimizers,
            find_unused_parameters=find_unused_parameters,
            seed=self.seed,
            load=lambda: self.checkpointing.load(self.state),
            compile_model=None if self.compilation is None else functools.partial(self.compilation.compile, model),
        )

    def _build_step(self, model: ComposerModel, eval_at_fit_end: bool) -> None:
        # The training step's stages; profiled, each runs in its named range.
        stage = self._stage = unprofiled if self.profiler is None else self.profiler.wrap
        self._forward = self._training_forward()
        self._loss = stage("trainer/loss", autocasting(model.loss, self._autocast))
        self._backward = stage("trainer/backward", torch.Tensor.backward)
        self._batches = unprofiled_batches if self.profiler is None else self.profiler.batches
        self._microbatching = self.parallel.microbatching(self.state, self.logger)  # run(attempt) per batch
        self._evaluation = EvaluationLoop(
            state=self.state,
            engine=self.engine,
            logger=self.logger,
            model=model,
            parallel=self.parallel,
            microbatching=self._microbatching,
            precision_context=self._precision_context,
            fit_finished=self._fit_finished,
            at_fit_end=eval_at_fit_end,
        )

    def _training_forward(self) -> Callable[[Any], Any]:
        # The model's forward, or DDP's wrapper's (its forward prepares the all-reduce), under the precision's autocast.
        return self._stage("trainer/forward", autocasting(self.ddp_model or self._model, self._autocast))

    def _make_evaluators(self, eval_dataloader: Any, interval: Any, subset: int | None) -> list[Evaluator]:
        # Launched: each rank evaluates its share, no sample twice.
        return [self.parallel.shard_evaluator(e) for e in evaluator_list(eval_dataloader, interval, subset)]

    # ---- training ----------------------------------------------------------------------------------------------

    def fit(
        self,
        *,
        train_dataloader: Iterable[Any] | DataSpec | None = None,
        duration: str | Time[Any] | int | None = None,
    ) -> None:
        """Trains until ``max_duration`` (or for ``duration`` more), then returns; may be called again.

        Args:
            train_dataloader (Iterable | DataSpec, optional): Replace the training data from now on (an epoch left
                open by a stop mid-epoch ends first: the new data starts a new epoch).
            duration (str | Time | int, optional): Train this much longer than the time already trained
                (``max_duration`` becomes now + duration: ``'1ep'`` after a stop mid-epoch ends that epoch).
        """
        state = self.state
        if train_dataloader is not None:
            self._train_spec = self._train_data(train_dataloader)
            state.train_dataloader = self._train_spec.dataloader
            state.steps_per_epoch = steps_per_epoch(self._train_spec, self._train_subset_num_batches)
        if duration is not None:
            extra = Time.from_input(duration, default_unit=TimeUnit.EPOCH)
            state.max_duration = state.timer.get(extra.unit) + extra
        state.stop_reason = None
        self._data_replaced = train_dataloader is not None  # an open epoch ends with its data: new data, a new epoch
        try:
            profiling = contextlib.nullcontext() if self.profiler is None else self.profiler.recording(state)
            # Launched: names the rank that raised or hung. Watching: SIGTERM and SIGINT save a checkpoint and stop.
            with self.parallel.running(state.timer, together=(Preempted,)), profiling, self._preemption.watching(state):
                self._fit_loop()
        except BaseException:
            self.close()
            raise

    def _fit_finished(self) -> bool:
        # max_duration is reached, or a callback called state.stop_training().
        state = self.state
        duration = state.max_duration
        return state.stop_reason is not None or state.timer.count(duration.unit) >= duration.value

    def _fire(self, event: Event) -> None:
        # Every event of the loop goes through here. One that nobody handles (engine.listening[event] is False) is
        # not even called: the call would do nothing, and a dozen calls per batch are a measurable share of a small
        # model's step.
        if self.engine.listening[event]:
            self.engine.run_event(event)

    def _fit_loop(self) -> None:
        state, fire = self.state, self._fire
        # Profiled, each batch is a step of the profiler's schedule (a local: the Trainer keeps no wrapper of itself).
        train_batch = self._train_batch if self.profiler is None else self.profiler.step(self._train_batch)
        fire(Event.FIT_START)
        if self.parallel.rewrap():  # its algorithms changed the parameters DDP's buckets were laid out for
            self._forward = self._training_forward()
        if not self._warned_before_fit:  # once per run, seeing what algorithms set at FIT_START
            self._warned_before_fit = True
            warn_before_fit(state, self._schedulers.per_batch, self.checkpointing)
        self.logger.metric_fit({"trainer/algorithms": [repr(a) for a in state.algorithms]})
        while not self._fit_finished():
            state.model.train()
            resume_at = state.timer.batch_in_epoch.value
            if resume_at == 0:
                fire(Event.EPOCH_START)
            if self.compilation is not None:  # surgery since the last epoch: compile afresh, once
                self.compilation.refresh(state.model)
            num_batches = 0
            data = self._train_spec.dataloader
            self.parallel.set_epoch(data, state.timer.epoch.value)
            batches = () if resume_at and self._data_replaced else epoch_batches(state, data, state.steps_per_epoch)
            for batch in self._batches(batches):
                num_batches += 1
                train_batch(batch)
                self._preemption.after_batch(state)  # after a signal (every rank the same batch): save, raise Preempted
                if self._fit_finished():
                    break
            if num_batches == 0 and resume_at == 0:
                raise ValueError(
                    "train_dataloader produced no batches this epoch; it must yield at least one batch per epoch "
                    "(an exhausted iterator or generator cannot be reused: pass a DataLoader)."
                )
            if state.fit_ends_mid_epoch:  # the epoch stays open: a later fit, or a resumed run, trains the rest
                break
            state.timer.on_epoch_complete()
            self._schedulers.step_epoch()
            fire(Event.EPOCH_END)
            if self.compilation is not None:
                self.compilation.refresh(state.model)
            self._evaluation.due(TimeUnit.EPOCH)
            fire(Event.EPOCH_CHECKPOINT)
        fire(Event.FIT_END)

    def _train_batch(self, batch: Any) -> None:
        """AFTER_DATALOADER ... BATCH_CHECKPOINT for one batch of the loader: the update, the timer, the schedulers."""
        state, spec, fire = self.state, self._train_spec, self._fire
        if self._moves_batches:
            batch = batch_to_device(batch, self.device)
        state.batch = loaded = spec.device_transforms(batch)
        # Time advances by what the loader produced, before any algorithm resizes or drops samples.
        num_samples = spec.get_num_samples_in_batch(state.batch)
        num_tokens = spec.get_num_tokens_in_batch(state.batch)
        if num_tokens is None and state.max_duration.unit == TimeUnit.TOKEN:
            raise ValueError(
                f"max_duration={state.max_duration} counts tokens, but the training batches have no token "
                "count. Give dict batches with 'input_ids', or pass DataSpec(get_num_tokens_in_batch=...)."
            )
        state.batch_num_samples, state.batch_num_tokens = num_samples, num_tokens or 0
        fire(Event.AFTER_DATALOADER)
        if self.compilation is not None:  # what algorithms resize is marked dynamic (or static, for inductor)
            self.compilation.note_batch(loaded, state.batch)
        fire(Event.BATCH_START)

        loss = self._update_weights()
        state.loss = loss
        if self.logger.destinations:  # per batch: skip building the values when nobody logs
            self.logger.metric_batch({"loss/train": loss})

        num_samples, num_tokens = self.parallel.totals(spec, num_samples, num_tokens)  # launched: of all ranks
        state.timer.on_batch_complete(num_samples, num_tokens)
        self._schedulers.step_batch()
        fire(Event.BATCH_END)
        if state.evaluators:
            self._evaluation.due(TimeUnit.BATCH)
        fire(Event.BATCH_CHECKPOINT)

    def _update_weights(self) -> torch.Tensor:
        """The batch's gradient (:meth:`_batch_gradient`: forward, loss, backward), then each optimizer's step;
        returns the batch's loss."""
        state = self.state
        optimizers, scaler = state.optimizers, state.scaler
        if scaler is None and len(optimizers) == 1:
            # A closure lets optimizers that re-evaluate the loss (SAM, LBFGS) re-run the batch's events.
            loss = optimizers[0].step(self._batch_gradient)  # type: ignore[arg-type]
            return loss if isinstance(loss, torch.Tensor) else torch.as_tensor(state.loss)
        batch_loss = self._batch_gradient()
        for optimizer in optimizers:
            if scaler is not None:
                scaler.step(optimizer)  # skips the step when the gradients hold inf/NaN
            else:
                optimizer.step()
        if scaler is not None:
            scaler.update()
        return batch_loss

    def _batch_gradient(self) -> torch.Tensor:
        """BEFORE_TRAIN_BATCH ... AFTER_TRAIN_BATCH: the gradient of the whole batch, as the sum over microbatches.

        With ``grad_accum='auto'``, an attempt that runs out of memory (on any rank) is run again from
        ``BEFORE_TRAIN_BATCH`` with twice the microbatches, on the same batch and random draws
        (:mod:`composer.distributed.microbatching`).
        """
        state = self.state
        total_loss, state.batch_num_samples = self._microbatching.run(self._accumulate)
        state.loss = total_loss
        if state.scaler is not None:
            for optimizer in state.optimizers:
                state.scaler.unscale_(optimizer)
        if self.grad_clip_norm is not None:
            apply_gradient_clipping(self._model.parameters(), "norm", self.grad_clip_norm)
        self._fire(Event.AFTER_TRAIN_BATCH)
        return total_loss

    def _accumulate(self) -> tuple[torch.Tensor, int]:
        """One attempt at the batch's gradient: ``BEFORE_TRAIN_BATCH``, then forward and backward over the
        microbatches of ``state.batch``; returns the summed loss and the samples."""
        state, spec = self.state, self._train_spec
        full_batch, full_samples = state.batch, state.batch_num_samples
        self._fire(Event.BEFORE_TRAIN_BATCH)
        for optimizer in state.optimizers:
            optimizer.zero_grad(set_to_none=True)
        microbatches: Sequence[Any]
        # 'auto' may double grad_accum past a small batch (the last of an epoch): then one sample per microbatch.
        count = min(state.grad_accum, full_samples) if self._microbatching.auto else state.grad_accum
        if count == 1:
            microbatches = [full_batch]
        else:
            microbatches = spec.split_batch(full_batch, count)
            if self.compilation is not None:
                for microbatch in microbatches:
                    self.compilation.mark_dynamic(microbatch)
            full_samples = sum(spec.get_num_samples_in_batch(mb) for mb in microbatches)
        defer_sync = self._microbatching.defer_sync  # 'auto' under DDP: Microbatching.agree averages the gradients
        total_loss: torch.Tensor | None = None
        last = len(microbatches) - 1
        for i, microbatch in enumerate(microbatches):
            state.batch = microbatch
            if last:
                state.batch_num_samples = spec.get_num_samples_in_batch(microbatch)
            weight_by = full_samples if last else None
            if i == last and not defer_sync:  # the only or last microbatch: its backward synchronises (launched)
                loss = self._microbatch_gradient(weight_by)
            else:  # launched: no_sync with single_auto_sync (and always when deferred), so they only accumulate
                with self.parallel.sync_context(is_final_microbatch=i == last, deferred=defer_sync):
                    loss = self._microbatch_gradient(weight_by)
            total_loss = loss if total_loss is None else total_loss + loss
        assert total_loss is not None
        return total_loss, full_samples

    def _microbatch_gradient(self, full_samples: int | None) -> torch.Tensor:
        """BEFORE_FORWARD ... AFTER_BACKWARD for ``state.batch``: adds its gradient; returns its (detached) loss.

        With ``full_samples`` (one of several microbatches), the loss is weighted by the microbatch's share of them.
        """
        state, fire, scaler = self.state, self._fire, self.state.scaler
        fire(Event.BEFORE_FORWARD)
        state.outputs = self._forward(state.batch)
        fire(Event.AFTER_FORWARD)
        fire(Event.BEFORE_LOSS)
        state.loss = self._loss(state.outputs, state.batch)
        if full_samples is not None:
            # Weight by sample count so uneven microbatches add up to the full batch's mean loss.
            state.loss = weight_loss(state.loss, state.batch_num_samples / full_samples)
        fire(Event.AFTER_LOSS)
        fire(Event.BEFORE_BACKWARD)
        loss = state.loss if isinstance(state.loss, torch.Tensor) else sum_losses(state.loss)
        self._backward(scaler.scale(loss) if scaler is not None else loss, create_graph=self._create_graph)
        fire(Event.AFTER_BACKWARD)
        return loss.detach()

    # ---- evaluation --------------------------------------------------------------------------------------------

    def eval(self, eval_dataloader: Any = None, subset_num_batches: int | None = None) -> dict[str, float]:
        """Evaluates now, outside training.

        Args:
            eval_dataloader (Iterable | DataSpec | Evaluator | Sequence, optional): What to evaluate on; default:
                the Trainer's evaluators.
            subset_num_batches (int, optional): At most this many batches per evaluator.

        Returns:
            dict[str, float]: ``'metrics/<label>/<name>'`` -> value.
        """
        evaluators = (
            self.state.evaluators
            if eval_dataloader is None
            else self._make_evaluators(eval_dataloader, 1, subset_num_batches)
        )
        results: dict[str, float] = {}
        for evaluator in evaluators:
            results.update(self._evaluation.run(evaluator, LogLevel.EPOCH, subset_num_batches))
        return results

    # ---- prediction and lifetime -------------------------------------------------------------------------------

    def predict(self, dataloader: Iterable[Any] | DataSpec, subset_num_batches: int | None = None) -> list[Any]:
        """Runs the model's forward on every batch of ``dataloader`` in eval mode, without gradients.

        Returns:
            list: The outputs of each batch, on the CPU.
        """
        return self._evaluation.predict(ensure_data_spec(dataloader), subset_num_batches)

    def save_checkpoint(self, path: str | os.PathLike[str], *, weights_only: bool = False) -> Path:
        """Saves the training state (or only the weights) to ``path`` now; see ``composer.utils.checkpoint``.

        Launched, every rank must call it: rank 0 writes the file (with every rank's random states) and the others
        wait until it is in place. With ``fsdp_config`` the ranks first gather the whole weights and optimizer
        states onto rank 0, so the file is the one an unsharded run writes; with its ``state_dict_type='sharded'``,
        ``path`` is a folder into which every rank writes its own shards instead.

        Returns:
            Path: The file written.

        Raises:
            NonFiniteWeightsError: With ``check_finite`` (the default), if a weight holds a NaN or an infinity.
        """
        return save_checkpoint(
            self.state,
            path,
            weights_only=weights_only,
            metadata=self._run_config,
            check_finite=self._check_finite,
            sharded=self.checkpointing.sharded,  # fsdp_config's state_dict_type='sharded': path is a folder
        )

    def close(self) -> None:
        """Closes every callback and logger: each one's ``close``, then each one's ``post_close``.

        Call it when done training (``fit`` does not close, so that it may be called again), or use the Trainer as
        a context manager. If you do not, it runs for you when ``fit`` raises, when the Trainer is garbage-collected,
        or at the latest when the interpreter exits. Idempotent: later calls, and the automatic closing, do nothing.
        """
        self._closer()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
