"""Tests for composer.core.time: parsing, coercion, comparison and arithmetic of Time, and the Timer counters."""

from __future__ import annotations

import copy
import math
import operator
import pickle
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from composer.core import time as time_module
from composer.core.time import Time, Timer, Timestamp, TimeUnit

COUNT_UNITS = [TimeUnit.EPOCH, TimeUnit.BATCH, TimeUnit.SAMPLE, TimeUnit.TOKEN]
PROPERTY_SETTINGS = settings(derandomize=True, max_examples=150, deadline=None)
ORDERINGS = [operator.lt, operator.le, operator.gt, operator.ge]


def test_public_names() -> None:
    assert sorted(time_module.__all__) == ["Time", "TimeUnit", "Timer", "Timestamp"]


# ----- TimeUnit -----


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("ep", TimeUnit.EPOCH),
        ("EP", TimeUnit.EPOCH),
        (" Ba ", TimeUnit.BATCH),
        ("sp", TimeUnit.SAMPLE),
        ("TOK", TimeUnit.TOKEN),
        ("Dur", TimeUnit.DURATION),
    ],
)
def test_time_unit_lookup_ignores_case(text: str, unit: TimeUnit) -> None:
    assert TimeUnit(text) is unit


@pytest.mark.parametrize("bad", ["epoch", "", "e", 5, None])
def test_time_unit_unknown_lists_choices(bad: object) -> None:
    with pytest.raises(ValueError, match="'ep', 'ba', 'sp', 'tok', 'dur'") as info:
        TimeUnit(bad)
    assert repr(bad) in str(info.value)


# ----- parsing -----


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("90ep", 90, TimeUnit.EPOCH),
        ("250ba", 250, TimeUnit.BATCH),
        ("0.5dur", 0.5, TimeUnit.DURATION),
        ("2048tok", 2048, TimeUnit.TOKEN),
        ("1000sp", 1000, TimeUnit.SAMPLE),
        ("3e4tok", 30000, TimeUnit.TOKEN),
        ("1.5e-1dur", 0.15, TimeUnit.DURATION),
        ("3e10sp", 30_000_000_000, TimeUnit.SAMPLE),
        ("2E3TOK", 2000, TimeUnit.TOKEN),
        ("1e+2ba", 100, TimeUnit.BATCH),
        ("1.5e1ba", 15, TimeUnit.BATCH),
        ("1.0ep", 1, TimeUnit.EPOCH),
        ("0ep", 0, TimeUnit.EPOCH),
        ("0e999999999ba", 0, TimeUnit.BATCH),
        (".5dur", 0.5, TimeUnit.DURATION),
        ("1dur", 1.0, TimeUnit.DURATION),
        ("  10EP\n", 10, TimeUnit.EPOCH),
        ("12345678901234567891sp", 12345678901234567891, TimeUnit.SAMPLE),
    ],
)
def test_parse_good_forms(text: str, value: float, unit: TimeUnit) -> None:
    parsed = Time.from_timestring(text)
    assert parsed.unit is unit
    assert parsed.value == value
    assert type(parsed.value) is (float if unit is TimeUnit.DURATION else int)


@pytest.mark.parametrize(
    "bad",
    ["", "ep", "10", "10 epochs", "10 ep", "abc", "--1ep", "ep10", "10ep10", "10eps", "1,000sp", "0x10ba", "nanep"],
)
def test_parse_malformed_names_value_and_forms(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        Time.from_timestring(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert "'ep', 'ba', 'sp', 'tok', 'dur'" in message
    assert "'90ep'" in message


@pytest.mark.parametrize("bad", ["1.5ba", "0.5ep", "1.5e-1sp", "2.25tok"])
def test_parse_fractional_count_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="whole number") as info:
        Time.from_timestring(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["-1ep", "-0.5dur", " -3ba", "-0sp"])
def test_parse_negative_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="negative") as info:
        Time.from_timestring(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["1e999999999sp", "1e400dur"])
def test_parse_huge_values_are_rejected_quickly(bad: str) -> None:
    with pytest.raises(ValueError, match="too large"):
        Time.from_timestring(bad)


def test_parse_requires_str() -> None:
    with pytest.raises(TypeError, match="str"):
        Time.from_timestring(10)  # type: ignore[arg-type]


# ----- construction and coercion -----


def test_integral_float_is_stored_as_int() -> None:
    t = Time(3.0, "ep")
    assert t.value == 3
    assert type(t.value) is int
    assert t == Time(3, TimeUnit.EPOCH)


@pytest.mark.parametrize("unit", COUNT_UNITS)
def test_fractional_count_raises_naming_value(unit: TimeUnit) -> None:
    with pytest.raises(ValueError, match=r"2\.5"):
        Time(2.5, unit)


def test_duration_is_stored_as_float() -> None:
    t = Time(1, "dur")
    assert t.value == 1.0
    assert type(t.value) is float
    assert str(Time(-0.0, "dur")) == "0.0dur"  # negative zero is zero, and round-trips through a string
    assert str(Time(0.5, "dur") * -0.0) == "0.0dur"


@pytest.mark.parametrize("unit", [*COUNT_UNITS, TimeUnit.DURATION])
def test_negative_value_raises(unit: TimeUnit) -> None:
    with pytest.raises(ValueError, match="negative") as info:
        Time(-1, unit)
    assert "-1" in str(info.value)


@pytest.mark.parametrize(
    ("value", "unit", "error"),
    [
        (True, "ep", TypeError),
        ("5", "ep", TypeError),
        (None, "dur", TypeError),
        (float("inf"), "dur", ValueError),
        (float("nan"), "dur", ValueError),
        (float("inf"), "ba", ValueError),
        (float("nan"), "ba", ValueError),
        (5, "epochs", ValueError),
    ],
)
def test_invalid_values_and_units(value: Any, unit: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        Time(value, unit)


def test_numpy_numbers_are_accepted() -> None:
    # Typed Any: numpy scalars are accepted at run time, though the annotations name int and float only.
    count: Any = np.int64(3)
    fraction: Any = np.float32(0.5)
    t = Time(count, "ba")
    assert t.value == 3
    assert type(t.value) is int
    assert type(Time(fraction, "dur").value) is float
    assert Time(np.float64(4.0), "sp").value == 4


def test_unit_accepts_enum_and_any_case_string() -> None:
    assert Time(5, "EP").unit is TimeUnit.EPOCH
    assert Time(5, TimeUnit.TOKEN).unit is TimeUnit.TOKEN


def test_factories() -> None:
    assert Time.from_epoch(1) == Time(1, "ep")
    assert Time.from_batch(2) == Time(2, "ba")
    assert Time.from_sample(3) == Time(3, "sp")
    assert Time.from_token(4) == Time(4, "tok")
    assert Time.from_duration(0.5) == Time(0.5, "dur")
    assert type(Time.from_duration(1).value) is float


def test_from_input() -> None:
    t = Time(5, "ep")
    assert Time.from_input(t) is t
    assert Time.from_input("10ba") == Time(10, "ba")
    assert Time.from_input(8, default_unit="ba") == Time(8, "ba")
    assert Time.from_input(0.25, default_unit=TimeUnit.DURATION) == Time(0.25, "dur")
    with pytest.raises(ValueError, match="8") as info:
        Time.from_input(8)
    assert "'8ep'" in str(info.value)
    with pytest.raises(TypeError, match="list"):
        Time.from_input([8], default_unit="ba")  # type: ignore[arg-type]


# ----- conversions, repr, identity -----


def test_timestring_and_str() -> None:
    assert Time(5, "ep").to_timestring() == "5ep"
    assert str(Time(0.5, "dur")) == "0.5dur"
    assert str(Time(30_000_000_000, "sp")) == "30000000000sp"


@pytest.mark.parametrize("t", [Time(5, "ep"), Time(0, "ba"), Time(7, "sp"), Time(9, "tok"), Time(0.125, "dur")])
def test_repr_round_trips_through_eval(t: Time[Any]) -> None:
    text = repr(t)
    assert text.startswith("Time(")
    copy_ = eval(text, {"Time": Time, "TimeUnit": TimeUnit})
    assert copy_ == t
    assert copy_.unit is t.unit
    assert type(copy_.value) is type(t.value)


def test_repr_format() -> None:
    assert repr(Time(5, "ep")) == "Time(5, TimeUnit.EPOCH)"
    assert repr(Time(0.5, "dur")) == "Time(0.5, TimeUnit.DURATION)"


def test_int_and_float() -> None:
    assert int(Time(5, "ep")) == 5
    assert float(Time(5, "ep")) == 5.0
    assert int(Time(0.75, "dur")) == 0
    assert float(Time(0.75, "dur")) == 0.75


def test_hashable() -> None:
    assert hash(Time(5, "ep")) == hash(Time.from_timestring("5ep"))
    assert len({Time(5, "ep"), Time(5.0, "ep"), Time(5, "ba")}) == 2
    assert {Time(1, "dur"): "end"}[Time.from_timestring("1dur")] == "end"


def test_frozen() -> None:
    t = Time(5, "ep")
    for name in ("value", "unit", "_value", "_unit", "other"):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(t, name, 1)
    with pytest.raises(AttributeError, match="immutable"):
        delattr(t, "_value")
    assert t == Time(5, "ep")


def test_pickle_and_copy() -> None:
    for t in (Time(5, "ep"), Time(0.5, "dur")):
        assert pickle.loads(pickle.dumps(t)) == t
        assert copy.copy(t) == t
        assert copy.deepcopy(t) == t


# ----- comparison -----


def test_compare_same_unit() -> None:
    a, b = Time(5, "ba"), Time(7, "ba")
    assert a < b
    assert a <= b
    assert b > a
    assert b >= a
    assert a != b
    assert a == Time(5, "ba")
    assert a <= Time(5, "ba")
    assert a >= Time(5, "ba")


def test_compare_with_strings_and_numbers() -> None:
    t = Time(5, "ep")
    assert t == "5ep"
    assert t != "6ep"
    assert t < "10EP"
    assert t >= " 5ep "
    assert t == 5
    assert t == 5.0
    assert t < 5.5
    assert t > 4
    assert t != 6
    assert Time(0.5, "dur") < 1
    assert Time(0.5, "dur") == "0.5dur"


@pytest.mark.parametrize("op", ORDERINGS)
def test_order_mixed_units_raises(op: Callable[[Any, Any], bool]) -> None:
    with pytest.raises(ValueError, match="Convert") as info:
        op(Time(5, "ep"), Time(10, "ba"))
    assert "5ep" in str(info.value)
    assert "10ba" in str(info.value)
    with pytest.raises(ValueError, match="10ba"):
        op(Time(5, "ep"), "10ba")


def test_mixed_units_are_never_equal() -> None:
    # Equality does not raise: Times of different units are simply different (they may share a hash).
    assert (Time(5, "ep") == Time(5, "ba")) is False
    assert (Time(5, "ep") != Time(5, "ba")) is True
    assert (Time(5, "ep") == "5ba") is False
    assert Time(5, "ep") not in [Time(5, "ba"), "5sp"]
    assert len({Time(5, "ep"), Time(5, "ba"), Time(5, "sp")}) == 3


@pytest.mark.parametrize("op", ORDERINGS)
def test_order_with_malformed_string_raises_type_error(op: Callable[[Any, Any], bool]) -> None:
    with pytest.raises(TypeError, match="'10 epochs'") as info:
        op(Time(5, "ep"), "10 epochs")
    assert "'90ep'" in str(info.value)  # says what a time string looks like


def test_compare_with_other_types() -> None:
    t = Time(5, "ep")
    assert t != None  # noqa: E711
    assert t != [5]
    assert t != True  # noqa: E712  (a bool is not a time)
    with pytest.raises(TypeError):
        _ = t < None  # type: ignore[operator]


# ----- arithmetic -----


def test_add_and_subtract() -> None:
    a, b = Time(5, "ba"), Time(3, "ba")
    assert a + b == Time(8, "ba")
    assert a - b == Time(2, "ba")
    assert a + "2ba" == Time(7, "ba")
    assert a + 1 == Time(6, "ba")
    assert a - 5 == Time(0, "ba")
    assert Time(0.25, "dur") + Time(0.5, "dur") == Time(0.75, "dur")
    assert +a is a


def test_reflected_add_and_subtract() -> None:
    t = Time(3, "ba")
    assert "5ba" + t == Time(8, "ba")
    assert 5 + t == Time(8, "ba")
    assert 10 - t == Time(7, "ba")
    assert "10ba" - t == Time(7, "ba")
    assert sum([Time(1, "ep"), Time(2, "ep")], Time(0, "ep")) == Time(3, "ep")


@pytest.mark.parametrize("op", [operator.add, operator.sub])
def test_add_subtract_mixed_units_raises(op: Callable[[Any, Any], Any]) -> None:
    with pytest.raises(ValueError, match="Convert") as info:
        op(Time(5, "ep"), Time(2, "ba"))
    assert "5ep" in str(info.value)
    assert "2ba" in str(info.value)
    with pytest.raises(ValueError, match="units differ") as info:
        op("1ba", Time(5, "ep"))  # reflected
    assert "1ba" in str(info.value)


def test_negative_result_raises() -> None:
    with pytest.raises(ValueError, match="negative"):
        _ = Time(3, "ba") - Time(5, "ba")
    with pytest.raises(ValueError, match="negative"):
        _ = 2 - Time(3, "ba")
    with pytest.raises(ValueError, match="negative"):
        _ = Time(3, "ba") + (-5)
    with pytest.raises(TypeError):
        _ = -Time(3, "ba")  # type: ignore[operator]


def test_add_fractional_number_to_count_raises() -> None:
    with pytest.raises(ValueError, match="whole number"):
        _ = Time(3, "ba") + 0.5


def test_multiply_by_number() -> None:
    assert Time(5, "ba") * 2 == Time(10, "ba")
    assert 2 * Time(5, "ba") == Time(10, "ba")
    assert Time(5, "ba") * 0.5 == Time(2, "ba")  # truncated toward zero
    assert Time(7, "ba") * 0.99 == Time(6, "ba")
    assert type((Time(5, "ba") * 0.5).value) is int
    assert Time(0.5, "dur") * 3 == Time(1.5, "dur")
    assert Time(10**20 + 1, "tok") * 3 == Time(3 * 10**20 + 3, "tok")  # exact, no float rounding
    with pytest.raises(ValueError, match="negative"):
        _ = Time(5, "ba") * -1


def test_multiply_by_duration() -> None:
    assert Time(100, "ba") * Time(0.25, "dur") == Time(25, "ba")
    assert Time(0.25, "dur") * Time(100, "ba") == Time(25, "ba")
    assert Time(10, "ep") * Time(0.35, "dur") == Time(3, "ep")
    assert Time(0.5, "dur") * Time(0.5, "dur") == Time(0.25, "dur")
    with pytest.raises(ValueError, match="'dur'") as info:
        _ = Time(5, "ba") * Time(2, "ba")
    assert "5ba" in str(info.value)


def test_divide() -> None:
    assert Time(7, "ba") / 2 == Time(3, "ba")
    assert Time(7, "ba") / 2.0 == Time(3, "ba")
    assert Time(1.0, "dur") / 4 == Time(0.25, "dur")
    assert Time(3 * 10**20 + 3, "tok") / 3 == Time(10**20 + 1, "tok")
    ratio = Time(30, "ba") / Time(120, "ba")
    assert ratio.unit is TimeUnit.DURATION
    assert ratio.value == 0.25
    assert Time(0.5, "dur") / Time(0.25, "dur") == Time(2.0, "dur")
    with pytest.raises(ValueError, match="Convert"):
        _ = Time(30, "ba") / Time(1, "ep")
    with pytest.raises(ValueError, match="negative"):
        _ = Time(30, "ba") / -2
    with pytest.raises(TypeError):
        _ = 2 / Time(30, "ba")  # type: ignore[operator]


@pytest.mark.parametrize("divisor", [0, 0.0, Time(0, "ba")])
def test_divide_by_zero(divisor: Any) -> None:
    with pytest.raises(ZeroDivisionError):
        _ = Time(5, "ba") / divisor


# ----- properties -----

counts = st.integers(min_value=0, max_value=10**18)
fractions = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)
durations = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def times(draw: st.DrawFn, unit: TimeUnit | None = None) -> Time[Any]:
    unit = unit if unit is not None else draw(st.sampled_from(list(TimeUnit)))
    return Time(draw(durations if unit is TimeUnit.DURATION else counts), unit)


@PROPERTY_SETTINGS
@given(times())
def test_timestring_round_trip(t: Time[Any]) -> None:
    parsed = Time.from_timestring(t.to_timestring())
    assert parsed == t
    assert parsed.unit is t.unit
    assert Time.from_timestring(t.to_timestring().upper()) == t


@PROPERTY_SETTINGS
@given(st.text(alphabet="0123456789.eE+- epbastokdur", max_size=12))
def test_parse_never_fails_with_other_errors(text: str) -> None:
    try:
        parsed = Time.from_timestring(text)
    except ValueError as error:
        assert repr(text) in str(error)
    else:
        assert parsed.value >= 0
        assert Time.from_timestring(parsed.to_timestring()) == parsed


@PROPERTY_SETTINGS
@given(st.sampled_from(COUNT_UNITS), counts, counts)
def test_add_then_subtract_is_identity(unit: TimeUnit, a: int, b: int) -> None:
    ta, tb = Time(a, unit), Time(b, unit)
    assert (ta + tb) - tb == ta
    assert ta + tb == tb + ta
    assert (ta + tb).value == a + b


@PROPERTY_SETTINGS
@given(durations, durations)
def test_duration_add_commutes(a: float, b: float) -> None:
    ta, tb = Time(a, "dur"), Time(b, "dur")
    assert ta + tb == tb + ta
    assert ((ta + tb) - tb).value == pytest.approx(a, abs=1e-9 * (a + b))


@PROPERTY_SETTINGS
@given(st.sampled_from(COUNT_UNITS), counts, counts)
def test_ordering_agrees_with_ints(unit: TimeUnit, a: int, b: int) -> None:
    ta, tb = Time(a, unit), Time(b, unit)
    assert (ta < tb) == (a < b)
    assert (ta <= tb) == (a <= b)
    assert (ta > tb) == (a > b)
    assert (ta >= tb) == (a >= b)
    assert (ta == tb) == (a == b)
    assert (ta != tb) == (a != b)
    assert (ta < b) == (a < b)


@PROPERTY_SETTINGS
@given(st.sampled_from(COUNT_UNITS), st.integers(min_value=0, max_value=2**53), fractions)
def test_multiply_by_duration_truncates_product(unit: TimeUnit, n: int, f: float) -> None:
    # Below 2**53 a count times a float is Python's int(n * f); above it, see test_float_factor_is_exact_above_2_53.
    expected = Time(int(n * f), unit)
    assert Time(n, unit) * Time(f, "dur") == expected
    assert Time(f, "dur") * Time(n, unit) == expected
    assert Time(n, unit) * f == expected


@PROPERTY_SETTINGS
@given(st.sampled_from(COUNT_UNITS), counts, st.integers(min_value=1, max_value=10**9))
def test_ratio_times_divisor(unit: TimeUnit, n: int, d: int) -> None:
    ratio = Time(n, unit) / Time(d, unit)
    assert ratio.unit is TimeUnit.DURATION
    assert ratio.value == n / d
    assert Time(n, unit) / d == Time(n // d, unit)


# ----- Timer -----


def test_timer_starts_at_zero() -> None:
    timer = Timer()
    assert timer.epoch == Time(0, TimeUnit.EPOCH)
    for name in ("batch", "batch_in_epoch", "sample", "sample_in_epoch", "token", "token_in_epoch"):
        assert getattr(timer, name).value == 0
    assert timer.state_dict() == dict.fromkeys(
        ["epoch", "batch", "batch_in_epoch", "sample", "sample_in_epoch", "token", "token_in_epoch"], 0
    )


def test_timer_hand_counted() -> None:
    timer = Timer()
    # Epoch 0: three batches of (samples, tokens) (32, 100), (32, 100), (16, 50).
    timer.on_batch_complete(samples=32, tokens=100)
    timer.on_batch_complete(32, 100)
    timer.on_batch_complete(samples=16, tokens=50)
    assert timer.batch == Time(3, "ba")
    assert timer.batch_in_epoch == Time(3, "ba")
    assert timer.sample == Time(80, "sp")
    assert timer.token_in_epoch == Time(250, "tok")
    timer.on_epoch_complete()
    # Epoch 1: one batch of 32 samples, no tokens.
    timer.on_batch_complete(samples=32)
    assert timer.get_timestamp() == Timestamp(
        epoch=Time(1, "ep"),
        batch=Time(4, "ba"),
        batch_in_epoch=Time(1, "ba"),
        sample=Time(112, "sp"),
        sample_in_epoch=Time(32, "sp"),
        token=Time(250, "tok"),
        token_in_epoch=Time(0, "tok"),
    )
    assert timer.state_dict() == {
        "epoch": 1,
        "batch": 4,
        "batch_in_epoch": 1,
        "sample": 112,
        "sample_in_epoch": 32,
        "token": 250,
        "token_in_epoch": 0,
    }
    timer.on_epoch_complete()
    assert (timer.epoch, timer.batch_in_epoch, timer.sample_in_epoch, timer.token_in_epoch) == (
        Time(2, "ep"),
        Time(0, "ba"),
        Time(0, "sp"),
        Time(0, "tok"),
    )
    assert timer.batch == Time(4, "ba")


@PROPERTY_SETTINGS
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 512), st.integers(0, 10**6)), max_size=6),
        max_size=5,
    )
)
def test_timer_matches_reference_count(epochs: list[list[tuple[int, int]]]) -> None:
    timer = Timer()
    for batches in epochs:
        for samples, tokens in batches:
            timer.on_batch_complete(samples, tokens)
        timer.on_epoch_complete()
    assert timer.epoch.value == len(epochs)
    assert timer.batch.value == sum(len(batches) for batches in epochs)
    assert timer.sample.value == sum(s for batches in epochs for s, _ in batches)
    assert timer.token.value == sum(t for batches in epochs for _, t in batches)
    assert timer.batch_in_epoch.value == timer.sample_in_epoch.value == timer.token_in_epoch.value == 0


def test_timer_counter_units() -> None:
    timer = Timer()
    stamp = timer.get_timestamp()
    assert Timestamp._fields == (
        "epoch",
        "batch",
        "batch_in_epoch",
        "sample",
        "sample_in_epoch",
        "token",
        "token_in_epoch",
    )
    assert [t.unit for t in stamp] == [
        TimeUnit.EPOCH,
        *[TimeUnit.BATCH] * 2,
        *[TimeUnit.SAMPLE] * 2,
        *[TimeUnit.TOKEN] * 2,
    ]


def test_timer_get() -> None:
    timer = Timer()
    timer.on_batch_complete(samples=4, tokens=9)
    timer.on_epoch_complete()
    assert timer.get("ep") == Time(1, "ep")
    assert timer.get(TimeUnit.BATCH) == Time(1, "ba")
    assert timer.get("SP") == Time(4, "sp")
    assert timer.get("tok") == Time(9, "tok")
    with pytest.raises(ValueError, match="max_duration") as info:
        timer.get("dur")
    assert "get_elapsed_duration" in str(info.value)


def test_timer_comparisons() -> None:
    timer = Timer()
    for _ in range(10):
        timer.on_batch_complete(samples=2)
    assert timer >= "10ba"
    assert timer > "9ba"
    assert timer <= Time(10, "ba")
    assert timer < "1ep"
    assert timer == "20sp"
    assert timer != "21sp"
    assert timer == Time(0, "tok")
    with pytest.raises(ValueError, match="get_elapsed_duration"):
        _ = timer >= "0.5dur"
    with pytest.raises(TypeError):
        _ = timer < 3  # type: ignore[operator]
    assert timer != 3


def test_timer_equality_and_copy() -> None:
    a = Timer()
    a.on_batch_complete(3, 5)
    b = a.copy()
    assert a == b
    assert b.sample == Time(3, "sp")
    b.on_batch_complete(1)
    assert a != b
    assert a.batch == Time(1, "ba")
    with pytest.raises(TypeError):
        hash(a)


def test_timer_state_dict_round_trip() -> None:
    a = Timer()
    for _ in range(3):
        a.on_batch_complete(8, 16)
    a.on_epoch_complete()
    a.on_batch_complete(8, 16)
    state = a.state_dict()
    assert all(type(value) is int for value in state.values())
    b = Timer()
    b.load_state_dict(state)
    assert b == a
    assert b.get_timestamp() == a.get_timestamp()
    state["batch"] = 99
    assert a.batch == Time(4, "ba")  # the state dict is a copy, not a view


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"batch": None}, "missing"),
        ({"iteration": 3}, "unknown"),
        ({"sample": -1}, "negative"),
        ({"token": 1.5}, "whole number"),
    ],
)
def test_timer_load_invalid_state_dict(change: dict[str, Any], match: str) -> None:
    source = Timer()
    source.on_batch_complete(2, 3)
    state = {**source.state_dict(), **change}
    state = {key: value for key, value in state.items() if value is not None}
    timer = Timer()
    timer.on_batch_complete(1)
    before = timer.state_dict()
    with pytest.raises(ValueError, match=match):
        timer.load_state_dict(state)
    assert timer.state_dict() == before  # unchanged on failure


def test_on_batch_complete_accepts_times_and_numpy() -> None:
    timer = Timer()
    timer.on_batch_complete(samples=Time(4, "sp"), tokens=Time(7, "tok"))
    timer.on_batch_complete(samples=np.int64(4))  # type: ignore[arg-type]
    assert timer.sample == Time(8, "sp")
    assert timer.token == Time(7, "tok")
    assert type(timer.state_dict()["sample"]) is int


@pytest.mark.parametrize(
    ("samples", "tokens", "error"),
    [
        (-1, 0, ValueError),
        (0, -5, ValueError),
        (2.5, 0, ValueError),
        ("4", 0, TypeError),
        (Time(4, "ba"), 0, ValueError),
    ],
)
def test_on_batch_complete_rejects_bad_increments(samples: Any, tokens: Any, error: type[Exception]) -> None:
    timer = Timer()
    with pytest.raises(error):
        timer.on_batch_complete(samples, tokens)
    assert timer == Timer()


def test_timer_repr() -> None:
    timer = Timer()
    timer.on_batch_complete(3)
    assert repr(timer) == (
        "Timer(epoch=0, batch=1, batch_in_epoch=1, sample=3, sample_in_epoch=3, token=0, token_in_epoch=0)"
    )


# ----- huge values, exactness and equality (issue 16) -----
# Each test below failed before the fix: with an OverflowError, a silently rounded count, a string that did not parse
# back, or an equality that raised or hashed apart from what it equals.

MAX_COUNT = 10**100  # counts are below 1e100, the most a time string holds


def fraction(numerator: int, denominator: int = 1) -> Any:
    """A Fraction, typed Any: Time takes any real number at run time, though its annotations name int and float."""
    return Fraction(numerator, denominator)


@pytest.mark.parametrize(
    ("build", "allowed"),
    [
        (lambda: Time(10**400, "dur"), "finite float"),
        (lambda: Time(10**400, "tok") + 1.5, "below 1e100"),
        (lambda: Time(10**400, "ba") / Time(1, "ba"), "below 1e100"),
        (lambda: Time(fraction(10**400), "ep"), "below 1e100"),
        (lambda: Time.from_duration(10**400), "finite float"),
        (lambda: Time(MAX_COUNT, "sp"), "below 1e100"),
        (lambda: Time(1e300, "ba"), "below 1e100"),
        (lambda: Time.from_input(10**400, default_unit="tok"), "below 1e100"),
    ],
)
def test_huge_values_raise_value_error(build: Callable[[], Any], allowed: str) -> None:
    with pytest.raises(ValueError, match=allowed) as info:
        build()
    message = str(info.value)
    assert "too large" in message or "must be" in message
    assert "digits" in message or "1e+300" in message or "1000000" in message  # names the value, shortened
    assert len(message) < 400


def test_huge_operands_raise_value_error_or_work_exactly() -> None:
    big = Time(10**99, "tok")
    with pytest.raises(ValueError, match=r"1\.5 .*whole number"):
        _ = big + 1.5
    assert (big + 1.0).value == 10**99 + 1
    assert (big + fraction(4, 2)).value == 10**99 + 2
    assert big / Time(1, "tok") == Time(1e99, "dur")
    assert Time(fraction(10**99), "ep").value == 10**99
    with pytest.raises(ValueError, match="too large"):
        _ = big * 10
    with pytest.raises(ValueError, match="too large"):
        _ = Time(5, "ba") * 10**400
    with pytest.raises(ValueError, match="too large"):
        _ = Time(5, "ba") / 5e-324
    # Durations: rounded once from the exact result, or refused when no float holds it.
    assert Time(0.5, "dur") / 10**400 == Time(0.0, "dur")
    assert Time(0.0, "dur") * 10**400 == Time(0.0, "dur")
    assert Time(0.5, "dur") * fraction(1, 3) == Time(0.5 / 3, "dur")
    with pytest.raises(ValueError, match="too large"):
        _ = Time(0.5, "dur") * 10**400
    with pytest.raises(ValueError, match="too large"):
        _ = Time(1e308, "dur") / Time(1e-300, "dur")
    with pytest.raises(ValueError, match="too large"):
        _ = Time(1e308, "dur") + Time(1e308, "dur")
    with pytest.raises(ValueError, match="finite"):
        _ = Time(0.5, "dur") + 10**400


def test_messages_about_huge_ints_do_not_break() -> None:
    # repr() of an int over 4300 digits raises ValueError itself; the messages must not depend on it.
    for build in (lambda: Time(10**5000, "ba"), lambda: Time(-(10**5000), "ep"), lambda: Time.from_input(10**5000)):
        with pytest.raises(ValueError, match="digits") as info:
            build()
        assert "Exceeds the limit" not in str(info.value)


def test_counts_stay_exact_above_2_53() -> None:
    assert (Time(2**60 + 1, "ba") + 1.0).value == 2**60 + 2
    assert (1.0 + Time(2**60 + 1, "ba")).value == 2**60 + 2
    assert (Time(2**60 + 1, "ba") - 1.0).value == 2**60
    assert (Time(2**60 + 1, "ba") * 1.0).value == 2**60 + 1
    assert (Time(2**60 + 1, "ba") * Time(1.0, "dur")).value == 2**60 + 1
    assert (Time(2**60 + 1, "ba") / 1.0).value == 2**60 + 1
    assert (Time(2**60 + 3, "ba") * 0.5).value == 2**59 + 1  # floor of the exact 2**59 + 1.5
    assert (Time(2**60 + 3, "ba") / fraction(1, 3)).value == 3 * (2**60 + 3)
    assert Time(float(2**60), "sp").value == 2**60
    assert Time(fraction(2**61 + 2, 2), "sp").value == 2**60 + 1
    with pytest.raises(ValueError, match="whole number") as info:
        Time(fraction(2**53 + 1, 2), "ep")  # used to be accepted as 2**52
    assert "9007199254740993" in str(info.value)


def test_float_factor_of_a_count_truncates() -> None:
    # The documented rule: a count times (or divided by) a float is truncated toward zero; below 2**53 it is what
    # Python's int(n * f) gives, which the scale schedule ratio relies on (10ep / 0.7 * 0.7 is 10ep again).
    assert Time(3, "ba") * 0.5 == Time(1, "ba")
    assert Time(10, "ep") * 0.7 == Time(7, "ep")
    assert Time(7, "ep") / 0.7 == Time(10, "ep")
    assert Time(3, "ep") * (1 / 3) == Time(1, "ep")
    assert Time(7, "ba") / 2.0 == Time(3, "ba")
    assert Time(7, "ba") / fraction(2) == Time(3, "ba")
    assert Time(7, "ba") * fraction(1, 2) == Time(3, "ba")
    assert Time(5, "ba") / float("inf") == Time(0, "ba")
    for bad in (float("nan"), float("inf"), -0.5):
        with pytest.raises(ValueError, match="finite number of 0 or more"):
            _ = Time(5, "ba") * bad


@pytest.mark.parametrize(
    "t",
    [
        Time(MAX_COUNT - 1, "ba"),
        Time(10**99, "tok"),
        Time(10**100 - 10**80, "sp"),
        Time(sys.float_info.max, "dur"),
        Time(5e-324, "dur"),
        Time(1e100, "dur"),
        Time(1e-7, "dur"),
    ],
)
def test_round_trip_at_the_limits(t: Time[Any]) -> None:
    parsed = Time.from_timestring(str(t))
    assert parsed == t
    assert parsed.unit is t.unit
    assert type(parsed.value) is type(t.value)


def test_no_time_holds_a_count_that_does_not_round_trip() -> None:
    with pytest.raises(ValueError, match="below 1e100"):
        Time(MAX_COUNT, "ba")
    with pytest.raises(ValueError, match="below 1e100"):
        Time.from_timestring(f"{MAX_COUNT}ba")
    with pytest.raises(ValueError, match="too large"):
        _ = Time(MAX_COUNT - 1, "ba") + 1


@pytest.mark.parametrize("other", ["x", "", "10 epochs", "1e100ep", None, [1], object(), b"5ep", True])
def test_equality_with_unrelated_values_is_false(other: object) -> None:
    t = Time(1, "ep")
    assert (t == other) is False
    assert (t != other) is True
    assert t not in [other]
    assert [other].count(t) == 0


@pytest.mark.parametrize("other", ["x", "10 epochs", None, [1], object()])
@pytest.mark.parametrize("op", ORDERINGS)
def test_ordering_with_unrelated_values_raises_type_error(op: Callable[[Any, Any], bool], other: object) -> None:
    with pytest.raises(TypeError):
        op(Time(1, "ep"), other)
    with pytest.raises(TypeError):
        op(other, Time(1, "ep"))


def test_hash_agrees_with_equality() -> None:
    assert Time(5, "ep") == 5
    assert hash(Time(5, "ep")) == hash(5) == hash(5.0) == hash(Fraction(5))
    assert hash(Time(0.5, "dur")) == hash(0.5)
    assert hash(Time(10**99, "tok")) == hash(10**99)
    by_number: dict[Any, str] = {5: "five"}
    by_time: dict[Any, str] = {Time(5, "ba"): "five"}
    assert by_number[Time(5, "ba")] == "five"
    assert by_time[5.0] == "five"
    assert len({Time(5, "ep"), 5}) == 1


def test_timer_refuses_counts_it_cannot_hold() -> None:
    timer = Timer()
    timer.on_batch_complete(samples=MAX_COUNT - 1)
    before = timer.state_dict()
    increments: list[tuple[Any, Any]] = [(1, 0), (0, MAX_COUNT), (np.int64(1), 0), (Time(1, "sp"), 0), (1e100, 0)]
    for samples, tokens in increments:
        with pytest.raises(ValueError, match="1e100"):
            timer.on_batch_complete(samples, tokens)
        assert timer.state_dict() == before  # unchanged
    assert Time.from_timestring(str(timer.sample)) == timer.sample
    with pytest.raises(ValueError, match="below 1e100"):
        Timer().load_state_dict({**Timer().state_dict(), "token": MAX_COUNT})
    with pytest.raises(ValueError, match="whole number"):
        Timer().on_batch_complete(samples=Fraction(2**53 + 1, 2))  # type: ignore[arg-type]
    exact = Timer()
    exact.on_batch_complete(samples=float(2**60), tokens=Fraction(2**61, 2))  # type: ignore[arg-type]
    assert exact.sample.value == exact.token.value == 2**60


def test_timer_equality_and_ordering_with_bad_strings() -> None:
    timer = Timer()
    assert (timer == "x") is False
    assert timer not in ["x", None]
    with pytest.raises(TypeError, match="'x'"):
        _ = timer < "x"
    with pytest.raises(TypeError):
        _ = timer >= None  # type: ignore[operator]


def test_timer_per_epoch_counters_after_load() -> None:
    # The Timer keeps running totals and where the epoch began; a loaded state dict must read back the same.
    state = {"epoch": 2, "batch": 9, "batch_in_epoch": 3, "sample": 90, "sample_in_epoch": 30, "token": 7}
    timer = Timer()
    timer.load_state_dict({**state, "token_in_epoch": 7})
    assert timer.state_dict() == {**state, "token_in_epoch": 7}
    timer.on_batch_complete(10, 1)
    assert (timer.batch_in_epoch, timer.sample_in_epoch, timer.token_in_epoch) == (
        Time(4, "ba"),
        Time(40, "sp"),
        Time(8, "tok"),
    )
    timer.on_epoch_complete()
    assert timer.state_dict()["sample_in_epoch"] == 0
    assert timer.sample == Time(100, "sp")


# ----- fuzzing properties (issue 16) -----
# Seeded, with a stated number of examples each; the whole set runs in a few seconds.

FUZZ_SETTINGS = settings(derandomize=True, deadline=None, max_examples=300)


def exact(number: Any) -> Fraction:
    """The exact value of a finite int, float, Fraction or numpy number (Fraction() refuses numpy floats)."""
    if isinstance(number, (int, np.integer)):
        return Fraction(int(number))
    if isinstance(number, Fraction):
        return number
    return Fraction(*number.as_integer_ratio())


# Integers around every boundary that matters: 0, 2**53 (float precision), 1e100 (the count limit), and beyond.
edge_ints = st.one_of(
    st.integers(min_value=-(10**3), max_value=10**3),
    st.integers(min_value=2**53 - 4, max_value=2**53 + 4),
    st.integers(min_value=2**60 - 4, max_value=2**60 + 4),
    st.integers(min_value=MAX_COUNT - 4, max_value=MAX_COUNT + 4),
    st.integers(min_value=-(10**420), max_value=10**420),
)
any_numbers = st.one_of(
    edge_ints,
    st.floats(),  # every float: NaN, infinities, -0.0, subnormals, 1e308
    st.builds(Fraction, edge_ints, st.integers(min_value=1, max_value=2**70)),
    st.builds(np.int64, st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    st.builds(np.float32, st.floats(width=32)),
)
valid_counts = st.one_of(
    st.integers(min_value=0, max_value=MAX_COUNT - 1),
    st.integers(min_value=2**53 - 4, max_value=2**53 + 4),
    st.integers(min_value=MAX_COUNT - 4, max_value=MAX_COUNT - 1),
)
valid_durations = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)


@st.composite
def valid_times(draw: st.DrawFn) -> Time[Any]:
    unit = draw(st.sampled_from(list(TimeUnit)))
    return Time(draw(valid_durations if unit is TimeUnit.DURATION else valid_counts), unit)


@FUZZ_SETTINGS
@given(any_numbers, st.sampled_from(list(TimeUnit)))
def test_fuzz_construction_is_exact_or_refused(value: Any, unit: TimeUnit) -> None:
    try:
        t = Time(value, unit)
    except ValueError as error:
        assert "Time" in str(error) or "time" in str(error)
        return
    if unit is TimeUnit.DURATION:
        assert type(t.value) is float
        assert t.value == float(value)
    else:
        assert type(t.value) is int
        assert 0 <= t.value < MAX_COUNT
        assert t.value == exact(value)  # exact: nothing was rounded
    assert Time.from_timestring(str(t)) == t


@FUZZ_SETTINGS
@given(valid_times())
def test_fuzz_every_valid_time_round_trips(t: Time[Any]) -> None:
    for text in (str(t), t.to_timestring().upper(), f"  {t} "):
        parsed = Time.from_timestring(text)
        assert parsed == t
        assert parsed.unit is t.unit
        assert type(parsed.value) is type(t.value)
    assert eval(repr(t), {"Time": Time, "TimeUnit": TimeUnit}) == t


number_texts = st.one_of(
    st.integers(min_value=0, max_value=10**110).map(str),
    st.floats(min_value=0.0, allow_nan=False).map(repr),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(0, 10**5), st.integers(-400, 400)),
    st.text(alphabet="0123456789.eE+-", min_size=1, max_size=30),
)


@FUZZ_SETTINGS
@given(number_texts, st.sampled_from(["ep", "ba", "sp", "tok", "dur", "EP", "Dur", "x", ""]))
def test_fuzz_parse_is_valid_or_value_error(number: str, unit: str) -> None:
    text = number + unit
    try:
        t = Time.from_timestring(text)
    except ValueError as error:
        assert "Invalid time string" in str(error)
        return
    assert Time.from_timestring(str(t)) == t
    if t.unit is not TimeUnit.DURATION:
        assert Fraction(t.value) == Fraction(Decimal(number))  # every digit kept


operands = st.one_of(
    edge_ints,
    st.floats(),
    st.builds(Fraction, edge_ints, st.integers(min_value=1, max_value=2**70)),
)


@FUZZ_SETTINGS
@given(st.sampled_from(COUNT_UNITS), valid_counts, operands)
def test_fuzz_count_sum_and_difference_are_exact(unit: TimeUnit, n: int, other: Any) -> None:
    t = Time(n, unit)
    finite = isinstance(other, (int, Fraction)) or math.isfinite(other)
    whole = finite and exact(other).denominator == 1
    for op in (operator.add, operator.sub):
        expected = op(n, int(exact(other))) if whole else None
        try:
            result = op(t, other)
        except ValueError:
            assert expected is None or not 0 <= expected < MAX_COUNT
            continue
        assert result.value == expected
        assert type(result.value) is int


@FUZZ_SETTINGS
@given(st.sampled_from(COUNT_UNITS), valid_counts, operands)
def test_fuzz_count_product_and_quotient_truncate(unit: TimeUnit, n: int, factor: Any) -> None:
    t = Time(n, unit)
    finite = isinstance(factor, (int, Fraction)) or math.isfinite(factor)
    for op in (operator.mul, operator.truediv):
        try:
            result = op(t, factor)
        except ZeroDivisionError:
            assert op is operator.truediv and factor == 0
            continue
        except ValueError:
            assert not finite or factor < 0 or op(Fraction(n), exact(factor)) >= MAX_COUNT - 1
            continue
        assert finite and factor >= 0
        value = result.value
        assert type(value) is int
        true_result = op(Fraction(n), exact(factor))
        if isinstance(factor, float) and n <= 2**53 and op(n, factor) < 2**53:
            assert value == int(op(n, factor))  # what Python's float arithmetic gives
        else:
            assert value == math.floor(true_result)  # exact, then truncated
        assert abs(value - true_result) < 1 + true_result * 2**-52


@FUZZ_SETTINGS
@given(valid_durations, operands, st.sampled_from([operator.add, operator.sub, operator.mul, operator.truediv]))
def test_fuzz_duration_arithmetic_is_finite_or_value_error(d: float, other: Any, op: Callable[[Any, Any], Any]) -> None:
    try:
        result = op(Time(d, "dur"), other)
    except ZeroDivisionError:
        assert op is operator.truediv and other == 0
        return
    except ValueError:
        return
    assert type(result.value) is float
    assert 0.0 <= result.value <= sys.float_info.max
    if not (isinstance(other, float) and math.isinf(other)):
        true_result = op(Fraction(d), exact(other))
        assert result.value == pytest.approx(float(true_result), rel=1e-15, abs=1e-300)
    assert Time.from_timestring(str(result)) == result


unrelated = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.builds(object),
)


@FUZZ_SETTINGS
@given(valid_times(), st.one_of(unrelated, operands, valid_times(), valid_times().map(str)))
def test_fuzz_equality_never_raises_and_agrees_with_hash(t: Time[Any], other: Any) -> None:
    equal = t == other
    assert isinstance(equal, bool)
    assert (t != other) is (not equal)
    if equal and not isinstance(other, str):  # a Time cannot hash like every string that names it
        assert hash(t) == hash(other)
    for op in ORDERINGS:
        try:
            op(t, other)
        except TypeError:
            assert not isinstance(other, (int, float, Fraction, Time)) or isinstance(other, bool)
        except ValueError as error:
            assert "units differ" in str(error)


@FUZZ_SETTINGS
@given(st.lists(st.tuples(st.one_of(valid_counts, edge_ints), st.one_of(valid_counts, edge_ints)), max_size=6))
def test_fuzz_timer_counts_exactly_or_refuses(increments: list[tuple[int, int]]) -> None:
    timer = Timer()
    samples = tokens = batches = 0
    for n_samples, n_tokens in increments:
        before = timer.state_dict()
        try:
            timer.on_batch_complete(n_samples, n_tokens)
        except ValueError:
            fits = n_samples >= 0 and n_tokens >= 0 and samples + n_samples < MAX_COUNT > tokens + n_tokens
            assert not fits
            assert timer.state_dict() == before
            continue
        samples, tokens, batches = samples + n_samples, tokens + n_tokens, batches + 1
    assert (timer.sample.value, timer.token.value, timer.batch.value) == (samples, tokens, batches)
    for counter in timer.get_timestamp():
        assert Time.from_timestring(str(counter)) == counter
    copy_ = Timer()
    copy_.load_state_dict(timer.state_dict())
    assert copy_ == timer
