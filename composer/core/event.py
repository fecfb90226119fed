"""The events the training loop fires, in the order it fires them."""

from __future__ import annotations

import warnings
from enum import Enum, EnumMeta
from typing import Any

__all__ = ["Event", "EventDeprecationWarning"]


class EventDeprecationWarning(DeprecationWarning):
    """Warns that an event name is an old alias (``TRAINING_START``, ``TRAINING_END``)."""


# Old names kept as aliases: name -> the event it now means.
_ALIASES = {"TRAINING_START": "FIT_START", "TRAINING_END": "FIT_END"}


def _warn_alias(old: str) -> None:
    warnings.warn(
        f"Event.{old} is deprecated; use Event.{_ALIASES[old]} (it is the same event).",
        EventDeprecationWarning,
        stacklevel=3,
    )


class _EventMeta(EnumMeta):
    # ``Event.TRAINING_START`` falls through to here because it is not a member: warn, then return the event it means.
    def __getattr__(cls, name: str) -> Any:
        if name in _ALIASES:
            _warn_alias(name)
            return cls[_ALIASES[name]]
        raise AttributeError(name)


class Event(Enum, metaclass=_EventMeta):
    """A point in the training loop at which algorithms and callbacks run; ``event.value`` names the Callback method.

    The Trainer fires ``INIT`` once, between the phases of its constructor, and the rest in every call to ``fit``, in
    the order ``Trainer.fit`` reads (the guide "How it works" tells what repeats and what stops early)::

        arguments, processes, seed, data, loggers, State   # Trainer.__init__: these three lines
        INIT                                            # algorithms may change the model; no optimizer has seen it
        optimizers, precision, schedulers, wrap         # the model placed, FSDP-sharded, loaded, then DDP-wrapped
        FIT_START                                       # each call to fit()
        while the run is not over:
            EPOCH_START                                 # unless continuing an epoch left open
            for batch in train_dataloader:
                AFTER_DATALOADER                        # the batch on the device; samples and tokens counted
                BATCH_START
                BEFORE_TRAIN_BATCH                      # again when SAM or grad_accum='auto' re-runs the batch
                for microbatch in batch split into grad_accum parts:
                    BEFORE_FORWARD
                    AFTER_FORWARD                       # state.outputs
                    BEFORE_LOSS
                    AFTER_LOSS                          # state.loss
                    BEFORE_BACKWARD
                    AFTER_BACKWARD
                AFTER_TRAIN_BATCH                       # gradients unscaled and clipped
                optimizer step, timer, schedulers
                BATCH_END
                evaluation, if an evaluator is due
                BATCH_CHECKPOINT
                stop if the run is over or stopped      # after SIGTERM or SIGINT: save, close, raise Preempted
            EPOCH_END                                   # unless the run stops mid-epoch: the epoch stays open
            evaluation, if an evaluator is due
            EPOCH_CHECKPOINT
        FIT_END
        EVAL_START                                      # in the loop, or through Trainer.eval()
        for batch in eval_dataloader:
            EVAL_BATCH_START
            EVAL_BEFORE_FORWARD                         # per part of a batch split after running out of memory
            EVAL_AFTER_FORWARD                          # state.outputs
            EVAL_BATCH_END
        EVAL_END
    """

    INIT = "init"
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    AFTER_DATALOADER = "after_dataloader"
    BATCH_START = "batch_start"
    BEFORE_TRAIN_BATCH = "before_train_batch"
    BEFORE_FORWARD = "before_forward"
    AFTER_FORWARD = "after_forward"
    BEFORE_LOSS = "before_loss"
    AFTER_LOSS = "after_loss"
    BEFORE_BACKWARD = "before_backward"
    AFTER_BACKWARD = "after_backward"
    AFTER_TRAIN_BATCH = "after_train_batch"
    BATCH_END = "batch_end"
    BATCH_CHECKPOINT = "batch_checkpoint"
    EPOCH_END = "epoch_end"
    EPOCH_CHECKPOINT = "epoch_checkpoint"
    FIT_END = "fit_end"
    EVAL_START = "eval_start"
    EVAL_BATCH_START = "eval_batch_start"
    EVAL_BEFORE_FORWARD = "eval_before_forward"
    EVAL_AFTER_FORWARD = "eval_after_forward"
    EVAL_BATCH_END = "eval_batch_end"
    EVAL_END = "eval_end"

    # Members are singletons compared by identity, so the identity hash agrees with ==; unlike Enum's own
    # ``hash(self._name_)`` it runs no Python code, and the engine looks events up in dicts at every one of them.
    __hash__ = object.__hash__

    @classmethod
    def _missing_(cls, value: object) -> Event | None:
        # Case-insensitive lookup by name or value; old aliases resolve with a warning.
        if not isinstance(value, str):
            return None
        key = value.upper()
        if key in _ALIASES:
            _warn_alias(key)
            return cls[_ALIASES[key]]
        return cls.__members__.get(key)

    @property
    def is_before_event(self) -> bool:
        """Whether this event opens a pair (``FIT_START``, ``EPOCH_START``, ``BEFORE_FORWARD``, ...)."""
        return self in _BEFORE_EVENTS

    @property
    def is_after_event(self) -> bool:
        """Whether this event closes a pair (``FIT_END``, ``AFTER_FORWARD``, ...); algorithms then run in reverse."""
        return self in _AFTER_EVENTS

    @property
    def canonical_name(self) -> str:
        """The name shared by a before/after pair: ``'forward'`` for ``BEFORE_FORWARD`` and ``AFTER_FORWARD``."""
        name = self.value.replace("before_", "").replace("after_", "")
        return name.removesuffix("_start").removesuffix("_end")


_BEFORE_EVENTS = frozenset(
    {
        Event.FIT_START,
        Event.EPOCH_START,
        Event.BATCH_START,
        Event.BEFORE_TRAIN_BATCH,
        Event.BEFORE_FORWARD,
        Event.BEFORE_LOSS,
        Event.BEFORE_BACKWARD,
        Event.EVAL_START,
        Event.EVAL_BATCH_START,
        Event.EVAL_BEFORE_FORWARD,
    }
)
_AFTER_EVENTS = frozenset(
    {
        Event.FIT_END,
        Event.EPOCH_END,
        Event.BATCH_END,
        Event.AFTER_TRAIN_BATCH,
        Event.AFTER_FORWARD,
        Event.AFTER_LOSS,
        Event.AFTER_BACKWARD,
        Event.EVAL_END,
        Event.EVAL_BATCH_END,
        Event.EVAL_AFTER_FORWARD,
    }
)
