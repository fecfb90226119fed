"""Automatic microbatching (``grad_accum='auto'``) against runs started at the count it finds.

No GPU is needed: the test model raises ``torch.cuda.OutOfMemoryError`` itself whenever one forward pass (or loss)
gets more than ``limit`` samples, after doing its work (so a failed attempt has drawn dropout masks and updated the
BatchNorm statistics, which the retry must undo). The reference is a plain run with ``grad_accum`` fixed at the
count found: the same microbatches in the same order, so the weights must match bitwise.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Trainer
from composer.algorithms import LabelSmoothing, MixUp
from composer.core import Event
from composer.distributed.microbatching import (
    MicrobatchTooSmallError,
    is_out_of_memory,
    join_outputs,
    next_grad_accum,
)
from composer.loggers import InMemoryLogger
from composer.models import ComposerClassifier
from tests.common import EventRecorder

SEED = 7
BATCH = 16
NUM_SAMPLES = 48  # 3 batches per epoch


class OOMClassifier(ComposerClassifier):
    """An MLP with BatchNorm and Dropout that runs out of memory, in ``where``, on more than ``limit`` samples."""

    def __init__(
        self,
        limit: int | None = None,
        where: str = "forward",
        error: type[Exception] | None = None,
        batchnorm: bool = True,
    ) -> None:
        torch.manual_seed(0)
        module = torch.nn.Sequential(
            torch.nn.Linear(8, 16),
            torch.nn.BatchNorm1d(16) if batchnorm else torch.nn.Identity(),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.3),
            torch.nn.Linear(16, 3),
        )
        super().__init__(module, num_classes=3)
        self.limit, self.where = limit, where
        self.error = error or torch.cuda.OutOfMemoryError
        self.forward_sizes: list[int] = []

    def _check(self, n: int, where: str) -> None:
        if self.limit is not None and where == self.where and n > self.limit:
            what = (
                "CUDA out of memory" if self.error is torch.cuda.OutOfMemoryError else "CUDA error: an illegal access"
            )
            raise self.error(f"{what}: {n} samples (limit {self.limit}).")

    def forward(self, batch: Any) -> torch.Tensor:
        outputs = super().forward(batch)  # the work is done (BatchNorm statistics, dropout draws), then it fails
        self.forward_sizes.append(outputs.shape[0])
        self._check(outputs.shape[0], "forward" if self.training else "eval")
        return outputs

    def loss(self, outputs: Any, batch: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._check(outputs.shape[0], "loss")
        return super().loss(outputs, batch, *args, **kwargs)


def loader(batch_size: int = BATCH, num_samples: int = NUM_SAMPLES, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=torch.Generator().manual_seed(1234))).argmax(dim=1)
    return DataLoader(
        TensorDataset(x, y), batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )


def train(model: OOMClassifier, grad_accum: int | str, **kwargs: Any) -> Trainer:
    kwargs.setdefault("max_duration", "2ep")
    trainer = Trainer(
        model=model,
        train_dataloader=loader(),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        grad_accum=grad_accum,
        seed=SEED,
        progress_bar=False,
        **kwargs,
    )
    trainer.fit()
    return trainer


def assert_same_training(a: Trainer, b: Trainer) -> None:
    state_a, state_b = a.state.model.state_dict(), b.state.model.state_dict()
    assert list(state_a) == list(state_b)
    for key in state_a:  # weights and BatchNorm statistics, bitwise
        assert torch.equal(state_a[key], state_b[key]), key
    momentum_a = [s["momentum_buffer"] for s in a.state.optimizers[0].state.values()]
    momentum_b = [s["momentum_buffer"] for s in b.state.optimizers[0].state.values()]
    assert all(torch.equal(x, y) for x, y in zip(momentum_a, momentum_b, strict=True))
    assert torch.equal(a.state.rng.get_state(), b.state.rng.get_state())


# ---- the pure parts --------------------------------------------------------------------------------------------------


def test_next_grad_accum_doubles_up_to_one_sample_per_microbatch():
    assert [next_grad_accum(n, 16) for n in (1, 2, 4, 8, 16)] == [2, 4, 8, 16, None]
    assert next_grad_accum(4, 6) == 6 and next_grad_accum(6, 6) is None
    assert next_grad_accum(32, 6) is None  # a count past a small last batch already means one sample each


def test_only_cuda_out_of_memory_is_recovered_from():
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"))
    assert not is_out_of_memory(RuntimeError("CUDA error: device-side assert triggered"))
    assert not is_out_of_memory(MemoryError())  # host memory: halving the microbatch is no answer


def test_join_outputs_concatenates_along_samples():
    parts = [(torch.arange(4.0).reshape(2, 2), torch.tensor(1.0)), (torch.ones(1, 2), torch.tensor(2.0))]
    joined, scalars = join_outputs(parts)
    assert torch.equal(joined, torch.tensor([[0.0, 1.0], [2.0, 3.0], [1.0, 1.0]]))
    assert scalars == [torch.tensor(1.0), torch.tensor(2.0)]


# ---- training --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["forward", "loss"])
def test_auto_finds_the_count_and_trains_as_a_run_started_at_it(where):
    # 16 samples, at most 5 at a time: 1 -> 2 (8 each) -> 4 (4 each). MixUp draws from state.rng at AFTER_DATALOADER
    # and walks the microbatches from BEFORE_TRAIN_BATCH; LabelSmoothing swaps targets around the loss (where the
    # 'loss' variant fails, between its two events).
    def algorithms() -> list[Any]:
        return [MixUp(alpha=0.4), LabelSmoothing(alpha=0.1)]

    auto_model = OOMClassifier(limit=5, where=where)
    auto = train(auto_model, "auto", algorithms=algorithms())
    assert auto.state.grad_accum == 4
    reference = train(OOMClassifier(), 4, algorithms=algorithms())
    assert_same_training(auto, reference)
    if where == "forward":  # the first batch tried 16, then 8, then 4 samples; every later batch 4 at once
        assert auto_model.forward_sizes[:7] == [16, 8, 4, 4, 4, 4, 4]
        assert set(auto_model.forward_sizes[7:]) == {4}


def test_each_batch_event_fires_once_and_the_attempt_events_again_on_a_retry():
    auto_events, reference_events = EventRecorder(), EventRecorder()
    train(OOMClassifier(limit=5), "auto", callbacks=[auto_events])
    train(OOMClassifier(), 4, callbacks=[reference_events])
    auto_count = collections.Counter(auto_events.events)
    reference_count = collections.Counter(reference_events.events)
    batches = 6
    once_per_batch = [
        Event.AFTER_DATALOADER,
        Event.BATCH_START,
        Event.AFTER_TRAIN_BATCH,
        Event.BATCH_END,
        Event.BATCH_CHECKPOINT,
    ]
    for event in once_per_batch:
        assert auto_count[event] == reference_count[event] == batches, event
    # Two failed attempts (16 and 8 samples), each opened by BEFORE_TRAIN_BATCH and stopped in its first forward.
    assert auto_count[Event.BEFORE_TRAIN_BATCH] == batches + 2
    assert auto_count[Event.BEFORE_FORWARD] == reference_count[Event.BEFORE_FORWARD] + 2
    for event in (Event.AFTER_FORWARD, Event.AFTER_LOSS, Event.AFTER_BACKWARD, Event.EPOCH_END, Event.FIT_END):
        assert auto_count[event] == reference_count[event], event
    # Nothing between BATCH_START and the first BEFORE_TRAIN_BATCH is repeated: the retry starts at the attempt.
    first = auto_events.events[auto_events.events.index(Event.BATCH_START) :][:8]
    assert first[:3] == [Event.BATCH_START, Event.BEFORE_TRAIN_BATCH, Event.BEFORE_FORWARD]
    assert first[3:5] == [Event.BEFORE_TRAIN_BATCH, Event.BEFORE_FORWARD]


def test_the_new_count_is_logged(caplog):
    memory = InMemoryLogger()
    with caplog.at_level(logging.WARNING, logger="composer.distributed.microbatching"):
        train(OOMClassifier(limit=5), "auto", loggers=[memory], max_duration="1ba")
    assert [value for _, _, value in memory.data["trainer/grad_accum"]] == [2, 4]
    assert [value for _, _, value in memory.data["trainer/microbatch_size"]] == [8, 4]
    messages = [r.getMessage() for r in caplog.records]
    assert any("with grad_accum=1 (microbatches of up to 16 samples)" in m and "grad_accum=2" in m for m in messages)
    assert any("retrying the batch with grad_accum=4 (microbatches of up to 4 samples)" in m for m in messages)


def test_an_error_that_is_not_out_of_memory_is_not_retried():
    model = OOMClassifier(limit=5, error=RuntimeError)
    with pytest.raises(RuntimeError, match="limit 5") as raised:
        train(model, "auto")
    assert not isinstance(raised.value, MicrobatchTooSmallError)
    assert model.forward_sizes == [16]


def test_a_fixed_grad_accum_does_not_catch_out_of_memory():
    model = OOMClassifier(limit=5)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        train(model, 2)
    assert model.forward_sizes == [8]


def test_out_of_memory_with_one_sample_per_microbatch_raises_a_clear_error():
    model = OOMClassifier(limit=0, batchnorm=False)  # BatchNorm refuses a batch of one sample in training
    with pytest.raises(MicrobatchTooSmallError, match="microbatches of one sample") as raised:
        train(model, "auto")
    assert "grad_accum=16 for a batch of 16 samples" in str(raised.value)
    assert "To fix" in str(raised.value)
    assert model.forward_sizes == [16, 8, 4, 2, 1]


def test_a_resumed_run_continues_at_the_count_found(tmp_path):
    first = train(OOMClassifier(limit=5), "auto", max_duration="2ba", save_folder=str(tmp_path), save_interval="1ba")
    assert first.state.grad_accum == 4
    resumed_model = OOMClassifier(limit=5)
    resumed = train(resumed_model, "auto", load_path=str(tmp_path / "ep0-ba2-rank0.pt"))
    assert resumed.state.grad_accum == 4
    assert set(resumed_model.forward_sizes) == {4}  # no attempt at 16 or 8 samples again


# ---- evaluation ------------------------------------------------------------------------------------------------------


def test_evaluation_splits_its_batches_and_equals_an_evaluation_at_the_smaller_size(caplog):
    model = OOMClassifier(limit=4, where="eval")
    auto = Trainer(model=model, train_dataloader=loader(), max_duration="1ba", grad_accum="auto", progress_bar=False)
    with caplog.at_level(logging.WARNING, logger="composer.distributed.microbatching"):
        results = auto.eval(loader(batch_size=12, num_samples=24, seed=3))
    # The first batch of 12 runs out of memory whole and in 2 parts of 6, then fits in 4 parts of 3; the second batch
    # starts at 4 parts.
    assert model.forward_sizes == [12, 6, 6, 3, 3, 3, 3, 3, 3, 3, 3][:1] + [6] + [3] * 8
    messages = [r.getMessage() for r in caplog.records]
    assert any("evaluating the batch again in 4 parts of up to 3 samples" in m for m in messages)
    reference_model = OOMClassifier()
    reference_model.load_state_dict(model.state_dict())
    reference = Trainer(model=reference_model, train_dataloader=loader(), max_duration="1ba", progress_bar=False)
    # Batches of 3 in the same shuffled order: the same metric updates, in the same order.
    assert results == reference.eval(loader(batch_size=3, num_samples=24, seed=3))
    assert results["metrics/eval/Accuracy"] > 0
    auto.close()
    reference.close()


def test_evaluation_out_of_memory_with_one_sample_per_part_raises_a_clear_error():
    model = OOMClassifier(limit=0, where="eval")
    trainer = Trainer(model=model, train_dataloader=loader(), max_duration="1ba", grad_accum="auto", progress_bar=False)
    with pytest.raises(MicrobatchTooSmallError) as raised:
        trainer.eval(loader(batch_size=4, num_samples=8, seed=3))
    message = str(raised.value)
    assert message.startswith("Out of memory evaluating 'eval' one sample at a time (CUDA out of memory: 1 samples")
    assert "To fix: make one sample fit" in message
    assert model.forward_sizes == [4, 2, 1]  # the whole batch, then 2 parts, then 4 parts: the first one fails
    trainer.close()


# ---- arguments -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "fix"),
    [
        ("automatic", ValueError, "grad_accum='auto'"),
        (0, ValueError, "grad_accum=1"),
        (-1, ValueError, "grad_accum=1"),
        (1.5, TypeError, "grad_accum=2"),
        (2.0, TypeError, "grad_accum=2"),
        (True, TypeError, "grad_accum=1"),
        (None, TypeError, "grad_accum=1"),
    ],
)
def test_a_bad_grad_accum_is_refused_naming_the_value_and_the_fix(value, error, fix):
    with pytest.raises(error) as raised:
        Trainer(model=OOMClassifier(), train_dataloader=loader(), max_duration="1ba", grad_accum=value)
    message = str(raised.value)
    named = f"grad_accum={value!r}"
    assert message.startswith(named) and message[len(named)] in " ;"  # "... is a float", or "...; expected ..."
    assert f"To fix: {fix}" in message
    assert "auto" in message


# ---- two ranks -------------------------------------------------------------------------------------------------------


@pytest.mark.dist
def test_two_ranks_agree_on_the_count_when_only_one_runs_out_of_memory(tmp_path):
    from tests.distributed.launch import REPO, WORLD_SIZE, torchrun

    result = torchrun("ddp", tmp_path, worker=REPO / "tests" / "distributed" / "microbatching_worker.py")
    assert result.returncode == 0, result.stderr[-5000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD_SIZE)]
    # Rank 1 ran out of memory at 8 and 4 samples; rank 0 never did, and still followed: 1 -> 2 -> 4 on both.
    assert [r["auto_grad_accum"] for r in ranks] == [4, 4]
    assert [r["logged"] for r in ranks] == [[2, 4], [2, 4]]
    # The heartbeat's count of forward passes leaves out the failed attempts: 4 per batch on both ranks.
    assert [r["heartbeat"] for r in ranks] == [[4, 8, 12, 16]] * WORLD_SIZE
    for key, value in ranks[0]["auto_weights"].items():
        assert torch.equal(value, ranks[1]["auto_weights"][key]), key  # every rank holds the same weights
        assert torch.equal(value, ranks[0]["reference_weights"][key]), key  # those of a DDP run at grad_accum=4
    # One sample per microbatch still too many on rank 1: both ranks raise, rank 0 naming the other rank.
    assert "on this rank" in ranks[1]["too_small"]
    assert "on another rank" in ranks[0]["too_small"]


@pytest.mark.dist
def test_fsdp_ranks_agree_at_every_collective_when_only_one_runs_out_of_memory(tmp_path):
    from tests.distributed.launch import REPO, WORLD_SIZE, torchrun

    result = torchrun("fsdp", tmp_path, worker=REPO / "tests" / "distributed" / "microbatching_worker.py")
    assert result.returncode == 0, result.stderr[-5000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD_SIZE)]
    # Where rank 1 ran out of memory -> the counts both ranks went through (8 samples per rank and batch).
    expected = {"forward": [2, 4], "backward": [2], "gather": [2]}
    for where, logged in expected.items():
        runs = [r[where] for r in ranks]
        assert [run["logged"] for run in runs] == [logged, logged], where
        assert [run["grad_accum"] for run in runs] == [logged[-1]] * WORLD_SIZE, where
        # 64 samples, 16 per batch: every batch event fired once per batch, none again on a retry.
        assert [run["batch_events"] for run in runs] == [[4, 4]] * WORLD_SIZE, where
        # Every FSDP collective was preceded by a checkpoint; a checkpoint that learnt of the other rank's failure
        # ran no collective; and both ranks ran the same collectives (none was left waiting in one).
        for run in runs:
            assert run["checkpoints"] == run["collectives"] + run["stopped"], where
        assert runs[0]["collectives"] == runs[1]["collectives"] > 0, where
        assert runs[0]["stopped"] >= 1 and runs[1]["stopped"] == 0, where  # rank 0 learnt it at a collective
        # The heartbeat counts the model's forward passes (one per microbatch) of successful attempts only, so it
        # is the same on both ranks after every batch: grad_accum passes per batch.
        count = logged[-1]
        assert [run["heartbeat"] for run in runs] == [[count, 2 * count, 3 * count, 4 * count]] * WORLD_SIZE, where
        for key, value in runs[0]["weights"].items():
            assert torch.equal(value, runs[1]["weights"][key]), (where, key)
            assert torch.equal(value, runs[0]["reference"][key]), (where, key)  # an FSDP run at the count found
    # Evaluation: both ranks went to 2 parts, then 4, and the metrics equal an evaluation that never failed.
    # Inside fit: one pass per batch, then 3 evaluation steps of 4 passes on both ranks (rank 1's third is padding).
    assert [rank["eval_heartbeat"] for rank in ranks] == [[1, 2, 3, 4, 16]] * WORLD_SIZE
    for rank in ranks:
        assert rank["eval_logged"] == [2, 4]
        assert rank["eval"] == pytest.approx(rank["eval_reference"], rel=1e-6)
    # One sample per microbatch still too many on rank 1: both ranks raise, rank 0 naming the other rank.
    assert "on this rank" in ranks[1]["too_small"]
    assert "on another rank" in ranks[0]["too_small"]
    # The same in evaluation: both ranks raise (they settle every evaluation attempt), naming where it happened.
    assert ranks[1]["eval_too_small"].startswith("Out of memory evaluating 'eval' one sample at a time (CUDA out")
    assert ranks[0]["eval_too_small"].startswith(
        "Out of memory evaluating 'eval' one sample at a time (on another rank) (see its error)"
    )
