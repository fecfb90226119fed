"""How often a monitor or a destination acts: a whole number of batches or epochs (``'10ba'``, ``'1ep'``, an int)."""

from __future__ import annotations

from typing import Any

from composer.core.time import Time, TimeUnit

__all__ = ["parse_interval"]

_UNITS = (TimeUnit.BATCH, TimeUnit.EPOCH)


def parse_interval(value: str | Time[Any] | int, argument: str) -> Time[int]:
    """Parses a monitor's interval with :meth:`Time.from_input` (an int means batches) and checks it.

    Args:
        value (str | Time | int): ``'10ba'``, ``'1ep'``, ``Time(10, 'ba')`` or ``10``.
        argument (str): The argument's name, for the error message (``'log_interval'``).

    Returns:
        Time[int]: A positive whole number of batches or epochs.

    Raises:
        ValueError: ``value`` is not a time, is in another unit, or is not a positive whole number; the message names
            ``argument``.

    Example:
        >>> parse_interval("10ba", "log_interval"), parse_interval(3, "log_interval")
        (Time(10, TimeUnit.BATCH), Time(3, TimeUnit.BATCH))
        >>> parse_interval("0.5dur", "log_interval")
        Traceback (most recent call last):
        ...
        ValueError: log_interval='0.5dur' must be a whole number of batches or epochs of at least 1, ...
    """
    try:
        parsed = Time.from_input(value, default_unit=TimeUnit.BATCH)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{argument}={value!r} is not a time ({error}); give batches or epochs, e.g. '10ba' or '1ep'."
        ) from None
    if parsed.unit not in _UNITS or not isinstance(parsed.value, int) or parsed.value < 1:
        raise ValueError(
            f"{argument}={value!r} must be a whole number of batches or epochs of at least 1, e.g. '10ba' or '1ep' "
            f"(units {[unit.value for unit in _UNITS]}; an int means batches)."
        )
    return parsed
