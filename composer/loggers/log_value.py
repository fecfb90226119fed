"""Turning logged values (numbers, strings, tensors left on their device, nested sequences) into what files hold.

Destinations keep tensors as they were logged until they write them, and then convert a whole batch of records at
once with :func:`to_builtins`: every one-element tensor on a device comes back in one device-to-host copy per device,
instead of one synchronisation per value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_record", "format_value", "is_number", "to_builtin", "to_builtins"]


def _is_tensor(value: Any) -> bool:
    # Duck-typed so that this module never imports torch itself.
    return hasattr(value, "detach") and hasattr(value, "numel") and hasattr(value, "tolist")


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (not a bool, not a string) that a plot can show.

    Example:
        >>> is_number(0.5), is_number(3), is_number(True), is_number("0.5")
        (True, True, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_builtin(value: Any) -> Any:
    """Converts ``value`` to plain Python: a one-element tensor to a number, a larger one to nested lists.

    Mappings and sequences are converted element by element; strings, numbers and None pass through.

    Example:
        >>> import torch
        >>> to_builtin({"loss": torch.tensor(0.25), "sizes": (torch.tensor([1, 2]), 3)})
        {'loss': 0.25, 'sizes': [[1, 2], 3]}
    """
    if _is_tensor(value):
        value = value.detach()
        return value.item() if value.numel() == 1 else value.cpu().tolist()
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", None) == 0:
        return value.item()  # a NumPy scalar
    if isinstance(value, Mapping):
        return {str(k): to_builtin(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_builtin(v) for v in value]
    return value


def to_builtins(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converts many ``{name: value}`` records at once, copying device scalars to the host in one go per device.

    Args:
        records (Sequence[dict]): The logged mappings, tensors still on their devices.

    Returns:
        list[dict]: The same records, every value plain Python (see :func:`to_builtin`).

    Example:
        >>> import torch
        >>> to_builtins([{"loss": torch.tensor(1.5)}, {"loss": torch.tensor(0.5), "lr": 0.1}])
        [{'loss': 1.5}, {'loss': 0.5, 'lr': 0.1}]
    """
    # One-element float tensors grouped by (device, dtype), so that each group stacks into one tensor.
    groups: dict[Any, list[tuple[int, str, Any]]] = {}
    for i, record in enumerate(records):
        for key, value in record.items():
            if _is_tensor(value) and value.numel() == 1 and value.dtype.is_floating_point:
                groups.setdefault((value.device, value.dtype), []).append((i, key, value))
    scalars: dict[tuple[int, str], float] = {}
    if groups:
        import torch

        for items in groups.values():
            # (n,) on the device, then a single copy to the host (tolist gives exact Python floats).
            stacked = torch.stack([v.detach().reshape(()) for _, _, v in items]).tolist()
            for (i, key, _), number in zip(items, stacked):
                scalars[(i, key)] = number
    return [
        {key: scalars[(i, key)] if (i, key) in scalars else to_builtin(value) for key, value in record.items()}
        for i, record in enumerate(records)
    ]


def format_value(value: Any) -> str:
    """Formats a logged value for a line of text: floats with 4 decimals, strings quoted, tensors converted.

    Example:
        >>> import torch
        >>> format_value(torch.tensor(0.123456)), format_value(3), format_value("sgd"), format_value([0.5, "a"])
        ('0.1235', '3', '"sgd"', '[0.5000, "a"]')
    """
    value = to_builtin(value)
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f'"{k}": {format_value(v)}' for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def format_record(timestamp: Any, log_level: Any, data: Mapping[str, Any]) -> str:
    """One line of text for one logged record: ``[LEVEL][epoch=E batch=B]: name: value, ...``.

    Example:
        >>> from composer.core.logging.logger import LogLevel
        >>> from composer.core.time import Timer
        >>> format_record(Timer().get_timestamp(), LogLevel.EPOCH, {"metrics/eval/Accuracy": 0.5, "epoch": 1})
        '[EPOCH][epoch=0 batch=0]: metrics/eval/Accuracy: 0.5000, epoch: 1'
    """
    values = ", ".join(f"{key}: {format_value(value)}" for key, value in data.items())
    return f"[{log_level.name}][epoch={int(timestamp.epoch)} batch={int(timestamp.batch)}]: {values}"
