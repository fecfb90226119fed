"""The trainer's clock: the :class:`Timer` and its :class:`Timestamp` snapshots.

The training loop calls :meth:`Timer.on_batch_complete` after every optimisation step and
:meth:`Timer.on_epoch_complete` at the end of every epoch; everything else only reads it. Both names are also
importable from :mod:`composer.core.time`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from composer.core._time import (
    _BATCH,
    _EPOCH,
    _MAX_COUNT,
    _MAX_COUNT_DIGITS,
    _SAMPLE,
    _TOKEN,
    Time,
    TimeUnit,
    _as_unit,
    _checked_value,
    _new_time,
    _parse,
    _show,
)
from composer.core.serializable import Serializable

__all__ = ["Timer", "Timestamp"]


class Timestamp(NamedTuple):
    """A snapshot of every :class:`Timer` counter, as passed to loggers.

    Args:
        epoch: Epochs completed.
        batch: Batches (optimizer steps) completed in the whole run.
        batch_in_epoch: Batches completed in the current epoch.
        sample: Samples trained on in the whole run.
        sample_in_epoch: Samples trained on in the current epoch.
        token: Tokens trained on in the whole run.
        token_in_epoch: Tokens trained on in the current epoch.

    Example:
        >>> timer = Timer()
        >>> timer.on_batch_complete(samples=32)
        >>> timer.get_timestamp().sample
        Time(32, TimeUnit.SAMPLE)
    """

    epoch: Time[int]
    batch: Time[int]
    batch_in_epoch: Time[int]
    sample: Time[int]
    sample_in_epoch: Time[int]
    token: Time[int]
    token_in_epoch: Time[int]


# The Timer's counters in state-dict order, with their units.
_COUNTERS = {
    "epoch": _EPOCH,
    "batch": _BATCH,
    "batch_in_epoch": _BATCH,
    "sample": _SAMPLE,
    "sample_in_epoch": _SAMPLE,
    "token": _TOKEN,
    "token_in_epoch": _TOKEN,
}


def _increment(value: object, unit: TimeUnit, name: str) -> int:
    """A per-batch increment passed to on_batch_complete, as a plain non-negative int."""
    if isinstance(value, Time):
        if value.unit is not unit:
            raise ValueError(f"{name} must be counted in {unit.value!r}, not {value.unit.value!r} (got {value}).")
        return int(value.value)
    try:
        count = _checked_value(value, unit)
    except (TypeError, ValueError) as error:
        raise type(error)(f"Invalid {name} for Timer.on_batch_complete(): {error}") from None
    return int(count)


class Timer(Serializable):
    """The trainer's clock: counts epochs, batches, samples and tokens since the start of training.

    Each counter is read as a :class:`Time` (``timer.batch`` is ``Time(n, TimeUnit.BATCH)``); the ``*_in_epoch``
    counters restart at 0 every epoch. Only the training loop advances the timer, through :meth:`on_batch_complete`
    and :meth:`on_epoch_complete`. A Timer compares with a Time or a time string through the counter of that unit,
    so ``timer >= '10ba'`` reads ``timer.batch >= Time(10, 'ba')``.

    Example:
        >>> timer = Timer()
        >>> for _ in range(3):
        ...     timer.on_batch_complete(samples=32, tokens=0)
        >>> timer.on_epoch_complete()
        >>> timer.epoch, timer.batch, timer.batch_in_epoch, timer.sample
        (Time(1, TimeUnit.EPOCH), Time(3, TimeUnit.BATCH), Time(0, TimeUnit.BATCH), Time(96, TimeUnit.SAMPLE))
        >>> timer >= "3ba"
        True
        >>> timer.state_dict()["sample"]
        96
    """

    # Counters are plain ints, and only the three running totals move per batch (the per-epoch counters are the
    # totals less their values when the epoch began): on_batch_complete runs every training step and stays at a
    # couple of hundred nanoseconds. Times are built (cheaply) only when a counter is read.
    __slots__ = (
        "_batch",
        "_batch_at_epoch_start",
        "_epoch",
        "_sample",
        "_sample_at_epoch_start",
        "_timestamp",
        "_token",
        "_token_at_epoch_start",
    )

    def __init__(self) -> None:
        self._timestamp: Timestamp | None = None  # cached snapshot, dropped whenever a counter moves
        self._epoch = 0
        self._batch = 0
        self._sample = 0
        self._token = 0
        self._batch_at_epoch_start = 0
        self._sample_at_epoch_start = 0
        self._token_at_epoch_start = 0

    # ----- counters -----

    @property
    def epoch(self) -> Time[int]:
        """Epochs completed."""
        return _new_time(self._epoch, _EPOCH)

    @property
    def batch(self) -> Time[int]:
        """Batches (optimisation steps) completed since the start of training."""
        return _new_time(self._batch, _BATCH)

    @property
    def batch_in_epoch(self) -> Time[int]:
        """Batches completed in the current epoch."""
        return _new_time(self._batch - self._batch_at_epoch_start, _BATCH)

    @property
    def sample(self) -> Time[int]:
        """Samples trained on since the start of training."""
        return _new_time(self._sample, _SAMPLE)

    @property
    def sample_in_epoch(self) -> Time[int]:
        """Samples trained on in the current epoch."""
        return _new_time(self._sample - self._sample_at_epoch_start, _SAMPLE)

    @property
    def token(self) -> Time[int]:
        """Tokens trained on since the start of training."""
        return _new_time(self._token, _TOKEN)

    @property
    def token_in_epoch(self) -> Time[int]:
        """Tokens trained on in the current epoch."""
        return _new_time(self._token - self._token_at_epoch_start, _TOKEN)

    def get(self, unit: TimeUnit | str) -> Time[int]:
        """Returns the counter since the start of training in ``unit`` (``'ep'``, ``'ba'``, ``'sp'`` or ``'tok'``).

        Raises:
            ValueError: For ``'dur'``: a fraction of training needs ``max_duration``, which only the State knows.

        Example:
            >>> Timer().get("ba")
            Time(0, TimeUnit.BATCH)
        """
        unit = _as_unit(unit)
        return _new_time(self.count(unit), unit)

    def count(self, unit: TimeUnit | str) -> int:
        """Returns the counter since the start of training in ``unit`` as a plain int (the loop's cheap check).

        Raises:
            ValueError: For ``'dur'``, as :meth:`get`.

        Example:
            >>> timer = Timer()
            >>> timer.on_batch_complete(samples=8)
            >>> timer.count(TimeUnit.SAMPLE)
            8
        """
        if unit is _BATCH:
            return self._batch
        if unit is _EPOCH:
            return self._epoch
        if unit is _SAMPLE:
            return self._sample
        if unit is _TOKEN:
            return self._token
        parsed = _as_unit(unit)
        if parsed is not unit:  # a unit's name or abbreviation
            return self.count(parsed)
        raise ValueError(
            "Timer.get('dur') is not possible: the elapsed fraction of training depends on max_duration, which "
            "the Timer does not know. Use State.get_elapsed_duration() instead."
        )

    # ----- advancing -----

    def on_batch_complete(self, samples: int | Time[int] = 0, tokens: int | Time[int] = 0) -> None:
        """Advances the clock by one batch of ``samples`` samples and ``tokens`` tokens.

        Args:
            samples: Samples in the batch (across all ranks).
            tokens: Tokens in the batch (across all ranks); 0 when the data has no notion of tokens.

        Raises:
            ValueError: If an increment is negative or not a whole number, or would take a count to ``1e100`` or more
                (the most a :class:`Time` holds); the Timer is then unchanged.
        """
        if type(samples) is int and type(tokens) is int and samples >= 0 and tokens >= 0:
            sample = self._sample + samples
            token = self._token + tokens
            if sample < _MAX_COUNT > token:
                self._timestamp = None
                self._batch += 1
                self._sample = sample
                self._token = token
                return
        # Rare path: Time increments, numpy or tensor integers, or an error to report.
        sample = self._sample + _increment(samples, _SAMPLE, "samples")
        token = self._token + _increment(tokens, _TOKEN, "tokens")
        if sample >= _MAX_COUNT or token >= _MAX_COUNT:
            raise ValueError(
                f"Timer.on_batch_complete(samples={_show(samples)}, tokens={_show(tokens)}) would take the sample "
                f"or token count to 1e{_MAX_COUNT_DIGITS} or more, beyond what a Time holds; the Timer is unchanged. "
                f"Pass the number of samples and tokens in this one batch."
            )
        self._timestamp = None
        self._batch += 1
        self._sample = sample
        self._token = token

    def on_epoch_complete(self) -> None:
        """Advances the clock by one epoch and restarts the ``*_in_epoch`` counters at 0."""
        self._timestamp = None
        self._epoch += 1
        self._batch_at_epoch_start = self._batch
        self._sample_at_epoch_start = self._sample
        self._token_at_epoch_start = self._token

    # ----- snapshots and state -----

    def get_timestamp(self) -> Timestamp:
        """Returns an immutable snapshot of all seven counters (built once per change of the clock)."""
        if self._timestamp is None:
            self._timestamp = Timestamp(
                epoch=self.epoch,
                batch=self.batch,
                batch_in_epoch=self.batch_in_epoch,
                sample=self.sample,
                sample_in_epoch=self.sample_in_epoch,
                token=self.token,
                token_in_epoch=self.token_in_epoch,
            )
        return self._timestamp

    def copy(self) -> Timer:
        """Returns an independent Timer with the same counters."""
        timer = Timer()
        timer.load_state_dict(self.state_dict())
        return timer

    def state_dict(self) -> dict[str, Any]:
        """Returns the seven counters as plain ints, keyed by counter name."""
        return {
            "epoch": self._epoch,
            "batch": self._batch,
            "batch_in_epoch": self._batch - self._batch_at_epoch_start,
            "sample": self._sample,
            "sample_in_epoch": self._sample - self._sample_at_epoch_start,
            "token": self._token,
            "token_in_epoch": self._token - self._token_at_epoch_start,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the counters from :meth:`state_dict` output; the Timer is unchanged if ``state`` is invalid.

        Raises:
            ValueError: If a counter is missing, a key is unknown, or a value is negative, not a whole number, or
                ``1e100`` or more.
        """
        missing = [name for name in _COUNTERS if name not in state]
        unknown = sorted(str(key) for key in state if key not in _COUNTERS)
        if missing or unknown:
            raise ValueError(
                f"Invalid Timer state dict: missing keys {missing}, unknown keys {unknown}; "
                f"expected exactly {list(_COUNTERS)}."
            )
        counts: dict[str, int] = {}
        for name, unit in _COUNTERS.items():
            try:
                counts[name] = int(_checked_value(state[name], unit))
            except (TypeError, ValueError) as error:
                raise type(error)(f"Invalid Timer state dict value for {name!r}: {error}") from None
        self._epoch = counts["epoch"]
        self._batch = counts["batch"]
        self._sample = counts["sample"]
        self._token = counts["token"]
        self._batch_at_epoch_start = counts["batch"] - counts["batch_in_epoch"]
        self._sample_at_epoch_start = counts["sample"] - counts["sample_in_epoch"]
        self._token_at_epoch_start = counts["token"] - counts["token_in_epoch"]
        self._timestamp = None

    # ----- comparison -----

    def _counter(self, other: object, symbol: str) -> tuple[Time[int], Time[Any]] | None:
        """The counter in ``other``'s unit and ``other`` as a Time; None if ``other`` is not a Time or time string."""
        if isinstance(other, str):
            try:
                other = _parse(other)
            except ValueError as error:
                if symbol == "==":
                    return None
                raise TypeError(f"Cannot compare the Timer {symbol} {_show(other)}: {error}") from None
        return (self.get(other.unit), other) if isinstance(other, Time) else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Timer):
            return self.state_dict() == other.state_dict()
        pair = self._counter(other, "==")
        if pair is None:
            return False if isinstance(other, str) else NotImplemented
        return pair[0] == pair[1]

    def __lt__(self, other: Time[Any] | str) -> bool:
        pair = self._counter(other, "<")
        return NotImplemented if pair is None else pair[0] < pair[1]

    def __le__(self, other: Time[Any] | str) -> bool:
        pair = self._counter(other, "<=")
        return NotImplemented if pair is None else pair[0] <= pair[1]

    def __gt__(self, other: Time[Any] | str) -> bool:
        pair = self._counter(other, ">")
        return NotImplemented if pair is None else pair[0] > pair[1]

    def __ge__(self, other: Time[Any] | str) -> bool:
        pair = self._counter(other, ">=")
        return NotImplemented if pair is None else pair[0] >= pair[1]

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        counters = ", ".join(f"{name}={count}" for name, count in self.state_dict().items())
        return f"Timer({counters})"
