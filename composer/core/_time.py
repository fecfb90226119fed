"""Units, :class:`Time` and the parsing of time strings: the private home of :mod:`composer.core.time`.

Import these names from :mod:`composer.core.time`. They live here so that :mod:`composer.core.timer` (the Timer) and
:mod:`composer.core.time` (the public face of both) can share them without importing each other.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import re
import sys
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any, Generic, NoReturn, SupportsIndex, TypeVar, cast, overload

__all__ = ["Time", "TimeUnit"]

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
            raise ValueError(f"Invalid time unit {_show(value)}: expected one of {_UNIT_CHOICES}.")
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
# Counts are whole numbers below 1e100: the most a time string may hold (a bound that also stops a string such as
# '1e999999999sp' from making int() run for minutes), so every valid Time prints as a string that parses back to it.
_MAX_COUNT_DIGITS = 100
_MAX_COUNT = 10**_MAX_COUNT_DIGITS
# Durations are finite floats: at most the largest float.
_MAX_DURATION = sys.float_info.max
# Every whole number up to 2**53 is a float, so below it float products of counts lose no whole units.
_FLOAT_EXACT = 2**53


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


def _show(value: object) -> str:
    """``value`` for an error message: a Time as its string, a huge number shortened so that it cannot flood (or,
    past Python's 4300-digit limit on int to str conversion, break) the message."""
    if isinstance(value, Time):
        return value.to_timestring()
    if isinstance(value, int) and value.bit_length() > 256:
        sign = "-" if value < 0 else ""
        return f"{sign}<an int of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
    try:
        text = repr(value)
    except ValueError:  # a Fraction whose numerator or denominator is too long to print
        return f"<a {type(value).__name__} too large to print>"
    return text if len(text) <= 80 else f"{text[:40]}...{text[-20:]} ({len(text)} characters)"


def _ratio(number: object) -> tuple[int, int]:
    """The exact ``(numerator, denominator)`` of a finite real number, without rounding it through float.

    Raises:
        OverflowError, ValueError: If ``number`` is infinite or NaN.
    """
    if isinstance(number, (int, numbers.Integral)):
        return operator.index(number), 1
    if isinstance(number, numbers.Rational):  # Fraction
        return operator.index(number.numerator), operator.index(number.denominator)
    as_integer_ratio = getattr(number, "as_integer_ratio", None)  # float, numpy floats
    if as_integer_ratio is None:
        as_integer_ratio = float(cast(float, number)).as_integer_ratio
    numerator, denominator = as_integer_ratio()
    return operator.index(numerator), operator.index(denominator)


def _whole(number: object) -> int | None:
    """The int equal to the real number ``number``; None if it is not a whole number (or is infinite or NaN)."""
    if isinstance(number, int):
        return int(number)
    if isinstance(number, float):
        return int(number) if number.is_integer() else None
    try:
        numerator, denominator = _ratio(number)
    except (OverflowError, ValueError):
        return None
    return numerator if denominator == 1 else None


def _as_duration(number: Any) -> float:
    """The float nearest to the real number ``number``; ``math.inf`` if it is too large for a float."""
    try:
        return float(number) + 0.0  # + 0.0 turns -0.0 into 0.0, which prints (and parses) without a sign
    except OverflowError:  # a huge int or Fraction
        return math.inf


def _checked_value(value: object, unit: TimeUnit) -> int | float:
    """``value`` as the number a Time in ``unit`` stores: an int in [0, 1e100), or a finite float >= 0 for 'dur'.

    The conversion is exact: a count must equal a whole number exactly (``Fraction(2**53 + 1, 2)`` is refused rather
    than rounded through float to ``2**52``); a duration is the float nearest to ``value``.
    """
    if isinstance(value, bool):
        raise TypeError(f"Time value must be a number, not a bool (got {value!r}).")
    number: Any = value
    # int and float come first: isinstance stops at the first match, skipping the much slower ABC check.
    if not isinstance(value, (int, float, numbers.Real)):
        try:
            # Integer-like objects that are not registered as numbers (such as one-element integer tensors).
            number = operator.index(cast(SupportsIndex, value))
        except TypeError:
            raise TypeError(
                f"Time value must be a number, not {type(value).__name__} (got {_show(value)}). "
                f"To build a Time from a string such as '90ep', use Time.from_timestring()."
            ) from None
    if number < 0:
        raise ValueError(
            f"Time cannot be negative (got {_show(value)} for unit {unit.value!r}); use a value of 0 or more."
        )
    if unit is _DURATION:
        duration = _as_duration(number)
        if duration > _MAX_DURATION:
            raise ValueError(
                f"Time value for unit 'dur' must be a finite float, at most {_MAX_DURATION!r} (got {_show(value)}). "
                f"A 'dur' Time is a fraction of the run, usually between 0 and 1: pass a smaller value."
            )
        if duration != duration:
            raise ValueError(
                f"Time value for unit 'dur' must be finite (got {_show(value)}); pass a number such as 0.5."
            )
        return duration
    count = _whole(number)
    if count is None:
        raise ValueError(
            f"Time value for unit {unit.value!r} must be a whole number of {_UNIT_NOUNS[unit]} (got {_show(value)}). "
            f"Round it first, or use unit 'dur' for a fraction of the run."
        )
    if count >= _MAX_COUNT:
        raise ValueError(
            f"Time value for unit {unit.value!r} is too large (got {_show(value)}): a count of {_UNIT_NOUNS[unit]} "
            f"must be below 1e{_MAX_COUNT_DIGITS}, the most a time string can hold. Use a smaller value or a "
            f"coarser unit."
        )
    return count


def _new_time(value: int | float, unit: TimeUnit) -> Time[Any]:
    # Builds a Time from an already validated value and unit, skipping __init__: the Timer builds a Time on every
    # counter read, so this path must stay at a few hundred nanoseconds.
    time: Time[Any] = object.__new__(Time)  # pyright: ignore[reportUnknownVariableType]
    _set_value(time, value)
    _set_unit(time, unit)
    return time


def _checked_time(value: object, unit: TimeUnit) -> Time[Any]:
    # A Time from a user's number, validated as Time() validates it.
    return _new_time(_checked_value(value, unit), unit)


@functools.lru_cache(maxsize=512)
def _parse(timestring: str) -> Time[Any]:
    # Cached because the same few strings ('10ba', '1dur') are compared against the timer every batch; Time is
    # immutable, so sharing the parsed object is safe.
    match = _TIME_STRING.fullmatch(timestring)
    if match is None:
        raise ValueError(f"Invalid time string {_show(timestring)}: {_FORMS_HINT}.")
    if match["sign"]:
        raise ValueError(f"Invalid time string {_show(timestring)}: time cannot be negative; {_FORMS_HINT}.")
    unit = TimeUnit(match["unit"])
    number = match["number"]
    if unit is _DURATION:
        fraction = float(number)
        if not math.isfinite(fraction):
            raise ValueError(
                f"Invalid time string {_show(timestring)}: the duration is too large; a 'dur' time must be a finite "
                f"float, at most {_MAX_DURATION!r}."
            )
        return _new_time(fraction, unit)
    exact = Decimal(number)  # exact, unlike float: '12345678901234567891sp' keeps every digit
    if exact and exact.adjusted() >= _MAX_COUNT_DIGITS:
        raise ValueError(
            f"Invalid time string {_show(timestring)}: the number of {_UNIT_NOUNS[unit]} is too large; counts must "
            f"be below 1e{_MAX_COUNT_DIGITS}. Use a smaller number or a coarser unit."
        )
    if exact != exact.to_integral_value():
        raise ValueError(
            f"Invalid time string {_show(timestring)}: a number of {_UNIT_NOUNS[unit]} must be a whole number "
            f"(got {_show(number)}). Round it, or use 'dur' for a fraction of the run (for example '0.5dur')."
        )
    return _new_time(int(exact), unit)


class Time(Generic[TValue]):
    """An immutable amount of training time: a non-negative value and a :class:`TimeUnit`.

    Use it wherever a point in training or a length of training is needed: ``max_duration``, schedule milestones,
    checkpoint intervals. Counts (epochs, batches, samples, tokens) are exact ``int`` values below ``1e100`` (the
    most a time string holds, so ``Time.from_timestring(str(t)) == t`` for every Time); a duration (``'dur'``, a
    fraction of ``max_duration``) is a finite ``float``. A number that equals a whole number exactly, such as ``3.0``
    or ``Fraction(6, 2)``, is accepted for a count and stored as ``3``; any other number is refused, never rounded.

    Times compare and add only within one unit; a mixed-unit ordering or sum raises :class:`ValueError` instead of
    guessing a conversion, and Times of different units are never equal. A time string or a plain number on the
    other side is read in this Time's unit. Equality never raises. ``hash(t)`` is ``hash(t.value)``, so do not mix
    Times and time strings as keys of one dict.

    Multiplying by a ``'dur'`` Time takes that fraction of the other operand, and dividing two Times of one unit
    gives their ratio as a ``'dur'`` Time. Multiplying or dividing a count by a number that is not an int truncates
    toward zero, as ``int()`` does (exactly, even above ``2**53``; the guide ``docs/guides/how-it-works.md`` has the
    details). A result out of range raises :class:`ValueError`.

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
        >>> Time(3, "ba") * 0.5, Time(10, "ep") * 0.7
        (Time(1, TimeUnit.BATCH), Time(7, TimeUnit.EPOCH))
        >>> Time(30, "ba") / Time(120, "ba")
        Time(0.25, TimeUnit.DURATION)
        >>> Time(5, "ep") < "10ep", Time(5, "ep") == 5, Time(5, "ep") == "five", Time(5, "ep") == Time(5, "ba")
        (True, True, False, False)
    """

    __slots__ = ("_unit", "_value")
    _value: TValue
    _unit: TimeUnit

    def __init__(self, value: TValue, unit: TimeUnit | str) -> None:
        unit = _as_unit(unit)
        if type(value) is not int or unit is _DURATION or not 0 <= value < _MAX_COUNT:
            value = cast(TValue, _checked_value(value, unit))
        _set_value(self, value)
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
        return Time(duration, _DURATION)

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
                f"Time.from_timestring() takes a str, not {type(timestring).__name__} (got {_show(timestring)})."
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
                shown = _show(value)
                example = shown if len(shown) <= 20 else "90"
                raise ValueError(
                    f"Cannot tell the unit of the time {shown}: pass a time string such as '{example}ep' or "
                    f"'{example}ba', or a Time."
                )
            return _checked_time(value, _as_unit(default_unit))
        raise TypeError(
            f"Expected a Time, a time string such as '90ep', or a number, not {type(value).__name__} (got {_show(value)})."
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
        # The value's hash, so that a Time and the number it equals (Time(5, 'ep') == 5) hash alike. Times of
        # different units then collide, which is harmless: they compare unequal.
        return hash(self._value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Time is immutable: cannot set {name!r}. Build a new Time instead.")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Time is immutable: cannot delete {name!r}.")

    def __reduce__(self) -> tuple[Any, tuple[int | float, TimeUnit]]:
        # Pickle and copy rebuild through __init__, since the frozen __setattr__ blocks the default slot restore.
        return (Time, (self._value, self._unit))

    # ----- comparison -----
    # Each operator first tries the per-batch case, a Time of the same unit, and only then the general one.

    def __eq__(self, other: object) -> bool:
        if type(other) is Time:
            return self._unit is other._unit and self._value == other._value
        if isinstance(other, str):
            try:
                other = _parse(other)
            except ValueError:
                return False  # not a time string, so not equal to any time
        if isinstance(other, Time):
            return self._unit is other._unit and self._value == other._value
        if _is_number(other):
            return bool(self._value == other)
        return NotImplemented

    def _ordered_value(self, other: object, symbol: str) -> Any:
        """The number to order this Time against; None if ``other`` is of a type a Time does not compare with."""
        if isinstance(other, str):
            try:
                other = _parse(other)
            except ValueError as error:
                raise TypeError(f"Cannot compare {self} {symbol} {_show(other)}: {error}") from None
        elif not isinstance(other, Time):
            return other if _is_number(other) else None
        if other._unit is not self._unit:
            _raise_mixed_units("compare", self, other)
        return other._value

    def __lt__(self, other: Time[Any] | str | int | float) -> bool:
        if type(other) is Time and other._unit is self._unit:
            same_unit: float = other._value
            return self._value < same_unit
        value: float | None = self._ordered_value(other, "<")
        return NotImplemented if value is None else self._value < value

    def __le__(self, other: Time[Any] | str | int | float) -> bool:
        if type(other) is Time and other._unit is self._unit:
            same_unit: float = other._value
            return self._value <= same_unit
        value: float | None = self._ordered_value(other, "<=")
        return NotImplemented if value is None else self._value <= value

    def __gt__(self, other: Time[Any] | str | int | float) -> bool:
        if type(other) is Time and other._unit is self._unit:
            same_unit: float = other._value
            return self._value > same_unit
        value: float | None = self._ordered_value(other, ">")
        return NotImplemented if value is None else self._value > value

    def __ge__(self, other: Time[Any] | str | int | float) -> bool:
        if type(other) is Time and other._unit is self._unit:
            same_unit: float = other._value
            return self._value >= same_unit
        value: float | None = self._ordered_value(other, ">=")
        return NotImplemented if value is None else self._value >= value

    # ----- arithmetic -----

    def _operand(self, other: object, verb: str) -> int | float | None:
        """``other`` as an exact number in this Time's unit, to add or subtract; None for an unsupported type."""
        if isinstance(other, str):
            other = _parse(other)
        if isinstance(other, Time):
            if other._unit is not self._unit:
                _raise_mixed_units(verb, self, other)
            value: int | float = other._value
            return value
        if not _is_number(other):
            return None
        joiner = "to" if verb == "add" else "from"
        if self._unit is _DURATION:
            duration = _as_duration(other)
            if not -_MAX_DURATION <= duration <= _MAX_DURATION:  # infinite, NaN, or too large for a float
                raise ValueError(
                    f"Cannot {verb} {_show(other)} {joiner} {self}: a duration must be a finite float, at most "
                    f"{_MAX_DURATION!r}; pass a smaller number."
                )
            return duration
        count = _whole(other)
        if count is None:
            raise ValueError(
                f"Cannot {verb} {_show(other)} {joiner} {self}: a number of {_UNIT_NOUNS[self._unit]} must be a whole "
                f"number. Round it first, or convert both to 'dur' for fractions of the run."
            )
        return count

    def __pos__(self) -> Time[TValue]:
        return self

    def __add__(self, other: Time[TValue] | str | int | float) -> Time[TValue]:
        if type(other) is Time and other._unit is self._unit:
            return _result(self._value + other._value, self._unit, self, "+", other)
        value = self._operand(other, "add")
        if value is None:
            return NotImplemented
        return _result(self._value + value, self._unit, self, "+", other)

    def __radd__(self, other: str | int | float) -> Time[TValue]:
        return self.__add__(other)

    def __sub__(self, other: Time[TValue] | str | int | float) -> Time[TValue]:
        if type(other) is Time and other._unit is self._unit:
            return _result(self._value - other._value, self._unit, self, "-", other)
        value = self._operand(other, "subtract")
        if value is None:
            return NotImplemented
        return _result(self._value - value, self._unit, self, "-", other)

    def __rsub__(self, other: str | int | float) -> Time[TValue]:
        if isinstance(other, str):
            return _parse(other) - self
        value = self._operand(other, "subtract")
        if value is None:
            return NotImplemented
        return _result(value - self._value, self._unit, other, "-", self)

    @overload
    def __mul__(self, other: int | float) -> Time[TValue]: ...

    @overload
    def __mul__(self, other: Time[Any]) -> Time[Any]: ...

    def __mul__(self, other: Time[Any] | int | float) -> Time[Any]:
        if isinstance(other, Time):
            if self._unit is _DURATION:
                return _scale(other, self._value)
            if other._unit is _DURATION:
                return _scale(self, other._value)
            raise ValueError(
                f"Cannot multiply {self} by {other}: one side must be a fraction of the run in 'dur' "
                f"(for example {self} * Time(0.5, 'dur')), or multiply by a plain number."
            )
        if _is_number(other):
            return _scale(self, other)
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
            # Counts are below 1e100, so their true quotient is a float (correctly rounded); durations may overflow.
            return _result(self._value / other._value, _DURATION, self, "/", other)
        if not _is_number(other):
            return NotImplemented
        if other == 0:
            raise ZeroDivisionError(f"Cannot divide {self} by zero.")
        if not other > 0:  # negative or NaN
            raise ValueError(
                f"Cannot divide {self} by {_show(other)}: time cannot be negative; divide by a positive number."
            )
        if other == math.inf:
            return _new_time(0.0 if self._unit is _DURATION else 0, self._unit)
        if self._unit is _DURATION:
            try:
                quotient = float(self._value / other)
            except OverflowError:  # a huge int or Fraction divisor: divide exactly, then round once
                quotient = _as_duration(Fraction(self._value) / Fraction(*_ratio(other)))
            return _result(quotient, _DURATION, self, "/", other)
        return _result(_truncated_quotient(int(self._value), other), self._unit, self, "/", other)


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


def _result(value: int | float, unit: TimeUnit, left: object, symbol: str, right: object) -> Time[Any]:
    """A Time of ``value``, the result of ``left symbol right``; ValueError naming the operation if out of range."""
    if unit is _DURATION:
        if 0.0 <= value <= _MAX_DURATION:
            return _new_time(value + 0.0, unit)  # + 0.0 turns -0.0 (from 0.5 * -0.0) into 0.0
        allowed = f"a 'dur' time must be a finite float, at most {_MAX_DURATION!r}"
    else:
        if 0 <= value < _MAX_COUNT:
            return _new_time(value, unit)
        allowed = f"a count of {_UNIT_NOUNS[unit]} must be below 1e{_MAX_COUNT_DIGITS}"
    expression = f"{_show(left)} {symbol} {_show(right)}"
    if value < 0:
        raise ValueError(
            f"Time cannot be negative: {expression} = {_show(value)}{unit.value}. Subtract a smaller time, or swap "
            f"the operands."
        )
    raise ValueError(f"{expression} is too large: {allowed}. Use smaller operands.")


def _scale(time: Time[Any], factor: Any) -> Time[Any]:
    """``time * factor``: a count is truncated toward zero, as int() does (see :class:`Time` for how exactly)."""
    if not 0 <= factor < math.inf:
        raise ValueError(
            f"Cannot multiply {time} by {_show(factor)}: the factor must be a finite number of 0 or more (time "
            f"cannot be negative)."
        )
    value, unit = time._value, time._unit  # pyright: ignore[reportPrivateUsage]
    if unit is not _DURATION:
        return _result(_truncated_product(value, factor), unit, time, "*", factor)
    try:
        product = float(value * factor)
    except OverflowError:  # a huge int or Fraction factor: multiply exactly, then round once
        product = _as_duration(Fraction(value) * Fraction(*_ratio(factor)))
    return _result(product, unit, time, "*", factor)


def _truncated_product(count: int, factor: object) -> int:
    """``int(count * factor)`` for a finite factor >= 0, without rounding a count above 2**53 through float."""
    if isinstance(factor, int):
        return count * factor
    if isinstance(factor, float):
        product = count * factor
        if count <= _FLOAT_EXACT and product < _FLOAT_EXACT:
            return int(product)  # what Python's float gives, and what callers such as a scale ratio expect
    numerator, denominator = _ratio(factor)
    return count * numerator // denominator


def _truncated_quotient(count: int, divisor: object) -> int:
    """``int(count / divisor)`` for a finite divisor > 0, without rounding a count above 2**53 through float."""
    if isinstance(divisor, int):
        return count // divisor
    if isinstance(divisor, float):
        quotient = count / divisor
        if count <= _FLOAT_EXACT and quotient < _FLOAT_EXACT:
            return int(quotient)
    numerator, denominator = _ratio(divisor)
    return count * denominator // numerator
