"""Training time: units, immutable amounts of time, and the Timer that counts them.

Durations and points in training are written as a number followed by a unit: ``'90ep'`` (epochs), ``'250ba'``
(batches), ``'1000sp'`` (samples), ``'2048tok'`` (tokens) or ``'0.5dur'`` (a fraction of the whole run). Every public
parameter that takes a time accepts such a string or a :class:`Time`; :meth:`Time.from_input` does the conversion.

The :class:`Timer` holds the trainer's counters. The training loop calls :meth:`Timer.on_batch_complete` after every
optimisation step and :meth:`Timer.on_epoch_complete` at the end of every epoch; everything else only reads it.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import re
from decimal import Decimal
from enum import Enum
from typing import Any, Generic, NamedTuple, NoReturn, SupportsIndex, TypeVar, cast, overload

from composer.core.serializable import Serializable

__all__ = ["Time", "TimeUnit", "Timer", "Timestamp"]

TValue = TypeVar("TValue", int, float)


class TimeUnit(Enum):
    """The units a :class:`Time` is measured in.

    ``EPOCH``, ``BATCH``, ``SAMPLE`` and ``TOKEN`` count whole things; ``DURATION`` is a fraction of the run's
    ``max_duration`` (``0.5dur`` is halfway). Lookup by value ignores case and surrounding whitespace.

    Example:
        >>> TimeUnit("ep")
        <TimeUnit.EPOCH: 'ep'>
        >>> TimeUnit("DUR")
        <TimeUnit.DURATION: 'dur'>
    """

    EPOCH = "ep"
    BATCH = "ba"
    SAMPLE = "sp"
    TOKEN = "tok"
    DURATION = "dur"

    @classmethod
    def _missing_(cls, value: object) -> TimeUnit:
        # Called by TimeUnit(value) when value is not an exact member value.
        unit = _UNITS_BY_VALUE.get(value.strip().lower()) if isinstance(value, str) else None
        if unit is None:
            raise ValueError(f"Invalid time unit {value!r}: expected one of {_UNIT_CHOICES}.")
        return unit


# Reading an enum member through its class (TimeUnit.EPOCH) goes through the enum machinery and costs a few hundred
# nanoseconds, so the code below uses these module constants; they matter on the Timer's per-batch paths.
_EPOCH = TimeUnit.EPOCH
_BATCH = TimeUnit.BATCH
_SAMPLE = TimeUnit.SAMPLE
_TOKEN = TimeUnit.TOKEN
_DURATION = TimeUnit.DURATION
_UNITS_BY_VALUE = {unit.value: unit for unit in TimeUnit}
_UNIT_CHOICES = ", ".join(repr(unit.value) for unit in TimeUnit)
_UNIT_NOUNS = {
    TimeUnit.EPOCH: "epochs",
    TimeUnit.BATCH: "batches",
    TimeUnit.SAMPLE: "samples",
    TimeUnit.TOKEN: "tokens",
    TimeUnit.DURATION: "duration",
}
_FORMS_HINT = (
    f"expected a non-negative number followed by one of {_UNIT_CHOICES} "
    "(for example '90ep', '250ba', '0.5dur', '2048tok')"
)

# A whole time string: optional sign (so that '-1ep' gets a precise error), a decimal number with an optional
# exponent, then the unit. No unit value is a prefix of another, and 'e' before a unit only starts an exponent when
# digits follow it, so '3ep' is 3 epochs and '3e4tok' is 30000 tokens.
_TIME_STRING = re.compile(
    r"\s*(?P<sign>-?)(?P<number>(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)"
    rf"(?P<unit>{'|'.join(unit.value for unit in TimeUnit)})\s*",
    re.IGNORECASE | re.ASCII,
)
# Counts parsed from strings are bounded so that a string such as '1e999999999sp' cannot make int() run for minutes.
_MAX_COUNT_DIGITS = 100


def _as_unit(unit: object) -> TimeUnit:
    # TimeUnit(unit) does the same, several times slower; Time() is built often enough for that to matter.
    if isinstance(unit, str) and unit in _UNITS_BY_VALUE:
        return _UNITS_BY_VALUE[unit]
    if isinstance(unit, TimeUnit):
        return unit
    return TimeUnit(unit)


def _is_number(value: object) -> bool:
    """Whether ``value`` is a real number other than a bool (True is not a time)."""
    return type(value) in (int, float) or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def _checked_value(value: object, unit: TimeUnit) -> int | float:
    """``value`` as the number a Time in ``unit`` stores: a non-negative int, or a finite float for DURATION."""
    checked: int | float
    if isinstance(value, bool):
        raise TypeError(f"Time value must be a number, not a bool (got {value!r}).")
    # int and float come first: isinstance stops at the first match, skipping the much slower ABC check.
    if isinstance(value, (int, float, numbers.Real)):
        if unit is _DURATION:
            checked = float(value) + 0.0  # + 0.0 turns -0.0 into 0.0, which prints (and parses) without a sign
            if not math.isfinite(checked):
                raise ValueError(f"Time value for unit 'dur' must be finite (got {value!r}).")
        elif isinstance(value, (int, numbers.Integral)):
            checked = int(value)
        elif math.isfinite(value) and float(value).is_integer():
            checked = int(float(value))
        else:
            raise ValueError(
                f"Time value for unit {unit.value!r} must be a whole number of {_UNIT_NOUNS[unit]} (got {value!r}). "
                f"Round it first, or use unit 'dur' for a fraction of the run."
            )
    else:
        try:
            # Integer-like objects that are not registered as numbers (such as one-element integer tensors).
            checked = operator.index(cast(SupportsIndex, value))
        except TypeError:
            raise TypeError(
                f"Time value must be a number, not {type(value).__name__} (got {value!r}). "
                f"To build a Time from a string such as '90ep', use Time.from_timestring()."
            ) from None
        if unit is _DURATION:
            checked = float(checked)
    if checked < 0:
        raise ValueError(f"Time cannot be negative (got {value!r} for unit {unit.value!r}); use a value of 0 or more.")
    return checked


def _new_time(value: int | float, unit: TimeUnit) -> Time[Any]:
    # Builds a Time from an already validated value and unit, skipping __init__: the Timer builds a Time on every
    # counter read, so this path must stay at a few hundred nanoseconds.
    time: Time[Any] = object.__new__(Time)  # pyright: ignore[reportUnknownVariableType]
    _set_value(time, value)
    _set_unit(time, unit)
    return time


def _checked_time(value: int | float, unit: TimeUnit) -> Time[Any]:
    # A Time from a value computed here (a sum, a product), validated like user input.
    return _new_time(_checked_value(value, unit), unit)


@functools.lru_cache(maxsize=512)
def _parse(timestring: str) -> Time[Any]:
    # Cached because the same few strings ('10ba', '1dur') are compared against the timer every batch; Time is
    # immutable, so sharing the parsed object is safe.
    match = _TIME_STRING.fullmatch(timestring)
    if match is None:
        raise ValueError(f"Invalid time string {timestring!r}: {_FORMS_HINT}.")
    if match["sign"]:
        raise ValueError(f"Invalid time string {timestring!r}: time cannot be negative; {_FORMS_HINT}.")
    unit = TimeUnit(match["unit"])
    number = match["number"]
    if unit is _DURATION:
        fraction = float(number)
        if not math.isfinite(fraction):
            raise ValueError(f"Invalid time string {timestring!r}: the duration {number} is too large.")
        return _new_time(fraction, unit)
    exact = Decimal(number)  # exact, unlike float: '12345678901234567891sp' keeps every digit
    if exact and exact.adjusted() >= _MAX_COUNT_DIGITS:
        raise ValueError(f"Invalid time string {timestring!r}: {number} {_UNIT_NOUNS[unit]} is too large.")
    if exact != exact.to_integral_value():
        raise ValueError(
            f"Invalid time string {timestring!r}: a number of {_UNIT_NOUNS[unit]} must be a whole number "
            f"(got {number}). Round it, or use 'dur' for a fraction of the run (for example '0.5dur')."
        )
    return _new_time(int(exact), unit)


class Time(Generic[TValue]):
    """An immutable amount of training time: a non-negative value and a :class:`TimeUnit`.

    Use it wherever a point in training or a length of training is needed: ``max_duration``, schedule milestones,
    checkpoint intervals. Counts (epochs, batches, samples, tokens) are ``int``; a duration (``'dur'``, a fraction of
    ``max_duration``) is a ``float``. A float with a whole value such as ``3.0`` is accepted for a count and stored as
    ``3``.

    Times compare and add only within one unit; a mixed-unit operation raises :class:`ValueError` instead of guessing
    a conversion. A time string or a plain number on the other side is read in this Time's unit. Multiplying by a
    ``'dur'`` Time takes that fraction of the other operand, and dividing two Times of one unit gives their ratio as
    a ``'dur'`` Time.

    Args:
        value: The amount of time; a non-negative ``int`` for counts, a ``float`` for ``'dur'``.
        unit: A :class:`TimeUnit` or its string value (``'ep'``, ``'ba'``, ``'sp'``, ``'tok'``, ``'dur'``).

    Example:
        >>> t = Time(5, "ep")
        >>> t
        Time(5, TimeUnit.EPOCH)
        >>> str(t), t.value, t.unit
        ('5ep', 5, <TimeUnit.EPOCH: 'ep'>)
        >>> Time.from_timestring("250ba") + "50ba"
        Time(300, TimeUnit.BATCH)
        >>> Time(100, "ba") * Time(0.25, "dur")
        Time(25, TimeUnit.BATCH)
        >>> Time(30, "ba") / Time(120, "ba")
        Time(0.25, TimeUnit.DURATION)
        >>> Time(5, "ep") < "10ep"
        True
    """

    __slots__ = ("_unit", "_value")
    _value: TValue
    _unit: TimeUnit

    def __init__(self, value: TValue, unit: TimeUnit | str) -> None:
        unit = _as_unit(unit)
        _set_value(self, _checked_value(value, unit))
        _set_unit(self, unit)

    # ----- factories -----

    @staticmethod
    def from_epoch(epoch: int) -> Time[int]:
        """Returns a Time of ``epoch`` epochs.

        Example:
            >>> Time.from_epoch(3)
            Time(3, TimeUnit.EPOCH)
        """
        return Time(epoch, _EPOCH)

    @staticmethod
    def from_batch(batch: int) -> Time[int]:
        """Returns a Time of ``batch`` batches.

        Example:
            >>> Time.from_batch(250)
            Time(250, TimeUnit.BATCH)
        """
        return Time(batch, _BATCH)

    @staticmethod
    def from_sample(sample: int) -> Time[int]:
        """Returns a Time of ``sample`` samples.

        Example:
            >>> Time.from_sample(1000)
            Time(1000, TimeUnit.SAMPLE)
        """
        return Time(sample, _SAMPLE)

    @staticmethod
    def from_token(token: int) -> Time[int]:
        """Returns a Time of ``token`` tokens.

        Example:
            >>> Time.from_token(2048)
            Time(2048, TimeUnit.TOKEN)
        """
        return Time(token, _TOKEN)

    @staticmethod
    def from_duration(duration: float) -> Time[float]:
        """Returns a Time that is the fraction ``duration`` of the run's ``max_duration``.

        Example:
            >>> Time.from_duration(0.5)
            Time(0.5, TimeUnit.DURATION)
        """
        return Time(float(duration), _DURATION)

    @staticmethod
    def from_timestring(timestring: str) -> Time[Any]:
        """Parses a time string: a non-negative number immediately followed by a unit.

        The whole string must match; case and surrounding whitespace are ignored, and the number may have an
        exponent. Counts must be whole numbers (``'3e4tok'`` is fine, ``'1.5ba'`` is not).

        Args:
            timestring: For example ``'90ep'``, ``'250ba'``, ``'1000sp'``, ``'2048tok'``, ``'0.5dur'`` or ``'3e4tok'``.

        Raises:
            ValueError: If the string is malformed, negative, or a count is not a whole number.

        Example:
            >>> Time.from_timestring("90ep")
            Time(90, TimeUnit.EPOCH)
            >>> Time.from_timestring(" 1.5e-1DUR ")
            Time(0.15, TimeUnit.DURATION)
            >>> Time.from_timestring("3e10sp").value
            30000000000
        """
        if not isinstance(timestring, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"Time.from_timestring() takes a str, not {type(timestring).__name__} (got {timestring!r})."
            )
        return _parse(timestring)

    @staticmethod
    def from_input(value: Time[Any] | str | int | float, default_unit: TimeUnit | str | None = None) -> Time[Any]:
        """Converts what a user may pass as a time parameter into a :class:`Time`.

        Args:
            value: A Time (returned as is), a time string (parsed), or a number (read in ``default_unit``).
            default_unit: The unit for a plain number; without it a number raises :class:`ValueError`.

        Example:
            >>> Time.from_input("10ep")
            Time(10, TimeUnit.EPOCH)
            >>> Time.from_input(8, default_unit="ba")
            Time(8, TimeUnit.BATCH)
        """
        if isinstance(value, Time):
            return value
        if isinstance(value, str):
            return _parse(value)
        if _is_number(value):
            if default_unit is None:
                raise ValueError(
                    f"Cannot tell the unit of the time {value!r}: pass a time string such as '{value}ep' or "
                    f"'{value}ba', or a Time."
                )
            return _checked_time(value, _as_unit(default_unit))
        raise TypeError(
            f"Expected a Time, a time string such as '90ep', or a number, not {type(value).__name__} (got {value!r})."
        )

    # ----- read-only access and conversions -----

    @property
    def value(self) -> TValue:
        """The amount of time: an ``int`` for counts, a ``float`` for ``'dur'``."""
        return self._value

    @property
    def unit(self) -> TimeUnit:
        """The unit of :attr:`value`."""
        return self._unit

    def to_timestring(self) -> str:
        """Returns the time as a string that :meth:`from_timestring` parses back to an equal Time.

        Example:
            >>> Time(5, "ep").to_timestring(), Time(0.5, "dur").to_timestring()
            ('5ep', '0.5dur')
        """
        return f"{self._value}{self._unit.value}"

    def __str__(self) -> str:
        return self.to_timestring()

    def __repr__(self) -> str:
        return f"Time({self._value!r}, TimeUnit.{self._unit.name})"

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __hash__(self) -> int:
        return hash((self._value, self._unit))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Time is immutable: cannot set {name!r}. Build a new Time instead.")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Time is immutable: cannot delete {name!r}.")

    def __reduce__(self) -> tuple[Any, tuple[int | float, TimeUnit]]:
        # Pickle and copy rebuild through __init__, since the frozen __setattr__ blocks the default slot restore.
        return (Time, (self._value, self._unit))

    # ----- comparison -----

    def _other_value(self, other: object, verb: str) -> int | float | None:
        """The number to compare or combine with, in this Time's unit; None if ``other`` is an unsupported type."""
        if isinstance(other, str):
            other = _parse(other)
        if isinstance(other, Time):
            if other._unit is not self._unit:
                _raise_mixed_units(verb, self, other)
            value: int | float = other._value
            return value
        if _is_number(other):
            return cast(int | float, other)
        return None

    def __eq__(self, other: object) -> bool:
        value = self._other_value(other, "compare")
        return NotImplemented if value is None else self._value == value

    def __lt__(self, other: Time[Any] | str | int | float) -> bool:
        value = self._other_value(other, "compare")
        return NotImplemented if value is None else self._value < value

    def __le__(self, other: Time[Any] | str | int | float) -> bool:
        value = self._other_value(other, "compare")
        return NotImplemented if value is None else self._value <= value

    def __gt__(self, other: Time[Any] | str | int | float) -> bool:
        value = self._other_value(other, "compare")
        return NotImplemented if value is None else self._value > value

    def __ge__(self, other: Time[Any] | str | int | float) -> bool:
        value = self._other_value(other, "compare")
        return NotImplemented if value is None else self._value >= value

    # ----- arithmetic -----

    def __pos__(self) -> Time[TValue]:
        return self

    def __add__(self, other: Time[TValue] | str | int | float) -> Time[TValue]:
        value = self._other_value(other, "add")
        if value is None:
            return NotImplemented
        return _checked_time(self._value + value, self._unit)

    def __radd__(self, other: str | int | float) -> Time[TValue]:
        return self.__add__(other)

    def __sub__(self, other: Time[TValue] | str | int | float) -> Time[TValue]:
        value = self._other_value(other, "subtract")
        if value is None:
            return NotImplemented
        return _difference(self._value, value, self._unit)

    def __rsub__(self, other: str | int | float) -> Time[TValue]:
        if isinstance(other, str):
            return _parse(other) - self
        if not _is_number(other):
            return NotImplemented
        return _difference(other, self._value, self._unit)

    @overload
    def __mul__(self, other: int | float) -> Time[TValue]: ...

    @overload
    def __mul__(self, other: Time[Any]) -> Time[Any]: ...

    def __mul__(self, other: Time[Any] | int | float) -> Time[Any]:
        if isinstance(other, Time):
            if self._unit is _DURATION:
                return _scale(other._value, self._value, other._unit)
            if other._unit is _DURATION:
                return _scale(self._value, other._value, self._unit)
            raise ValueError(
                f"Cannot multiply {self} by {other}: one side must be a fraction of the run in 'dur' "
                f"(for example {self} * Time(0.5, 'dur')), or multiply by a plain number."
            )
        if _is_number(other):
            return _scale(self._value, other, self._unit)
        return NotImplemented

    def __rmul__(self, other: int | float) -> Time[TValue]:
        return self.__mul__(other)

    @overload
    def __truediv__(self, other: int | float) -> Time[TValue]: ...

    @overload
    def __truediv__(self, other: Time[Any]) -> Time[float]: ...

    def __truediv__(self, other: Time[Any] | int | float) -> Time[Any]:
        if isinstance(other, Time):
            if other._unit is not self._unit:
                _raise_mixed_units("divide", self, other)
            if other._value == 0:
                raise ZeroDivisionError(f"Cannot divide {self} by {other}: the divisor is zero.")
            return _new_time(self._value / other._value, _DURATION)
        if not _is_number(other):
            return NotImplemented
        if other == 0:
            raise ZeroDivisionError(f"Cannot divide {self} by zero.")
        if other < 0:
            raise ValueError(f"Cannot divide {self} by {other}: time cannot be negative; divide by a positive number.")
        if self._unit is not _DURATION and isinstance(other, int):
            # Floor division is exact (a huge token count is not rounded through float) and, for non-negative
            # operands, the same as truncation.
            return _checked_time(self._value // other, self._unit)
        quotient = self._value / other
        if not math.isfinite(quotient):
            raise ValueError(f"Cannot divide {self} by {other}: the result is not finite.")
        return _checked_time(quotient if self._unit is _DURATION else int(quotient), self._unit)


# Time's fields are set through their slot descriptors, which skips the frozen __setattr__ and is faster than
# object.__setattr__.
_set_value = Time.__dict__["_value"].__set__
_set_unit = Time.__dict__["_unit"].__set__


def _raise_mixed_units(verb: str, a: Time[Any], b: Time[Any]) -> NoReturn:
    joiner = {"divide": "by", "subtract": "from"}.get(verb, "and")
    first, second = (b, a) if verb == "subtract" else (a, b)
    raise ValueError(
        f"Cannot {verb} {first} {joiner} {second}: their units differ ({a.unit.value!r} vs {b.unit.value!r}). "
        f"Convert one to the other's unit first (for example count batches per epoch, or use "
        f"State.get_elapsed_duration() for 'dur')."
    )


def _difference(a: int | float, b: int | float, unit: TimeUnit) -> Time[Any]:
    if a < b:
        raise ValueError(
            f"Time cannot be negative: {a}{unit.value} - {b}{unit.value} = {a - b}{unit.value}. "
            f"Subtract a smaller time, or swap the operands."
        )
    return _checked_time(a - b, unit)


def _scale(value: int | float, factor: int | float, unit: TimeUnit) -> Time[Any]:
    """``value`` (in ``unit``) times ``factor``; counts are truncated toward zero, as int() does."""
    if factor < 0:
        raise ValueError(
            f"Cannot multiply {value}{unit.value} by {factor}: time cannot be negative; use a factor of 0 or more."
        )
    if unit is _DURATION:
        return _checked_time(float(value * factor), unit)
    if isinstance(factor, int):
        return _checked_time(value * factor, unit)  # exact for huge counts
    product = value * factor
    if not math.isfinite(product):
        raise ValueError(f"Cannot multiply {value}{unit.value} by {factor}: the result is not finite.")
    return _checked_time(int(product), unit)


class Timestamp(NamedTuple):
    """A snapshot of every :class:`Timer` counter, as passed to loggers.

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

    # Counters are plain ints: on_batch_complete runs every training step, and int additions keep it well under a
    # microsecond. Times are built (cheaply) only when a counter is read.
    __slots__ = (
        "_batch",
        "_batch_in_epoch",
        "_epoch",
        "_sample",
        "_sample_in_epoch",
        "_timestamp",
        "_token",
        "_token_in_epoch",
    )

    def __init__(self) -> None:
        self._timestamp: Timestamp | None = None  # cached snapshot, dropped whenever a counter moves
        self._epoch = 0
        self._batch = 0
        self._batch_in_epoch = 0
        self._sample = 0
        self._sample_in_epoch = 0
        self._token = 0
        self._token_in_epoch = 0

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
        return _new_time(self._batch_in_epoch, _BATCH)

    @property
    def sample(self) -> Time[int]:
        """Samples trained on since the start of training."""
        return _new_time(self._sample, _SAMPLE)

    @property
    def sample_in_epoch(self) -> Time[int]:
        """Samples trained on in the current epoch."""
        return _new_time(self._sample_in_epoch, _SAMPLE)

    @property
    def token(self) -> Time[int]:
        """Tokens trained on since the start of training."""
        return _new_time(self._token, _TOKEN)

    @property
    def token_in_epoch(self) -> Time[int]:
        """Tokens trained on in the current epoch."""
        return _new_time(self._token_in_epoch, _TOKEN)

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
        """
        if type(samples) is int and type(tokens) is int and samples >= 0 and tokens >= 0:
            n_samples, n_tokens = samples, tokens
        else:  # rare path: Time increments, numpy or tensor integers, or an error to report
            n_samples = _increment(samples, _SAMPLE, "samples")
            n_tokens = _increment(tokens, _TOKEN, "tokens")
        self._timestamp = None
        self._batch += 1
        self._batch_in_epoch += 1
        self._sample += n_samples
        self._sample_in_epoch += n_samples
        self._token += n_tokens
        self._token_in_epoch += n_tokens

    def on_epoch_complete(self) -> None:
        """Advances the clock by one epoch and restarts the ``*_in_epoch`` counters at 0."""
        self._timestamp = None
        self._epoch += 1
        self._batch_in_epoch = 0
        self._sample_in_epoch = 0
        self._token_in_epoch = 0

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
        return {name: getattr(self, "_" + name) for name in _COUNTERS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the counters from :meth:`state_dict` output; the Timer is unchanged if ``state`` is invalid.

        Raises:
            ValueError: If a counter is missing, a key is unknown, or a value is negative or not a whole number.
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
        for name, count in counts.items():
            setattr(self, "_" + name, count)
        self._timestamp = None

    # ----- comparison -----

    def _counter(self, other: object) -> Time[int] | None:
        # A Time or time string is compared with the counter in its unit; None for any other type.
        if isinstance(other, str):
            other = _parse(other)
        return self.get(other.unit) if isinstance(other, Time) else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Timer):
            return self.state_dict() == other.state_dict()
        counter = self._counter(other)
        return NotImplemented if counter is None else counter == other

    def __lt__(self, other: Time[Any] | str) -> bool:
        counter = self._counter(other)
        return NotImplemented if counter is None else counter < other

    def __le__(self, other: Time[Any] | str) -> bool:
        counter = self._counter(other)
        return NotImplemented if counter is None else counter <= other

    def __gt__(self, other: Time[Any] | str) -> bool:
        counter = self._counter(other)
        return NotImplemented if counter is None else counter > other

    def __ge__(self, other: Time[Any] | str) -> bool:
        counter = self._counter(other)
        return NotImplemented if counter is None else counter >= other

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        counters = ", ".join(f"{name}={getattr(self, '_' + name)}" for name in _COUNTERS)
        return f"Timer({counters})"
