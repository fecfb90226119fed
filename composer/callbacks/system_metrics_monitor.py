"""The machine's CPU, memory, disk and network use (psutil) and its GPUs' utilisation and memory (NVML, if present)."""

from __future__ import annotations

import contextlib
import importlib
import time
from typing import Any

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.core.time import Time, TimeUnit
from composer.utils.interval import parse_interval

__all__ = ["SystemMetricsMonitor", "SystemMetricsMonitorHparams", "gpu_metrics", "open_nvml", "system_metrics"]

# Cumulative counters, and the per-second rates the monitor derives from them between two logs.
_COUNTERS = ("disk_read_bytes", "disk_write_bytes", "net_sent_bytes", "net_recv_bytes")


def _psutil(needed_by: str) -> Any:
    try:
        return importlib.import_module("psutil")
    except ImportError:
        raise ImportError(
            f"{needed_by} needs the optional package 'psutil', which is not installed. To fix: pip install "
            "'opencomposer[loggers]' (or pip install psutil)."
        ) from None


def open_nvml() -> Any | None:
    """Imports and initialises NVML (``pynvml``, from the ``nvidia-ml-py`` package) if it can; never raises.

    Returns:
        Any | None: The initialised ``pynvml`` module, or None when the package is missing or NVML cannot start (no
        NVIDIA driver, no GPU). Call ``nvmlShutdown()`` on it when done.

    Example:
        >>> nvml = open_nvml()  # None on a machine without an NVIDIA driver
        >>> nvml is None or hasattr(nvml, "nvmlShutdown")
        True
    """
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # ImportError, or NVMLError when the library or the driver is missing
        return None
    return nvml


def gpu_metrics(nvml: Any) -> dict[str, float]:
    """Utilisation and memory of every GPU NVML sees; a value NVML cannot read is left out.

    Args:
        nvml (Any): The initialised ``pynvml`` module (from :func:`open_nvml`).

    Returns:
        dict[str, float]: For each GPU ``i``: ``system/gpu<i>/utilization_percent`` (the share of the last sample
        period in which a kernel ran, 0-100), ``system/gpu<i>/memory_used_bytes``, ``system/gpu<i>/memory_total_bytes``
        and ``system/gpu<i>/memory_percent``.

    Example:
        >>> nvml = open_nvml()
        >>> values = gpu_metrics(nvml) if nvml is not None else {}
        >>> all(key.startswith("system/gpu") for key in values)
        True
    """
    values: dict[str, float] = {}
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception:
        return values
    for i in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
        except Exception:
            continue
        with contextlib.suppress(Exception):
            values[f"system/gpu{i}/utilization_percent"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        try:
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            values[f"system/gpu{i}/memory_used_bytes"] = float(memory.used)
            values[f"system/gpu{i}/memory_total_bytes"] = float(memory.total)
            values[f"system/gpu{i}/memory_percent"] = 100.0 * memory.used / memory.total if memory.total else 0.0
        except Exception:
            pass
    return values


def system_metrics(disk_path: str = "/", nvml: Any | None = None) -> dict[str, float]:
    """The machine's CPU, memory, disk and network use now, and its GPUs' with an NVML handle.

    Args:
        disk_path (str): A path on the disk whose fullness is reported (the checkpoint folder's disk, say).
        nvml (Any, optional): An initialised ``pynvml`` (:func:`open_nvml`) to add :func:`gpu_metrics`.

    Returns:
        dict[str, float]: ``system/cpu_percent`` (all cores, 0-100, since the previous call in this process; the
        first call returns 0), ``system/memory_percent``, ``system/memory_used_bytes``,
        ``system/memory_available_bytes``, ``system/disk_percent`` (of ``disk_path``'s disk), and the machine's
        cumulative ``system/disk_read_bytes``, ``system/disk_write_bytes``, ``system/net_sent_bytes`` and
        ``system/net_recv_bytes`` (where the platform counts them).

    Raises:
        ImportError: psutil is not installed (the message names the extra that installs it).

    Example:
        >>> values = system_metrics()
        >>> 0 <= values["system/memory_percent"] <= 100 and values["system/memory_used_bytes"] > 0
        True
    """
    psutil = _psutil("system_metrics")
    memory = psutil.virtual_memory()
    values = {
        "system/cpu_percent": float(psutil.cpu_percent(interval=None)),
        "system/memory_percent": float(memory.percent),
        "system/memory_used_bytes": float(memory.used),
        "system/memory_available_bytes": float(memory.available),
        "system/disk_percent": float(psutil.disk_usage(disk_path).percent),
    }
    disk = psutil.disk_io_counters()
    if disk is not None:
        values["system/disk_read_bytes"] = float(disk.read_bytes)
        values["system/disk_write_bytes"] = float(disk.write_bytes)
    net = psutil.net_io_counters()
    if net is not None:
        values["system/net_sent_bytes"] = float(net.bytes_sent)
        values["system/net_recv_bytes"] = float(net.bytes_recv)
    if nvml is not None:
        values.update(gpu_metrics(nvml))
    return values


class SystemMetricsMonitor(Callback):
    """Logs the machine's CPU, memory, disk, network and GPU use every ``log_interval`` (BATCH or EPOCH level).

    The values are those of :func:`system_metrics`, plus ``system/<counter>_per_sec`` for the disk and network
    counters (their rate since the previous log). GPU values come from NVML when the ``nvidia-ml-py`` package and an
    NVIDIA driver are present (imported when training starts, never at import); otherwise only the CPU values are
    logged, without an error. With ``'Nba'`` it logs after every N-th batch (at ``BATCH_END``); with ``'Nep'``, at the
    end of every N-th epoch. In a launched run the values are of the machine of the rank whose destinations log.

    Args:
        log_interval (str | Time | int): ``'10ba'``, ``'1ep'``; an int means batches.
        disk_path (str): A path on the disk whose fullness ``system/disk_percent`` reports.
        gpu (bool): Read the GPUs through NVML when it is available.

    Example:
        >>> from composer import Trainer
        >>> from composer.loggers import InMemoryLogger
        >>> memory = InMemoryLogger()
        >>> import torch
        >>> from composer.datasets import SyntheticClassificationDataset
        >>> from composer.models import MLP, ComposerClassifier
        >>> model = ComposerClassifier(MLP(in_features=8, hidden=(16,), num_classes=3), num_classes=3)
        >>> train_dataloader = torch.utils.data.DataLoader(SyntheticClassificationDataset(16, 8, 3), batch_size=4)
        >>> trainer = Trainer(model=model, train_dataloader=train_dataloader, max_duration="4ba",
        ...                   callbacks=[SystemMetricsMonitor(log_interval="2ba")], loggers=[memory], progress_bar=False)
        >>> trainer.fit()
        >>> memory.steps("system/cpu_percent")
        [2, 4]
        >>> trainer.close()
    """

    def __init__(self, log_interval: str | Time[Any] | int = "10ba", disk_path: str = "/", gpu: bool = True) -> None:
        self.log_interval: Time[int] = parse_interval(log_interval, "log_interval")
        if not isinstance(disk_path, str) or not disk_path:
            raise ValueError(f"disk_path={disk_path!r} must be a path on the disk to report, e.g. '/'.")
        _psutil("SystemMetricsMonitor")
        self.disk_path = disk_path
        self.gpu = gpu
        self._nvml: Any | None = None
        self._previous: tuple[float, dict[str, float]] | None = None  # (time, counters) at the last log

    def metric_names(self, state: State) -> list[str]:
        """The names this callback logs (for stoppers that check names before training)."""
        del state
        counters = [f"system/{c}" for c in _COUNTERS] + [f"system/{c}_per_sec" for c in _COUNTERS]
        return [
            "system/cpu_percent",
            "system/memory_percent",
            "system/memory_used_bytes",
            "system/memory_available_bytes",
            "system/disk_percent",
            *counters,
        ]

    def fit_start(self, state: State, logger: Logger) -> None:
        del state, logger
        if self.gpu and self._nvml is None:
            self._nvml = open_nvml()
        self._previous = None
        _psutil("SystemMetricsMonitor").cpu_percent(interval=None)  # starts the CPU measurement period

    def _values(self) -> dict[str, float]:
        values = system_metrics(self.disk_path, self._nvml)
        now = time.monotonic()
        if self._previous is not None:
            then, before = self._previous
            seconds = max(now - then, 1e-9)
            for counter in _COUNTERS:
                key = f"system/{counter}"
                if key in values and key in before:
                    values[f"{key}_per_sec"] = max(0.0, values[key] - before[key]) / seconds
        self._previous = (now, {f"system/{c}": values[f"system/{c}"] for c in _COUNTERS if f"system/{c}" in values})
        return values

    def batch_end(self, state: State, logger: Logger) -> None:
        unit, n = self.log_interval.unit, self.log_interval.value
        if unit == TimeUnit.BATCH and state.timer.batch.value % n == 0:
            logger.metric_batch(self._values)

    def epoch_end(self, state: State, logger: Logger) -> None:
        unit, n = self.log_interval.unit, self.log_interval.value
        if unit == TimeUnit.EPOCH and state.timer.epoch.value % n == 0:
            logger.metric_epoch(self._values)

    def close(self, state: State, logger: Logger) -> None:
        del state, logger
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None


SystemMetricsMonitorHparams = hparams_for(SystemMetricsMonitor)
"""See :class:`SystemMetricsMonitor`; the fields are its arguments (YAML key ``system_metrics_monitor``)."""
