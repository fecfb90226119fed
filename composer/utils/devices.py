"""Where training runs: choosing the device and moving batches onto it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["batch_to_device", "resolve_device"]

_DEVICE_CHOICES = "'cpu', 'cuda' (or 'gpu'), 'cuda:N', or a torch.device"


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The torch device to train on: CUDA when available unless told otherwise.

    Args:
        device (str | torch.device | None): ``None`` picks ``'cuda'`` if available, else ``'cpu'``.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, str) and device.lower() == "gpu":
        device = "cuda"
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"Unknown device {device!r}; expected {_DEVICE_CHOICES}.") from e
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"Unsupported device {device!r}; expected {_DEVICE_CHOICES}.")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA device is available; use device='cpu' (or leave it None).")
    return resolved


def batch_to_device(batch: Any, device: torch.device) -> Any:
    """Moves every tensor in ``batch`` (any nesting of sequences and mappings) to ``device``, keeping containers.

    Objects with their own ``.to`` (such as Hugging Face's BatchEncoding) are moved with it.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        moved = [batch_to_device(x, device) for x in batch]
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
            return type(batch)(*moved)
        return type(batch)(moved)
    if hasattr(batch, "to") and callable(batch.to) and not isinstance(batch, torch.nn.Module):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return type(batch)({k: batch_to_device(v, device) for k, v in batch.items()})  # type: ignore[call-arg]
    return batch
