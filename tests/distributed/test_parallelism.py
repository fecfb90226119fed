"""Parallelism, the Trainer's one handle on the process group, data sharding, wrapping and synchronisation.

Launched behaviour is covered end to end by test_distributed.py and test_fsdp_trainer.py (2 gloo ranks); here, what
a single process must get: everything passed through, nothing wrapped, no context per microbatch, and with
``grad_accum='auto'`` and FSDP, a checkpoint before every FSDP collective.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.core import DataSpec, Evaluator
from composer.core.time import Timer
from composer.distributed.parallelism import Parallelism
from composer.loggers import RANK_ZERO_DESTINATIONS, ConsoleLogger, InMemoryLogger
from composer.models import ComposerClassifier


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
    assert parallel.rank_zero_destinations(destinations, RANK_ZERO_DESTINATIONS) == destinations


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


def test_auto_microbatching_with_fsdp_puts_a_checkpoint_before_every_fsdp_collective(group_of_one):  # conftest.py
    from torch.distributed.fsdp import FSDPModule

    from tests.distributed.test_microbatching import OOMClassifier, assert_same_training, train

    units = {"module_classes": ["Linear"], "min_params": None}
    auto = train(OOMClassifier(limit=4), "auto", fsdp_config=units)
    model = auto.state.model
    sharded = [m for m in model.modules() if isinstance(m, FSDPModule)]
    assert len(sharded) == 3  # the two Linears and the root
    groups = [g for unit in sharded for g in unit._get_fsdp_state()._fsdp_param_groups]
    assert {type(g._all_gather_comm).__name__ for g in groups} == {"CheckpointedAllGather"}
    assert {type(g._reduce_scatter_comm).__name__ for g in groups} == {"CheckpointedReduceScatter"}
    # Batches of 16 run out of memory whole and in halves: the sharded model is reset and the batch runs again.
    assert auto.state.grad_accum == 4
    assert_same_training(auto, train(OOMClassifier(), 4, fsdp_config=units))
