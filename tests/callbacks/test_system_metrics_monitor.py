import sys
import types

import pytest
import torch

from composer import Trainer
from composer.callbacks import (
    SystemMetricsMonitor,
    SystemMetricsMonitorHparams,
    gpu_metrics,
    open_nvml,
    system_metrics,
)
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader

pytest.importorskip("psutil", reason="the loggers extra is not installed (pip install -e '.[loggers]')")

PERCENTS = ["system/cpu_percent", "system/memory_percent", "system/disk_percent"]
BYTES = ["system/memory_used_bytes", "system/memory_available_bytes"]


def train(monitor, duration="4ba"):
    torch.manual_seed(0)
    memory = InMemoryLogger()
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=duration,
        callbacks=[monitor],
        loggers=[memory],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return memory


def test_cpu_metrics_are_plausible():
    values = system_metrics()
    for key in PERCENTS:
        assert type(values[key]) is float and 0 <= values[key] <= 100, key
    for key in BYTES:
        assert type(values[key]) is float and values[key] > 0, key
    assert (
        values["system/memory_used_bytes"]
        < values["system/memory_used_bytes"] + values["system/memory_available_bytes"]
    )
    counters = [k for k in values if k.startswith(("system/disk_", "system/net_")) and k.endswith("_bytes")]
    assert all(values[k] >= 0 and float(values[k]).is_integer() for k in counters)


def test_logs_at_the_interval_with_rates_and_without_gpus_here(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML absent: importing it fails
    assert open_nvml() is None
    memory = train(SystemMetricsMonitor(log_interval="2ba"))
    assert memory.steps("system/cpu_percent") == [2, 4]
    assert all(0 <= v <= 100 for key in PERCENTS for v in memory.values(key))
    assert not any(key.startswith("system/gpu") for key in memory.data)
    for key in memory.data:
        if key.endswith("_per_sec"):
            assert memory.steps(key) == [4] and memory.values(key)[0] >= 0  # a rate needs a previous log


def test_epoch_interval():
    memory = train(SystemMetricsMonitor(log_interval="1ep", gpu=False), duration="2ep")
    assert memory.steps("system/memory_percent") == [4, 8]


def fake_nvml(fail_init=False):
    """A stand-in for pynvml with two GPUs, the second unable to report its utilisation."""
    nvml = types.ModuleType("pynvml")
    calls = []

    def init():
        calls.append("init")
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def utilization(handle):
        if handle == 1:
            raise RuntimeError("Not Supported")
        return types.SimpleNamespace(gpu=37)

    nvml.nvmlInit = init
    nvml.nvmlShutdown = lambda: calls.append("shutdown")
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    nvml.nvmlDeviceGetUtilizationRates = utilization
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(h + 1) * 2**30, total=4 * 2**30)
    nvml.calls = calls
    return nvml


def test_gpu_metrics_through_nvml(monkeypatch):
    nvml = fake_nvml()
    assert gpu_metrics(nvml) == {
        "system/gpu0/utilization_percent": 37.0,
        "system/gpu0/memory_used_bytes": 2.0**30,
        "system/gpu0/memory_total_bytes": 4 * 2.0**30,
        "system/gpu0/memory_percent": 25.0,
        "system/gpu1/memory_used_bytes": 2 * 2.0**30,
        "system/gpu1/memory_total_bytes": 4 * 2.0**30,
        "system/gpu1/memory_percent": 50.0,
    }
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    memory = train(SystemMetricsMonitor(log_interval="2ba"))
    assert memory.values("system/gpu0/utilization_percent") == [37.0, 37.0]
    assert nvml.calls == ["init", "shutdown"]
    failing = fake_nvml(fail_init=True)
    monkeypatch.setitem(sys.modules, "pynvml", failing)
    memory = train(SystemMetricsMonitor(log_interval="2ba"))  # NVML fails to start: CPU values only, no error
    assert "system/cpu_percent" in memory.data and not any(k.startswith("system/gpu") for k in memory.data)


def test_missing_psutil_and_bad_arguments(monkeypatch):
    with pytest.raises(ValueError, match="log_interval='1dur'"):
        SystemMetricsMonitor(log_interval="1dur")
    with pytest.raises(ValueError, match="disk_path=''"):
        SystemMetricsMonitor(disk_path="")
    with pytest.raises(ValueError, match="log_interval"):
        SystemMetricsMonitorHparams(log_interval="0ep")
    built = SystemMetricsMonitorHparams.from_dict({"log_interval": "3ba", "gpu": False}).initialize_object()
    assert built.log_interval.value == 3 and built.gpu is False
    monkeypatch.setitem(sys.modules, "psutil", None)
    with pytest.raises(ImportError, match=r"pip install 'opencomposer\[loggers\]'"):
        SystemMetricsMonitor()
