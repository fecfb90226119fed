"""Evaluation inside the Trainer: :class:`EvaluationLoop` runs an evaluator over its data and returns its metrics.

The events, in order::

    EVAL_START
    for each batch (this rank's share; under FSDP the ranks keep in step, see Parallelism.eval_batches):
        EVAL_BATCH_START
        for each part of the batch (one, unless grad_accum='auto' split it):
            EVAL_BEFORE_FORWARD
            outputs = model.eval_forward(part)
            EVAL_AFTER_FORWARD
        the metrics are updated with every part (only once the whole batch succeeded)
        EVAL_BATCH_END
    EVAL_END

The model is in eval mode and gradients are off for the whole evaluation; the training mode, ``state.dataloader``
and ``state.batch`` are put back after it, and so are the process's random states (``State.capture_rng``: an
evaluation loader draws its workers' seeds from torch's generator), so that evaluating more often, or once more at
the end of a ``fit`` that a later ``fit`` extends, leaves training's random draws as they were.

During ``fit`` an evaluator runs when its interval ends (:meth:`EvaluationLoop.due`). With ``eval_at_fit_end`` (the
Trainer's default) the weights ``fit`` ends with are evaluated too, by every evaluator, after the last
``EPOCH_END`` (where SWA puts its average in) and before the last ``EPOCH_CHECKPOINT``: an evaluation due at the
last batch waits until then, and an evaluator that already ran there (an interval of one epoch) does not run again.
When ``fit`` stops in the middle of an epoch (``State.fit_ends_mid_epoch``: no ``EPOCH_END`` fires for an epoch whose
data is not exhausted), that evaluation follows the last ``BATCH_END`` instead, before the last ``BATCH_CHECKPOINT``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

from composer.core.data_spec import DataSpec
from composer.core.engine import Engine
from composer.core.evaluator import Evaluator
from composer.core.event import Event
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import TimeUnit
from composer.distributed.microbatching import Microbatching, describe_out_of_memory, join_outputs
from composer.distributed.parallelism import Parallelism
from composer.models.base import ComposerModel
from composer.utils.devices import batch_to_device

__all__ = ["EvaluationLoop"]


class EvaluationLoop:
    """Runs evaluators for a Trainer (``Trainer.eval`` and the evaluations due during ``fit``).

    Args:
        state (State): The training state (``state.batch``, ``state.outputs``, ``state.eval_metrics`` are set).
        engine (Engine): Fires the evaluation events.
        logger (Logger): Receives each evaluation's metrics.
        model (ComposerModel): The model evaluated (``state.model``).
        parallel (Parallelism): Keeps FSDP's evaluation forward passes in step across ranks.
        microbatching (Microbatching): How many parts each evaluator's batches are split into.
        precision_context (Callable): The run's precision context (autocast), entered around each forward pass.
        fit_finished (Callable): Whether ``fit`` has reached its end: ``max_duration``, or a stop.
        at_fit_end (bool): Evaluate the weights ``fit`` ends with (see the module docstring).
    """

    def __init__(
        self,
        *,
        state: State,
        engine: Engine,
        logger: Logger,
        model: ComposerModel,
        parallel: Parallelism,
        microbatching: Microbatching,
        precision_context: Callable[[], AbstractContextManager[Any]],
        fit_finished: Callable[[], bool] = lambda: False,
        at_fit_end: bool = False,
    ) -> None:
        self._state, self._engine, self._logger = state, engine, logger
        self._fit_finished, self.at_fit_end = fit_finished, at_fit_end
        self._evaluated_at: dict[str, int] = {}  # evaluator label -> the batch count it last ran at
        self.model = model
        self._parallel = parallel
        self.microbatching = microbatching
        self._precision_context = precision_context
        self._device = parallel.device
        self._moves_batches = self._device.type != "cpu"

    def predict(self, spec: DataSpec, subset_num_batches: int | None = None) -> list[Any]:
        """The model's outputs, on the CPU, for each batch of ``spec`` (at most ``subset_num_batches``), in eval mode
        and without gradients (``Trainer.predict``); no event fires."""
        model = self.model
        was_training = model.training
        model.eval()
        outputs = []
        with torch.no_grad():
            for batch in itertools.islice(spec.dataloader, subset_num_batches):
                if self._moves_batches:
                    batch = batch_to_device(batch, self._device)
                with self._precision_context():
                    out = model(spec.device_transforms(batch))
                outputs.append(batch_to_device(out, torch.device("cpu")))
        model.train(was_training)
        return outputs

    def due(self, unit: TimeUnit) -> None:
        """Runs the evaluators whose interval (in ``unit``: batches at ``BATCH_END``, epochs after ``EPOCH_END``) ends
        now; at the end of ``fit``, with :attr:`at_fit_end`, every evaluator that has not run at this batch count."""
        state = self._state
        timer = state.timer
        ending = self.at_fit_end and self._fit_finished()
        if ending and unit == TimeUnit.BATCH and not state.fit_ends_mid_epoch:
            return  # after EPOCH_END, on the weights fit ends with
        for evaluator in state.evaluators:
            interval = evaluator.eval_interval
            interval_ends = interval.unit == unit and timer.get(unit).value % interval.value == 0
            if interval_ends or (ending and self._evaluated_at.get(evaluator.label) != timer.batch.value):
                self.run(evaluator, LogLevel.BATCH if interval.unit == TimeUnit.BATCH else LogLevel.EPOCH)

    def metrics_for(self, evaluator: Evaluator) -> dict[str, Any]:
        state = self._state
        metrics: dict[str, Any] | None = state.eval_metrics.get(evaluator.label)
        if metrics is None:
            available = self.model.get_metrics(is_train=False)
            names = evaluator.metric_names if evaluator.metric_names is not None else list(available)
            unknown = [n for n in names if n not in available]
            if unknown:
                raise ValueError(
                    f"Evaluator {evaluator.label!r} asks for metrics {unknown} that the model does not provide; "
                    f"the model's eval metrics are {sorted(available)}."
                )
            metrics = {n: available[n].to(self._device) for n in names}
            state.eval_metrics[evaluator.label] = metrics
        for metric in metrics.values():
            metric.reset()
        return metrics

    def run(self, evaluator: Evaluator, level: LogLevel, subset: int | None = None) -> dict[str, float]:
        state, engine = self._state, self._engine
        model = self.model
        spec = evaluator.dataloader
        metrics = self.metrics_for(evaluator)
        self._evaluated_at[evaluator.label] = state.timer.batch.value
        training_rng = state.capture_rng()  # evaluating draws nothing training would: more evaluations, same run
        was_training = model.training
        train_batch = state.batch
        model.eval()
        state.dataloader, state.dataloader_label = spec.dataloader, evaluator.label
        limit = subset if subset is not None else evaluator.subset_num_batches
        with torch.no_grad():
            engine.run_event(Event.EVAL_START)
            # FSDP: every forward is a collective, so a rank whose share has run out joins the others' passes.
            batches = itertools.islice(spec.dataloader, limit)
            for batch in self._parallel.eval_batches(
                batches, lambda batch: self._padding_forward(evaluator.label, spec, batch)
            ):
                if self._moves_batches:
                    batch = batch_to_device(batch, self._device)
                state.batch = spec.device_transforms(batch)
                state.batch_num_samples = spec.get_num_samples_in_batch(state.batch)
                engine.run_event(Event.EVAL_BATCH_START)
                for part, outputs in self._forward(evaluator.label, spec):
                    for metric in metrics.values():
                        model.update_metric(part, outputs, metric)
                engine.run_event(Event.EVAL_BATCH_END)
            results = {f"metrics/{evaluator.label}/{name}": float(m.compute()) for name, m in metrics.items()}
            self._logger.metric(level, results)
            engine.run_event(Event.EVAL_END)
        model.train(was_training)
        state.dataloader, state.dataloader_label = state.train_dataloader, "train"
        state.batch = train_batch
        state.restore_rng(training_rng)
        return results

    def _forward(self, label: str, spec: DataSpec, padding: bool = False) -> list[tuple[Any, Any]]:
        """EVAL_BEFORE_FORWARD ... EVAL_AFTER_FORWARD for ``state.batch``; returns each (part, its outputs).

        One part, unless ``grad_accum='auto'`` found that this evaluator's batches run out of memory: then the batch
        is split (:mod:`composer.distributed.microbatching`), each part's events fire in turn, and ``state.outputs`` is
        the parts' outputs joined. An attempt that runs out of memory is dropped whole and the batch run again in
        twice as many parts; the caller updates the metrics only with the parts of the attempt that succeeded.
        Under FSDP with ``'auto'`` every rank settles each attempt with the others and runs as many forward passes.

        ``padding``: the forward passes of a rank whose share of the data has run out, which keep FSDP's collectives
        in step (see ``Parallelism.eval_batches``): no event, no ``state`` change, nothing returned.
        """
        state, engine, model, microbatching = self._state, self._engine, self.model, self.microbatching
        full_batch, num_samples = state.batch, state.batch_num_samples
        while True:
            count, fillers = microbatching.eval_parts(label, num_samples)
            parts = [full_batch] if count == 1 else spec.split_batch(full_batch, count)
            done: list[tuple[Any, Any]] = []
            failure: str | None = None
            told = False
            try:
                for part in parts:
                    if padding:
                        with self._precision_context():
                            model.eval_forward(part)
                        continue
                    state.batch = part
                    if count > 1:
                        state.batch_num_samples = spec.get_num_samples_in_batch(part)
                    engine.run_event(Event.EVAL_BEFORE_FORWARD)
                    with self._precision_context():
                        state.outputs = model.eval_forward(state.batch)
                    engine.run_event(Event.EVAL_AFTER_FORWARD)
                    done.append((state.batch, state.outputs))
                for _ in range(fillers):  # FSDP with 'auto': as many passes as the other ranks, outputs dropped
                    with self._precision_context():
                        model.eval_forward(parts[-1])
            except Exception as error:
                if not microbatching.recovers(error):
                    raise
                failure, told = describe_out_of_memory(error)
            if not padding:
                state.batch, state.batch_num_samples = full_batch, num_samples
            done = [] if failure is not None or told else done  # a failed attempt's activations go with its outputs
            if not microbatching.eval_settle(state, label, num_samples, failure=failure, told=told):
                break
        if len(done) > 1:
            state.outputs = join_outputs([outputs for _, outputs in done])
        return done

    def _padding_forward(self, label: str, spec: DataSpec, batch: Any) -> None:
        """The evaluation forward passes of a rank whose share has run out, outputs dropped (no event, no metric),
        as many as the other ranks run on a batch: see ``Parallelism.eval_batches``."""
        if self._moves_batches:
            batch = batch_to_device(batch, self._device)
        state = self._state
        kept = state.batch, state.batch_num_samples
        state.batch = spec.device_transforms(batch)
        state.batch_num_samples = spec.get_num_samples_in_batch(state.batch)
        try:
            self._forward(label, spec, padding=True)
        finally:
            state.batch, state.batch_num_samples = kept
