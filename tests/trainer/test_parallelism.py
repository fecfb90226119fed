"""Parallelism, the Trainer's one handle on the process group, data sharding, wrapping and synchronisation.

Launched behaviour is covered end to end by test_distributed.py and test_fsdp_trainer.py (2 gloo ranks); here, what
a single process must get: everything passed through, nothing wrapped, no context per microbatch, and the refusal of
``grad_accum='auto'`` with FSDP, named with its reason and the fix.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.core import DataSpec, Evaluator
from composer.core.time import Timer
from composer.loggers import ConsoleLogger, InMemoryLogger
from composer.models import ComposerClassifier
from composer.trainer.parallelism import Parallelism


def tiny_model() -> ComposerClassifier:
    torch.manual_seed(0)
    return ComposerClassifier(torch.nn.Linear(4, 2), num_classes=2)


def tiny_loader() -> DataLoader:
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    return DataLoader(TensorDataset(x, y), batch_size=4)


def test_unlaunched_everything_passes_through():
    parallel = Parallelism(device="cpu", dist_timeout=30.0)
    assert not parallel.launched and parallel.fsdp_config is None and not parallel.sharded_checkpoints
    assert parallel.agree_on_seed(123) == 123
    spec = DataSpec(tiny_loader())
    assert parallel.shard_train_data(spec, seed=0) is spec
    evaluator = Evaluator(label="eval", dataloader=tiny_loader())
    assert parallel.shard_evaluator(evaluator) is evaluator
    assert parallel.totals(spec, 4, None) == (4, 0)
    assert parallel.totals(spec, 4, 12) == (4, 12)
    assert list(parallel.eval_batches(iter("ab"), pad=lambda batch: pytest.fail("no padding unlaunched"))) == ["a", "b"]
    destinations = [ConsoleLogger(), InMemoryLogger()]
    assert parallel.rank_zero_destinations(destinations) == destinations


def test_unlaunched_prepare_moves_loads_and_wraps_nothing():
    parallel = Parallelism(device="cpu", dist_timeout=30.0)
    model = tiny_model()
    loaded = []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = list(model.parameters())
    parallel.prepare(model, [optimizer], find_unused_parameters=False, seed=1, load=lambda: loaded.append(True))
    assert loaded == [True]
    assert parallel.model is model and parallel.ddp_model is None
    assert list(model.parameters()) == before  # the same parameter objects: nothing replaced
    for final in (False, True):
        assert isinstance(parallel.sync_context(final), contextlib.nullcontext)
        assert isinstance(parallel.sync_context(final, deferred=True), contextlib.nullcontext)


def test_unlaunched_running_adds_no_rank_note():
    parallel = Parallelism(device="cpu", dist_timeout=30.0)
    with pytest.raises(ValueError) as caught, parallel.running(Timer()):
        raise ValueError("boom")
    assert not getattr(caught.value, "__notes__", [])


def test_the_trainer_talks_to_one_parallelism():
    trainer = Trainer(model=tiny_model(), train_dataloader=tiny_loader(), max_duration="1ba", progress_bar=False)
    assert isinstance(trainer.parallel, Parallelism)
    assert trainer.device == trainer.parallel.device
    assert trainer.ddp_model is None and trainer.fsdp_config is None
    assert trainer.parallel.model is trainer.state.model
    trainer.close()


def test_auto_microbatching_with_fsdp_is_refused_with_the_reason_and_the_fix(group_of_one):  # tests/trainer/conftest.py
    with pytest.raises(ValueError) as caught:
        Trainer(
            model=tiny_model(),
            train_dataloader=tiny_loader(),
            max_duration="1ba",
            grad_accum="auto",
            fsdp_config={"min_params": None},
            progress_bar=False,
        )
    message = str(caught.value)
    assert "grad_accum='auto' cannot be combined with fsdp_config" in message
    assert "collective" in message and "hang" in message  # why
    assert "fixed grad_accum=N" in message and "DISTRIBUTED.md" in message  # what to do
