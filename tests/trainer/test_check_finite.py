"""The Trainer's default check of the loss (check_finite): a NaN or infinite loss stops the run naming the batch, no
checkpoint of non-finite weights is written, and no device sync is added per batch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from composer import Algorithm, Callback, Event, Trainer
from composer.callbacks import NaNMonitor, NonFiniteLossError
from composer.callbacks.nan_monitor import DeferredNaNMonitor
from composer.config import TrainerHparams
from composer.core import Logger, State
from composer.utils.checkpoint import read_checkpoint
from tests.common import SimpleModel, make_dataloader


class PoisonBatch(Callback):
    """Makes the inputs of batch ``at`` (0-based) infinite: its loss is NaN and the step makes the weights NaN."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger
        if int(state.timer.batch) == self.at:
            x, _ = state.batch
            x.fill_(float("inf"))


def make_trainer(num_samples: int = 16, callbacks: list[Callback] | None = None, **kwargs: Any) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    kwargs.setdefault("max_duration", "2ep")
    return Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=num_samples, batch_size=4),  # 4 batches an epoch
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=callbacks or [],
        progress_bar=False,
        seed=0,
        **kwargs,
    )


def finite(weights: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(value).all()) for value in weights.values())


def test_a_nan_loss_stops_the_run_by_default_naming_the_batch() -> None:
    trainer = make_trainer(callbacks=[PoisonBatch(at=5)])
    assert [type(c) for c in trainer.state.callbacks] == [DeferredNaNMonitor, PoisonBatch]
    with pytest.raises(NonFiniteLossError) as error:
        trainer.fit()
    message = str(error.value)
    assert "The training loss was nan at batch 5 (epoch 1, batch 1 of the epoch)" in message
    assert "found at the end of the epoch, after batch 7" in message and "2 more batch(es)" in message
    assert "check_finite=False" in message
    assert int(trainer.state.timer.epoch) == 2 and int(trainer.state.timer.batch) == 8  # stopped at epoch 1's end


def test_an_infinite_loss_is_caught_too_and_a_finite_run_is_untouched() -> None:
    class InfiniteLossAt(Algorithm):
        def match(self, event: Event, state: State) -> bool:
            return event is Event.AFTER_LOSS and int(state.timer.batch) == 2

        def apply(self, event: Event, state: State, logger: Logger) -> None:
            del event, logger
            state.loss = state.loss * float("inf")

    with pytest.raises(NonFiniteLossError, match=r"loss was inf at batch 2 \(epoch 0, batch 2 of the epoch"):
        make_trainer(algorithms=[InfiniteLossAt()]).fit()
    trainer = make_trainer()
    trainer.fit()
    assert int(trainer.state.timer.epoch) == 2 and finite(trainer.state.model.state_dict())


def test_no_checkpoint_of_non_finite_weights_is_written(tmp_path: Path) -> None:
    trainer = make_trainer(callbacks=[PoisonBatch(at=5)], save_folder=str(tmp_path), save_interval="1ba")
    with pytest.raises(NonFiniteLossError, match=r"batch 5 .*found before a checkpoint is written, after batch 5"):
        trainer.fit()
    # Batch 5's loss went NaN and its step made the weights NaN: its checkpoint (ba6) and later ones never exist.
    saved = sorted(p.name for p in tmp_path.glob("ep*.pt"))
    assert saved == ["ep0-ba1-rank0.pt", "ep0-ba2-rank0.pt", "ep0-ba3-rank0.pt", "ep0-ba4-rank0.pt", "ep1-ba5-rank0.pt"]
    for name in saved:
        assert finite(read_checkpoint(tmp_path / name)["state"]["model"]), name
    assert (tmp_path / "latest-rank0.pt").resolve().name == "ep1-ba5-rank0.pt"  # what autoresume would pick


def test_check_finite_false_trains_on_and_saves_what_there_is(tmp_path: Path) -> None:
    trainer = make_trainer(
        callbacks=[PoisonBatch(at=5)], save_folder=str(tmp_path), save_interval="1ep", check_finite=False
    )
    assert not any(isinstance(c, (NaNMonitor, DeferredNaNMonitor)) for c in trainer.state.callbacks)
    trainer.fit()
    assert int(trainer.state.timer.batch) == 8
    assert not finite(read_checkpoint(tmp_path / "ep2-ba8-rank0.pt")["state"]["model"])
    assert not finite(read_checkpoint(trainer.save_checkpoint(tmp_path / "by-hand.pt"))["state"]["model"])


def test_a_checkpoint_saved_by_hand_refuses_non_finite_weights_naming_them(tmp_path: Path) -> None:
    trainer = make_trainer()
    with torch.no_grad():
        trainer.state.model.module[2].bias[1] = float("nan")
    with pytest.raises(ValueError, match=r"weight 'module\.2\.bias' is not finite \(1 NaN and 0 infinite of 3"):
        trainer.save_checkpoint(tmp_path / "ckpt.pt")
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_nan_monitor_replaces_the_deferred_one() -> None:
    trainer = make_trainer(callbacks=[PoisonBatch(at=5), NaNMonitor()])
    assert not any(isinstance(c, DeferredNaNMonitor) for c in trainer.state.callbacks)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at batch 5 .* before the optimizer step"):
        trainer.fit()
    assert int(trainer.state.timer.batch) == 5 and finite(trainer.state.model.state_dict())


def test_the_hparams_field_reaches_the_trainer() -> None:
    tiny = {
        "model": {"mlp": {"in_features": 16, "hidden": [8]}},
        "train_dataset": {"synthetic_classification": {"shape": [16], "num_samples": 16}},
        "train_batch_size": 4,
        "max_duration": "2ba",
        "progress_bar": False,
        "seed": 0,
    }
    assert TrainerHparams.from_dict(tiny).check_finite is True
    for value in (True, False):
        trainer = TrainerHparams.from_dict({**tiny, "check_finite": value}).initialize_object()
        assert any(isinstance(c, DeferredNaNMonitor) for c in trainer.state.callbacks) is value
        trainer.close()


# ---- no device sync per batch --------------------------------------------------------------------------------------

# Every way a tensor's value reaches the host: on CUDA each one waits for the device (a sync).
_READS = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__", "cpu", "numpy")


@contextlib.contextmanager
def count_host_reads() -> Iterator[list[int]]:
    count = [0]
    originals = {name: getattr(torch.Tensor, name) for name in _READS}

    def counting(name: str) -> Any:
        original = originals[name]

        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return original(self, *args, **kwargs)

        return read

    try:
        for name in _READS:
            setattr(torch.Tensor, name, counting(name))
        yield count
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def reads_during_fit(check_finite: bool, batches_per_epoch: int, grad_accum: int = 1) -> int:
    trainer = make_trainer(num_samples=4 * batches_per_epoch, check_finite=check_finite, grad_accum=grad_accum)
    with count_host_reads() as count:
        trainer.fit()
    trainer.close()
    return count[0]


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_the_check_adds_no_host_read_per_batch(grad_accum: int) -> None:
    # The check's reads (check on minus check off) are the same for 4 and for 40 batches an epoch: one at each
    # epoch's end (the end of fit finds nothing new to read), none per batch or microbatch. On CUDA each read is
    # the only sync the check adds: what it does per batch (keep a reference to the batch's loss, already detached;
    # every 256 batches one torch.stack) queues no read.
    added = [
        reads_during_fit(True, batches, grad_accum) - reads_during_fit(False, batches, grad_accum)
        for batches in (4, 40)
    ]
    assert added == [2, 2]


def test_the_counter_sees_the_eager_monitors_reads() -> None:
    # The counting is not vacuous: the eager NaNMonitor reads once per microbatch, so its count grows with batches.
    def eager(batches: int) -> int:
        trainer = make_trainer(num_samples=4 * batches, callbacks=[NaNMonitor()], check_finite=False)
        with count_host_reads() as count:
            trainer.fit()
        trainer.close()
        return count[0] - reads_during_fit(False, batches)

    assert eager(4) == 2 * 4 and eager(40) == 2 * 40
