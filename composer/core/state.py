"""State: everything the training loop reads and changes."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from composer.core.metric_names import EvalMetrics
from composer.core.precision import Precision
from composer.core.serializable import Serializable
from composer.core.time import Time, Timer, Timestamp, TimeUnit
from composer.core.versioned_list import VersionedList

if TYPE_CHECKING:
    from composer.core.algorithm import Algorithm
    from composer.core.callback import Callback
    from composer.core.evaluator import Evaluator

__all__ = ["SequenceCut", "State", "bare_model_state", "unwrap_model"]


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


@dataclass
class SequenceCut:
    """How the algorithms that shorten training sequences agreed to cut each batch (:attr:`State.sequence_cut`).

    They say it at ``INIT`` and read it at ``AFTER_DATALOADER``, so the batch is cut once, whatever their order in
    the algorithm list: ALiBi trains on a fraction of each sequence (``scaling``); SeqLengthWarmup cuts to its schedule
    (``scheduled``) and then applies the scaling in the same cut, and ALiBi leaves the batch to it.

    Attributes:
        scaling (float): The fraction of each loaded sequence's length to train on; 1.0 keeps the whole length.
        scheduled (bool): Whether an algorithm cuts every training batch to a schedule of its own, applying
            ``scaling`` as well.
    """

    scaling: float = 1.0
    scheduled: bool = False


class State(Serializable):
    """The training state: the model, optimizers, time, the current batch and its results, and who runs on it.

    Algorithms change it; callbacks read it (and may only end the run, through :meth:`stop_training`). The Trainer
    builds it; tests and custom loops may build one directly. The guide ``docs/guides/how-it-works.md`` says when
    each attribute changes and what checkpoints keep.

    Args:
        model (torch.nn.Module): The model.
        max_duration (str | Time | int): How long to train: ``'90ep'``, ``'500ba'``, ... (an int means epochs; not
            ``'dur'``). Multiplied by ``scale_schedule_ratio``.
        rank_zero_seed (int): The run's seed; each process seeds with ``rank_zero_seed + rank``.
        train_dataloader (Iterable, optional): The training data (a DataLoader or any iterable of batches).
        steps_per_epoch (int, optional): Batches per epoch; default ``len(train_dataloader)`` when it has a length.
        evaluators (Sequence[Evaluator]): Evaluation sets.
        grad_accum (int): Microbatches per batch.
        precision (str | Precision): ``'fp32'``, ``'amp'`` or ``'bf16'``.
        optimizers (torch.optim.Optimizer | Sequence, optional): The optimizer(s).
        schedulers (Any | Sequence, optional): Learning-rate schedulers (torch schedulers), stepped by the trainer.
        algorithms (Sequence[Algorithm]): The algorithms, in order.
        callbacks (Sequence[Callback]): The callbacks (logger destinations first), in order.
        device (torch.device | str, optional): Where training runs. Default: CPU.
        scale_schedule_ratio (float): The run trains ``scale_schedule_ratio x max_duration`` (schedulers' ``ssr``).
        run_name (str, optional): The run's name, for ``{run_name}`` in the paths logger destinations write.

    Its attributes (``timer``, ``batch``, ``outputs``, ``loss``, ``rng``, ...) are listed in the guide
    ``docs/guides/how-it-works.md`` ("State's attributes").

    Example:
        >>> import torch
        >>> state = State(model=torch.nn.Linear(2, 2), max_duration="10ep", steps_per_epoch=4)
        >>> state.max_epochs
        10
        >>> state.max_epochs /= 4  # 2.5 epochs is a batch budget
        >>> state.max_duration
        Time(10, TimeUnit.BATCH)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        max_duration: str | Time[Any] | int,
        *,
        rank_zero_seed: int = 0,
        train_dataloader: Iterable[Any] | None = None,
        steps_per_epoch: int | None = None,
        evaluators: Sequence[Evaluator] = (),
        grad_accum: int = 1,
        precision: str | Precision = Precision.FP32,
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
        schedulers: Any = None,
        algorithms: Sequence[Algorithm] = (),
        callbacks: Sequence[Callback] = (),
        device: torch.device | str | None = None,
        scale_schedule_ratio: float = 1.0,
        run_name: str | None = None,
    ) -> None:
        self.model = model
        self.run_name = run_name
        self.timer = Timer()
        self.train_dataloader = train_dataloader
        self._steps_per_epoch = steps_per_epoch
        self._scale_schedule_ratio = 1.0
        self.max_duration = max_duration
        self.scale_schedule_ratio = scale_schedule_ratio
        self.rank_zero_seed = rank_zero_seed
        self.evaluators: list[Evaluator] = list(evaluators)
        self.grad_accum = grad_accum
        self._precision = Precision(precision)
        self._optimizers: list[torch.optim.Optimizer] = _as_list(optimizers)
        self._schedulers: list[Any] = _as_list(schedulers)
        # Versioned: the engine re-plans its dispatch when lists_version moves.
        self._algorithms: VersionedList[Algorithm] = VersionedList(algorithms)
        self._callbacks: VersionedList[Callback] = VersionedList(callbacks)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.rng = torch.Generator()
        self.rng.manual_seed(self.seed)
        self.scaler: Any = None
        self.batch: Any = None
        self.batch_num_samples = 0
        self.batch_num_tokens = 0
        self.outputs: Any = None
        self.loss: Any = None
        self.train_metrics: dict[str, Any] = {}
        self.eval_metrics = EvalMetrics()
        self.dataloader: Iterable[Any] | None = None
        self.dataloader_label: str | None = None
        self.stop_reason: str | None = None
        self.epoch_start_rng: dict[str, Any] | None = None
        self.resume_rng: dict[str, Any] | None = None
        self.resume_data: dict[str, Any] | None = None
        self.sequence_cut = SequenceCut()

    # ---- time and duration -------------------------------------------------------------------------------------

    @property
    def max_duration(self) -> Time[int]:
        """How long to train, as a :class:`Time` in ep, ba, sp or tok (settable from a string, int or Time)."""
        return self._max_duration

    @max_duration.setter
    def max_duration(self, value: str | Time[Any] | int) -> None:
        duration = Time.from_input(value, default_unit=TimeUnit.EPOCH)
        if duration.unit == TimeUnit.DURATION:
            raise ValueError(
                f"max_duration={value!r} is a fraction of the run, which needs a run length to refer to; "
                "give max_duration in 'ep', 'ba', 'sp' or 'tok' (for example '10ep')."
            )
        if duration.value <= 0:
            raise ValueError(f"max_duration={value!r} must be positive; for example '10ep' or '500ba'.")
        self._max_duration: Time[int] = duration
        # Assigning sets the budget itself; the unscaled duration is what it was before the ratio.
        ratio = self._scale_schedule_ratio
        self._unscaled_max_duration: Time[int] = duration if ratio == 1.0 else duration / ratio

    @property
    def scale_schedule_ratio(self) -> float:
        """The scale schedule ratio (ssr): ``max_duration`` is the unscaled duration times this ratio.

        Setting it rescales ``max_duration`` from the duration it was set with, so setting the same ratio twice
        changes nothing.
        """
        return self._scale_schedule_ratio

    @scale_schedule_ratio.setter
    def scale_schedule_ratio(self, ratio: float) -> None:
        if not ratio > 0 or math.isinf(ratio):
            raise ValueError(f"scale_schedule_ratio={ratio!r} must be a positive, finite number (e.g. 0.5 or 2.0).")
        unscaled = self._unscaled_max_duration
        scaled = unscaled if ratio == 1.0 else unscaled * ratio
        if scaled.value == 0:
            raise ValueError(
                f"scale_schedule_ratio={ratio} makes max_duration={unscaled} round down to zero; use a larger ratio "
                "or express max_duration in a finer unit (batches or samples)."
            )
        self._scale_schedule_ratio = float(ratio)
        self._max_duration = scaled
        self._unscaled_max_duration = unscaled

    @property
    def steps_per_epoch(self) -> int | None:
        """Batches per epoch: the explicit value, else ``len(train_dataloader)``, else None (unknown)."""
        if self._steps_per_epoch is not None:
            return self._steps_per_epoch
        try:
            return len(self.train_dataloader)  # type: ignore[arg-type]
        except TypeError:
            return None

    @steps_per_epoch.setter
    def steps_per_epoch(self, value: int | None) -> None:
        if value is not None and value <= 0:
            raise ValueError(f"steps_per_epoch={value!r} must be a positive number of batches, or None.")
        self._steps_per_epoch = value

    @property
    def max_epochs(self) -> int | float:
        """``max_duration`` in epochs. Setting it replaces ``max_duration``: a whole number of epochs stays an epoch
        budget, a fractional one becomes the equivalent number of batches (which needs ``steps_per_epoch``)."""
        duration = self._max_duration
        if duration.unit == TimeUnit.EPOCH:
            return duration.value
        spe = self.steps_per_epoch
        if duration.unit == TimeUnit.BATCH and spe:
            return duration.value / spe
        raise ValueError(
            f"max_duration={duration} cannot be expressed in epochs"
            + (" without the number of batches per epoch" if duration.unit == TimeUnit.BATCH else "")
            + "; read state.max_duration instead."
        )

    @max_epochs.setter
    def max_epochs(self, value: float) -> None:
        if not value > 0 or math.isinf(value):
            raise ValueError(f"max_epochs={value!r} must be a positive, finite number of epochs.")
        if float(value).is_integer():
            self._max_duration = Time(int(value), TimeUnit.EPOCH)
            return
        spe = self.steps_per_epoch
        if not spe:
            raise ValueError(
                f"max_epochs={value!r} is fractional, which needs the number of batches per epoch; the training "
                "dataloader has no length. Set a whole number of epochs, or set state.max_duration in batches."
            )
        self._max_duration = Time(max(1, round(value * spe)), TimeUnit.BATCH)

    def get_elapsed_duration(self) -> Time[float]:
        """The fraction of the run done so far, as a ``'dur'`` :class:`Time`.

        It advances per batch whenever the loader has a length, even with an epoch budget.
        """
        duration = self._max_duration
        spe = self.steps_per_epoch
        if duration.unit == TimeUnit.EPOCH and spe:
            fraction = self.timer.batch.value / (duration.value * spe)
        else:
            fraction = self.timer.get(duration.unit).value / duration.value
        return Time(float(fraction), TimeUnit.DURATION)

    @property
    def timestamp(self) -> Timestamp:
        """A read-only snapshot of the timer (MosaicML Composer v0.32.1's ``state.timestamp``).

        Its fields ``epoch``, ``batch``, ``sample``, ``token``, ``batch_in_epoch``, ``sample_in_epoch`` and
        ``token_in_epoch`` are :class:`Time` values; each read gives the counters of that moment. Only the training
        loop advances time (through ``state.timer``), so neither the snapshot nor this attribute can be assigned.
        """
        return self.timer.get_timestamp()

    @timestamp.setter
    def timestamp(self, value: Any) -> None:
        raise AttributeError(
            "state.timestamp is read-only: a snapshot of state.timer, which only the training loop advances. To "
            "resume at a given time, load a checkpoint (the Trainer's load_path)."
        )

    @property
    def epoch(self) -> int:
        """The current epoch (0-based), ``int(state.timer.epoch)``."""
        return self.timer.epoch.value

    @property
    def world_size(self) -> int:
        """The number of processes training together (1 without torch.distributed)."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_world_size()
        return 1

    @property
    def rank(self) -> int:
        """This process's global rank (0 without torch.distributed)."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank()
        return 0

    @property
    def seed(self) -> int:
        """This process's seed: ``rank_zero_seed + rank``."""
        return self.rank_zero_seed + self.rank

    # ---- stopping ----------------------------------------------------------------------------------------------

    def stop_training(self, reason: str = "stop_training() called") -> None:
        """Ends the run once the current batch completes (the one way a callback may change the run).

        ``BATCH_END``, ``BATCH_CHECKPOINT``, a due evaluation, the final checkpoint and ``FIT_END`` still happen;
        ``EPOCH_END`` and ``EPOCH_CHECKPOINT`` only if the batch was the epoch's last (see :attr:`fit_ends_mid_epoch`).

        Args:
            reason (str): Why, for the logs and ``state.stop_reason``.
        """
        self.stop_reason = reason

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`stop_training` was called."""
        return self.stop_reason is not None

    @property
    def fit_ends_mid_epoch(self) -> bool:
        """Whether ``fit`` ends before the current epoch's data is exhausted: the run is over (``max_duration`` in
        batches, samples or tokens reached, or :meth:`stop_training`) with fewer than ``steps_per_epoch`` batches of
        the epoch trained (or any number, when the data's length is unknown).

        An epoch ends only when its data is exhausted, so such an epoch stays open: ``EPOCH_END`` and
        ``EPOCH_CHECKPOINT`` do not fire for it; the evaluation of the weights ``fit`` ends with follows the last
        ``BATCH_END`` instead, and the final checkpoint is saved at the last ``BATCH_CHECKPOINT``. A later ``fit``, or
        a run resumed from that checkpoint, trains the epoch's remaining batches as an uninterrupted run would.
        """
        done = self.timer.batch_in_epoch.value
        duration = self._max_duration
        if done == 0 or not (self.stop_reason is not None or self.timer.count(duration.unit) >= duration.value):
            return False
        steps = self.steps_per_epoch
        return steps is None or done < steps

    # ---- collections whose identity others hold on to ----------------------------------------------------------

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers; assigning replaces the contents of the same list."""
        return self._optimizers

    @optimizers.setter
    def optimizers(self, value: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None) -> None:
        self._optimizers[:] = _as_list(value)

    @property
    def schedulers(self) -> list[Any]:
        """The learning-rate schedulers the trainer steps; assigning replaces the contents of the same list."""
        return self._schedulers

    @schedulers.setter
    def schedulers(self, value: Any) -> None:
        self._schedulers[:] = _as_list(value)

    @property
    def algorithms(self) -> list[Algorithm]:
        """The algorithms; assigning replaces the contents of the same list."""
        return self._algorithms

    @algorithms.setter
    def algorithms(self, value: Sequence[Algorithm]) -> None:
        self._algorithms[:] = list(value)

    @property
    def callbacks(self) -> list[Callback]:
        """The callbacks (logger destinations first); assigning replaces the contents of the same list."""
        return self._callbacks

    @callbacks.setter
    def callbacks(self, value: Sequence[Callback]) -> None:
        self._callbacks[:] = list(value)

    @property
    def lists_version(self) -> int:
        """A count that goes up whenever :attr:`algorithms` or :attr:`callbacks` change, in place or by assignment.

        The :class:`~composer.core.engine.Engine` keeps what it worked out about who handles each event while this
        count stays the same.
        """
        return self._algorithms.version + self._callbacks.version

    @property
    def precision(self) -> Precision:
        """The training precision (settable from a string)."""
        return self._precision

    @precision.setter
    def precision(self, value: str | Precision) -> None:
        self._precision = Precision(value)

    # ---- typed views of the batch ------------------------------------------------------------------------------

    @property
    def batch_pair(self) -> tuple[Any, Any]:
        """The batch as an ``(inputs, targets)`` pair; TypeError if it is not a 2-element sequence."""
        batch = self.batch
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(
                f"state.batch is a {type(batch).__name__}, not an (inputs, targets) pair; "
                "this method needs a dataloader that yields 2-element tuples or lists."
            )
        return batch[0], batch[1]

    @batch_pair.setter
    def batch_pair(self, value: tuple[Any, Any]) -> None:
        self.batch = type(self.batch)(value) if isinstance(self.batch, list) else tuple(value)

    @property
    def batch_dict(self) -> Mapping[str, Any]:
        """The batch as a mapping; TypeError if it is not one."""
        if not isinstance(self.batch, Mapping):
            raise TypeError(
                f"state.batch is a {type(self.batch).__name__}, not a mapping; this method needs a dataloader that "
                "yields dicts (for example {'input_ids': ..., 'labels': ...})."
            )
        return self.batch

    # ---- serialization -----------------------------------------------------------------------------------------

    def capture_rng(self) -> dict[str, Any]:
        """The random states of this process: Python's ``random``, NumPy's and torch's global generators, every
        initialised CUDA device, and the generators of the training dataloader and its sampler.

        These are what a ``DataLoader(shuffle=True)`` draws its order and its workers' seeds from, and what user code
        (dropout, dataset transforms) draws from. ``state.rng`` is not included: it is saved on its own as ``'rng'``.
        The result holds tensors and plain values only.

        Example:
            >>> import torch
            >>> from composer.core import State
            >>> state = State(model=torch.nn.Linear(8, 3), max_duration="1ep", steps_per_epoch=4)
            >>> snapshot = state.capture_rng()
            >>> a = torch.rand(2)
            >>> state.restore_rng(snapshot)
            >>> torch.equal(a, torch.rand(2))
            True
        """
        numpy_state = np.random.get_state(legacy=True)
        assert isinstance(numpy_state, tuple)  # legacy=True always gives the MT19937 tuple
        kind, keys, pos, has_gauss, cached_gaussian = numpy_state
        snapshot: dict[str, Any] = {
            "python": random.getstate(),
            "numpy": {
                "kind": str(kind),
                "keys": torch.from_numpy(keys.astype(np.int64)),
                "pos": int(pos),
                "has_gauss": int(has_gauss),
                "cached_gaussian": float(cached_gaussian),
            },
            "torch": torch.get_rng_state(),
            # Only devices already in use: asking an untouched CUDA runtime for its state would initialise it.
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],  # type: ignore[no-untyped-call]
            "dataloader": [g.get_state() for g in _dataloader_generators(self.train_dataloader)],
        }
        return snapshot

    def restore_rng(self, snapshot: Mapping[str, Any]) -> None:
        """Puts back the random states :meth:`capture_rng` returned (parts the snapshot lacks are left alone).

        Args:
            snapshot (Mapping): The output of :meth:`capture_rng`, possibly from another process.
        """
        if "python" in snapshot:
            version, internal, gauss_next = snapshot["python"]
            random.setstate((version, tuple(internal), gauss_next))
        if "numpy" in snapshot:
            saved = snapshot["numpy"]
            keys = saved["keys"].numpy().astype(np.uint32)
            np.random.set_state((saved["kind"], keys, saved["pos"], saved["has_gauss"], saved["cached_gaussian"]))
        if "torch" in snapshot:
            torch.set_rng_state(snapshot["torch"])
        cuda_states = snapshot.get("cuda") or []
        if cuda_states and torch.cuda.is_available():
            if len(cuda_states) == torch.cuda.device_count():
                torch.cuda.set_rng_state_all(cuda_states)
            else:
                warnings.warn(
                    f"The saved random states are for {len(cuda_states)} CUDA devices but this process sees "
                    f"{torch.cuda.device_count()}; the CUDA random states are not restored, so GPU randomness will "
                    "differ from the saved run.",
                    stacklevel=2,
                )
        generators = _dataloader_generators(self.train_dataloader)
        saved_generators = snapshot.get("dataloader") or []
        if len(saved_generators) == len(generators):
            for generator, generator_state in zip(generators, saved_generators):
                generator.set_state(generator_state)
        elif saved_generators or generators:
            warnings.warn(
                f"The saved random states hold {len(saved_generators)} dataloader generators but the training "
                f"dataloader has {len(generators)}; its shuffle order will differ from the saved run. Build the "
                "dataloader the same way (with or without a generator=) as the run that saved the checkpoint.",
                stacklevel=2,
            )

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: model, optimizers, schedulers, algorithms, callbacks, timer, seed, RNG.

        Model keys are those of the bare model (no ``module.`` from DistributedDataParallel, no ``_orig_mod.`` from
        ``torch.compile``), so checkpoints move between wrapped and unwrapped models. ``'process_rng'`` holds
        :meth:`capture_rng` now (``'current'``) and at the start of the epoch (``'epoch_start'``). ``'train_data'``
        holds what a training loader with ``resume_state()`` (a stream that positions itself) says it needs to resume
        on another number of ranks, else None.
        """
        return {
            "model": bare_model_state(self.model),
            "optimizers": [opt.state_dict() for opt in self._optimizers],
            "schedulers": [s.state_dict() for s in self._schedulers if hasattr(s, "state_dict")],
            "algorithms": [_named_state(a) for a in self._algorithms],
            "callbacks": [_named_state(c) for c in self._callbacks],
            "timer": self.timer.state_dict(),
            "max_duration": str(self._max_duration),
            "unscaled_max_duration": str(self._unscaled_max_duration),
            "scale_schedule_ratio": self._scale_schedule_ratio,
            "grad_accum": self.grad_accum,
            "rank_zero_seed": self.rank_zero_seed,
            "rng": self.rng.get_state(),
            "process_rng": {"current": self.capture_rng(), "epoch_start": self.epoch_start_rng},
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "train_data": _resume_state(self.train_dataloader),
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restores what :meth:`state_dict` saved.

        Algorithms and callbacks are matched by class name (the second object of a class gets the second saved
        state of that class, and so on), so adding, removing or reordering them between runs does not block a
        resume: an object with no saved state starts fresh and saved states nobody claims are dropped, each with a
        warning; the Trainer's own checkpoint saver (a class with ``checkpoint_state_optional = True``) is matched
        the same way but never warns, since the user did not pass it. The process's random states are not applied here but kept in :attr:`resume_rng` (and
        :attr:`epoch_start_rng`), for the Trainer to restore at the right point of the data order; call
        :meth:`restore_rng` yourself when driving the loop by hand. The training loader's saved ``'train_data'`` is
        kept in :attr:`resume_data`, for the Trainer to hand to the loader's ``start_epoch``.

        Args:
            state (dict): A state dict from :meth:`state_dict`. Without a ``'model'`` entry the model is left as is
                (``composer.utils.checkpoint`` loads model weights itself, handling wrapper prefixes).
            strict (bool): Whether the model's keys must match exactly.
        """
        if "model" in state:
            unwrap_model(self.model).load_state_dict(state["model"], strict=strict)
        _load_list("optimizers", self._optimizers, state.get("optimizers", []))
        stateful = [s for s in self._schedulers if hasattr(s, "load_state_dict")]
        _load_list("schedulers", stateful, state.get("schedulers", []))
        _load_named("algorithms", self._algorithms, state.get("algorithms", []))
        _load_named("callbacks", self._callbacks, state.get("callbacks", []))
        self.timer.load_state_dict(state["timer"])
        if "max_duration" in state:
            self._scale_schedule_ratio = state.get("scale_schedule_ratio", 1.0)
            self.max_duration = state["max_duration"]
            self._unscaled_max_duration = Time.from_input(state.get("unscaled_max_duration", state["max_duration"]))
        self.grad_accum = state.get("grad_accum", self.grad_accum)
        self.rank_zero_seed = state["rank_zero_seed"]
        if "rng" in state:
            self.rng.set_state(state["rng"])
        process_rng = state.get("process_rng")
        if process_rng is not None:
            self.resume_rng = process_rng["current"]
            self.epoch_start_rng = process_rng["epoch_start"]
        if state.get("scaler") is not None and self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.resume_data = state.get("train_data")


def _resume_state(dataloader: Any) -> dict[str, Any] | None:
    resume_state = getattr(dataloader, "resume_state", None)
    return dict(resume_state()) if callable(resume_state) else None


def _dataloader_generators(dataloader: Any) -> list[torch.Generator]:
    """The distinct generators a (torch) dataloader draws its order and worker seeds from, in a fixed order."""
    found: list[torch.Generator] = []
    sampler = getattr(dataloader, "sampler", None)
    batch_sampler = getattr(dataloader, "batch_sampler", None)
    for owner in (dataloader, sampler, getattr(batch_sampler, "sampler", None)):
        generator = getattr(owner, "generator", None)
        if isinstance(generator, torch.Generator) and all(generator is not g for g in found):
            found.append(generator)
    return found


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside DistributedDataParallel/DataParallel and ``torch.compile`` wrappers.

    Args:
        model (torch.nn.Module): A model, wrapped or not.

    Returns:
        torch.nn.Module: The innermost model (``model`` itself when it is not wrapped).
    """
    while True:
        if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
            model = model.module
        elif type(model).__name__ == "OptimizedModule" and isinstance(model._orig_mod, torch.nn.Module):
            # torch.compile's wrapper, matched by name so that torch._dynamo (slow to import) is never imported.
            model = model._orig_mod
        else:
            return model


def bare_model_state(model: torch.nn.Module) -> dict[str, Any]:
    """The model's state dict without wrapper prefixes: ``torch.compile``'s ``_orig_mod`` is dropped anywhere in a
    key (it also appears when only a submodule was compiled).

    Args:
        model (torch.nn.Module): A model, wrapped or not.

    Returns:
        dict: The unwrapped model's ``state_dict()`` under bare keys.
    """
    return {
        ".".join(part for part in key.split(".") if part != "_orig_mod"): value
        for key, value in unwrap_model(model).state_dict().items()
    }


# Callbacks whose saved state is bookkeeping of the run that saved it (the files a CheckpointSaver wrote), not
# something a later run must restore: a run without one (a Trainer with ``load_path`` and no ``save_folder``) drops
# that state silently, and one that finds no saved state starts fresh silently. The Trainer adds these itself, so a warning would name a callback the user never passed. A
# class joins by setting ``checkpoint_state_optional = True``; the saver is also known by name, for checkpoints
# written before that attribute existed (core names it without importing it).
_OPTIONAL_STATE_CLASSES = frozenset({"CheckpointSaver"})


def _named_state(obj: Any) -> dict[str, Any]:
    named = {"class": type(obj).__qualname__, "state": obj.state_dict()}
    if getattr(obj, "checkpoint_state_optional", False) is True:
        named["optional"] = True
    return named


def _is_optional(saved: dict[str, Any]) -> bool:
    return saved.get("optional") is True or saved["class"] in _OPTIONAL_STATE_CLASSES


def _load_list(what: str, objects: Sequence[Any], states: Sequence[dict[str, Any]]) -> None:
    if len(objects) != len(states):
        raise ValueError(
            f"The checkpoint has {len(states)} {what} but this run has {len(objects)}; "
            f"configure the same {what} as the run that saved it."
        )
    for obj, saved in zip(objects, states):
        obj.load_state_dict(saved)


def _by_class(names: Iterable[str]) -> list[tuple[str, int]]:
    """(class name, how many of that class came before): the key that pairs objects with their saved states."""
    seen: dict[str, int] = {}
    keys = []
    for name in names:
        keys.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return keys


def _load_named(what: str, objects: Sequence[Any], states: Sequence[dict[str, Any]]) -> None:
    saved = dict(zip(_by_class(s["class"] for s in states), (s["state"] for s in states)))
    optional = {key for key, s in zip(_by_class(s["class"] for s in states), states) if _is_optional(s)}
    claimed: set[tuple[str, int]] = set()
    for obj, key in zip(objects, _by_class(type(o).__qualname__ for o in objects)):
        if key in saved:
            obj.load_state_dict(saved[key])
            claimed.add(key)
        elif obj.state_dict() and not _is_optional(_named_state(obj)):
            warnings.warn(
                f"The checkpoint has no saved state for the {what[:-1]} {key[0]} (number {key[1] + 1} of its class); "
                "it starts fresh. The run that saved the checkpoint did not have it.",
                stacklevel=3,
            )
    dropped = [
        f"{name} (number {i + 1})"
        for (name, i), value in saved.items()
        if (name, i) not in claimed and (name, i) not in optional and value
    ]
    if dropped:
        warnings.warn(
            f"The checkpoint holds state for {what} this run does not have: {dropped}; that state is ignored. "
            f"Pass the same {what} as the run that saved the checkpoint to restore it.",
            stacklevel=3,
        )
