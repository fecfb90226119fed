"""Memory use: the process's resident memory, and the CUDA allocator's when training on a GPU."""

from __future__ import annotations

import os
import sys

import torch

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = ["MemoryMonitor", "MemoryMonitorHparams", "memory_usage"]

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _process_memory() -> dict[str, int]:
    values: dict[str, int] = {}
    try:  # Linux: the second field of statm is the resident set in pages
        with open("/proc/self/statm", encoding="ascii") as statm:
            values["memory/process_rss_bytes"] = int(statm.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # ru_maxrss is in kilobytes on Linux and in bytes on macOS.
        values["memory/process_peak_rss_bytes"] = int(peak) if sys.platform == "darwin" else int(peak) * 1024
    except (ImportError, OSError):
        pass
    return values


def memory_usage(device: torch.device | str | None = None) -> dict[str, int]:
    """The process's memory and, for a CUDA ``device``, the CUDA caching allocator's, in bytes.

    Args:
        device (torch.device | str, optional): The training device; CUDA values are read only for a CUDA device.

    Returns:
        dict[str, int]: ``memory/process_rss_bytes`` and ``memory/process_peak_rss_bytes`` (where the platform
        reports them); on CUDA also ``memory/cuda_allocated_bytes``, ``memory/cuda_reserved_bytes``,
        ``memory/cuda_peak_allocated_bytes`` and ``memory/cuda_alloc_retries``. None of these waits for the device.

    Example:
        >>> usage = memory_usage("cpu")
        >>> usage["memory/process_rss_bytes"] > 0
        True
    """
    values = _process_memory()
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda" and torch.cuda.is_available():
        values["memory/cuda_allocated_bytes"] = torch.cuda.memory_allocated(device)
        values["memory/cuda_reserved_bytes"] = torch.cuda.memory_reserved(device)
        values["memory/cuda_peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        values["memory/cuda_alloc_retries"] = int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))
    return values


class MemoryMonitor(Callback):
    """Logs memory use after every training batch (BATCH level, at ``AFTER_TRAIN_BATCH``, when memory peaks).

    It logs the process's resident memory (current and peak) and, when training on a CUDA device, the CUDA caching
    allocator's allocated, reserved and peak-allocated bytes and its allocation retries (see :func:`memory_usage`).
    The values are read only when a destination will log them.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="2ba",
        ...                   callbacks=[MemoryMonitor()], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("memory/process_rss_bytes")
        [0, 1]
        >>> trainer.close()
    """

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        names = list(_process_memory())
        if state.device.type == "cuda":
            names += [
                "memory/cuda_allocated_bytes",
                "memory/cuda_reserved_bytes",
                "memory/cuda_peak_allocated_bytes",
                "memory/cuda_alloc_retries",
            ]
        return names

    def after_train_batch(self, state: State, logger: Logger) -> None:
        device = state.device
        logger.metric_batch(lambda: memory_usage(device))


MemoryMonitorHparams = hparams_for(MemoryMonitor)
"""See :class:`MemoryMonitor`; the fields are its arguments (YAML key ``memory_monitor``)."""
