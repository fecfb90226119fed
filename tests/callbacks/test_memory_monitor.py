import sys

import pytest
import torch

from composer import Trainer
from composer.callbacks import MemoryMonitor, MemoryMonitorHparams, memory_usage
from composer.loggers import InMemoryLogger
from tests.common import SimpleModel, make_dataloader


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_process_memory_is_the_resident_set_from_proc():
    with open("/proc/self/status") as status:
        vm_rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    usage = memory_usage("cpu")
    assert usage["memory/process_rss_bytes"] == pytest.approx(vm_rss_kb * 1024, rel=0.2)
    assert usage["memory/process_peak_rss_bytes"] >= usage["memory/process_rss_bytes"] * 0.8
    assert not any(key.startswith("memory/cuda") for key in usage)


def test_logs_every_batch_and_names_match():
    torch.manual_seed(0)
    model = SimpleModel()
    memory, monitor = InMemoryLogger(), MemoryMonitor()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        max_duration="3ba",
        callbacks=[monitor],
        loggers=[memory],
        progress_bar=False,
    )
    trainer.fit()
    logged = {k for k in memory.data if k.startswith("memory/")}
    assert logged == set(monitor.metric_names(trainer.state))
    for key in logged:
        assert memory.steps(key) == [0, 1, 2]
        assert all(isinstance(v, int) and v > 0 for v in memory.values(key))
    trainer.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_memory_on_a_gpu():
    x = torch.ones(1024, 1024, device="cuda")
    usage = memory_usage("cuda")
    assert usage["memory/cuda_allocated_bytes"] >= x.numel() * 4
    assert usage["memory/cuda_reserved_bytes"] >= usage["memory/cuda_allocated_bytes"]


def test_hparams():
    assert isinstance(MemoryMonitorHparams().initialize_object(), MemoryMonitor)
