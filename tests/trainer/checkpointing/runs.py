"""The runs the Trainer's checkpoint tests train: a small one (:func:`make_trainer`) and one that draws on every source
of randomness at once (:func:`exact_trainer`), with what compares them bitwise."""

import functools

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from composer import Callback, Trainer
from composer.algorithms import LabelSmoothing, MixUp, SelectiveBackprop
from composer.models import ComposerClassifier
from composer.optim.scheduler_functions import cosine_annealing_scheduler
from tests.common import SimpleModel, make_dataloader

NUM_SAMPLES, BATCH_SIZE = 22, 4  # 6 batches an epoch, the last one short


class NoisyDataset(Dataset):
    """Fixed points plus fresh uniform noise at every access: a random transform, drawn from torch's global RNG (or
    the worker's)."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(NUM_SAMPLES, 6, generator=g)
        self.y = torch.randint(0, 3, (NUM_SAMPLES,), generator=g)

    def __len__(self):
        return NUM_SAMPLES

    def __getitem__(self, i):
        return self.x[i] + 0.1 * torch.rand(6), self.y[i]


class Crash(Exception):
    pass


class CrashAt(Callback):
    """Simulates the process dying in the middle of batch ``batch`` (after its backward, before its update)."""

    def __init__(self, batch):
        self.batch = batch

    def after_backward(self, state, logger):
        if state.timer.batch.value + 1 == self.batch:
            raise Crash


def exact_trainer(folder, num_workers=0, crash_at=None, **kwargs):
    """Every source of randomness at once: shuffling without a generator, a random transform (in the main process or
    in workers), Dropout, MixUp, LabelSmoothing and SelectiveBackprop, a composer scheduler."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
    model = ComposerClassifier(net, num_classes=3)
    kwargs.setdefault("max_duration", "3ep")
    return Trainer(
        model=model,
        train_dataloader=DataLoader(NoisyDataset(), batch_size=BATCH_SIZE, shuffle=True, num_workers=num_workers),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        schedulers=functools.partial(cosine_annealing_scheduler),
        algorithms=[
            MixUp(alpha=0.2),
            LabelSmoothing(alpha=0.1),
            SelectiveBackprop(start=0.3, end=0.9, keep=0.5, scale_factor=1.0, interrupt=2),
        ],
        callbacks=[CrashAt(crash_at)] if crash_at else [],
        seed=7,
        deterministic_mode=True,
        progress_bar=False,
        save_folder=str(folder),
        save_interval="3ba",
        run_name="exact",
        **kwargs,
    )


def weights(trainer):
    return [p.detach().clone() for p in trainer.state.model.parameters()]


def assert_bitwise_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), (x - y).abs().max()


@functools.cache
def uninterrupted(num_workers):
    import tempfile

    trainer = exact_trainer(tempfile.mkdtemp(), num_workers)
    trainer.fit()
    trainer.close()
    return weights(trainer)


def crash_then_resume(folder, num_workers, crash_at):
    first = exact_trainer(folder, num_workers, crash_at=crash_at, autoresume=True)
    with pytest.raises(Crash):
        first.fit()
    second = exact_trainer(folder, num_workers, autoresume=True)  # the same command again
    second.fit()
    second.close()
    return first, second


def make_trainer(model=None, **kwargs):
    torch.manual_seed(0)
    model = model or SimpleModel()
    kwargs.setdefault("train_dataloader", make_dataloader(num_samples=16, batch_size=4))
    kwargs.setdefault("max_duration", "1ep")
    kwargs.setdefault("optimizers", torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    return Trainer(model=model, progress_bar=False, seed=0, **kwargs)
