import math

import pytest
import torch

from composer import Trainer
from composer.callbacks import LRMonitor, LRMonitorHparams
from composer.loggers import InMemoryLogger
from composer.optim import cosine_annealing_scheduler, linear_scheduler
from tests.common import SimpleModel, make_dataloader


def train(optimizer_fn, schedulers, max_duration="2ep", **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    memory = InMemoryLogger()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        max_duration=max_duration,
        optimizers=optimizer_fn(model),
        schedulers=schedulers,
        callbacks=[LRMonitor()],
        loggers=[memory],
        progress_bar=False,
        **kwargs,
    )
    trainer.fit()
    trainer.close()
    return memory


def test_logs_the_rate_the_linear_schedule_produced_for_each_batch():
    memory = train(lambda m: torch.optim.SGD(m.parameters(), lr=0.5), linear_scheduler)
    # linear_scheduler goes from 1.0 to 0.0 over the run: batch n of 6 trains at 0.5 * (1 - n / 6).
    assert memory.steps("lr-SGD/group0") == [0, 1, 2, 3, 4, 5]
    assert memory.values("lr-SGD/group0") == pytest.approx([0.5 * (1 - n / 6) for n in range(6)])


def test_every_param_group_and_a_cosine_schedule():
    def two_groups(model):
        first, second = model.module[0], model.module[2]
        return torch.optim.Adam([{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.01}], lr=0.1)

    memory = train(two_groups, cosine_annealing_scheduler, max_duration="4ba")
    factors = [0.5 * (1 + math.cos(math.pi * n / 4)) for n in range(4)]
    assert memory.values("lr-Adam/group0") == pytest.approx([0.1 * f for f in factors], abs=1e-9)
    assert memory.values("lr-Adam/group1") == pytest.approx([0.01 * f for f in factors], abs=1e-9)


def test_a_torch_scheduler_stepped_per_epoch():
    torch.manual_seed(0)
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    memory = InMemoryLogger()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        max_duration="2ep",
        optimizers=optimizer,
        schedulers=torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5),
        step_schedulers_every_batch=False,
        callbacks=[LRMonitor()],
        loggers=[memory],
        progress_bar=False,
    ).fit()
    assert memory.values("lr-SGD/group0") == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]


def test_metric_names_and_hparams():
    model = SimpleModel()
    from composer.core import State

    state = State(model=model, max_duration="1ep", optimizers=[torch.optim.SGD(model.parameters(), lr=1)] * 2)
    assert LRMonitor().metric_names(state) == ["lr-SGD-0/group0", "lr-SGD-1/group0"]
    assert isinstance(LRMonitorHparams().initialize_object(), LRMonitor)
