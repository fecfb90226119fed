"""A run stopped mid-epoch by a duration in batches leaves the epoch open: resumed, extended or fit again, it trains
exactly the batches, and ends with exactly the weights, of an uninterrupted run of the final duration."""

from __future__ import annotations

import functools

import torch
from torch.utils.data import DataLoader

from composer import Callback, Event, Trainer
from composer.algorithms import SWA
from composer.optim.scheduler_functions import step_scheduler
from composer.utils.checkpoint import find_checkpoints
from tests.common import EventRecorder, SimpleModel, make_dataloader

BATCHES_PER_EPOCH = 23
PATTERN = "ep{epoch}-ba{batch}-rank{rank}.pt"


def make_trainer(max_duration: str, **kwargs) -> Trainer:
    """The shared tiny model on 23 shuffled batches per epoch, with momentum, a schedule in batches (composer) and
    one in epochs (torch, stepped at each epoch end): each breaks bitwise equality if a batch or an epoch end is
    trained twice, skipped, or seen at another batch. The loader shuffles from torch's global generator, which the
    evaluation of the weights fit ends with (an extra one, in a run that stops early) must leave as it found it."""
    torch.manual_seed(0)
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    per_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    dataset = make_dataloader(num_samples=4 * BATCHES_PER_EPOCH).dataset
    return Trainer(
        model=model,
        train_dataloader=DataLoader(dataset, batch_size=4, shuffle=True),
        eval_dataloader=make_dataloader(num_samples=8, seed=1),
        max_duration=max_duration,
        optimizers=optimizer,
        schedulers=[functools.partial(step_scheduler, step_size="7ba", gamma=0.8), per_epoch],
        step_schedulers_every_batch=False,  # the torch scheduler steps at epoch ends only
        progress_bar=False,
        seed=7,
        **kwargs,
    )


def final_weights(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.state.model.parameters()]


def assert_bitwise_equal(got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


@functools.cache
def uninterrupted(max_duration: str) -> tuple[list[torch.Tensor], int, int]:
    with make_trainer(max_duration) as trainer:
        trainer.fit()
        return final_weights(trainer), int(trainer.state.timer.batch), int(trainer.state.timer.epoch)


def test_a_batch_duration_that_stops_mid_epoch_does_not_count_the_epoch(tmp_path):
    recorder = EventRecorder()
    with make_trainer("10ba", save_folder=str(tmp_path), save_filename=PATTERN, callbacks=[recorder]) as trainer:
        trainer.fit()
        timer = trainer.state.timer
        assert (int(timer.epoch), int(timer.batch), int(timer.batch_in_epoch)) == (0, 10, 10)
    assert [p.name for p in find_checkpoints(tmp_path, PATTERN)] == ["ep0-ba10-rank0.pt"]
    assert "epoch_end" not in [e.value for e in recorder.events]


def test_autoresume_extends_a_mid_epoch_stop_to_two_epochs_bitwise(tmp_path):
    with make_trainer("10ba", save_folder=str(tmp_path), save_filename=PATTERN, run_name="r", autoresume=True) as t:
        t.fit()
    with make_trainer("2ep", save_folder=str(tmp_path), save_filename=PATTERN, run_name="r", autoresume=True) as t:
        assert int(t.state.timer.batch) == 10  # resumed at the open epoch
        t.fit()
        weights, batches, epochs = final_weights(t), int(t.state.timer.batch), int(t.state.timer.epoch)
    assert (batches, epochs) == uninterrupted("2ep")[1:] == (2 * BATCHES_PER_EPOCH, 2)
    assert_bitwise_equal(weights, uninterrupted("2ep")[0])


def test_fit_for_more_batches_continues_the_open_epoch_bitwise():
    with make_trainer("10ba") as trainer:
        trainer.fit()
        trainer.fit(duration="10ba")
        weights = final_weights(trainer)
        assert (int(trainer.state.timer.batch), int(trainer.state.timer.epoch)) == (20, 0)
    assert_bitwise_equal(weights, uninterrupted("20ba")[0])


def test_new_data_ends_the_open_epoch_and_starts_a_new_one():
    recorder = EventRecorder()
    new_data = make_dataloader(num_samples=20, batch_size=4, seed=3)  # 5 batches, in order

    class FirstBatch(Callback):
        def after_dataloader(self, state, logger):
            seen.append(state.batch[0])

    seen: list[torch.Tensor] = []
    with make_trainer("10ba", callbacks=[recorder, FirstBatch()]) as trainer:
        trainer.fit()
        count = len(recorder.events)
        trainer.fit(train_dataloader=new_data, duration="2ba")
        timer = trainer.state.timer
        assert (int(timer.epoch), int(timer.batch), int(timer.batch_in_epoch)) == (1, 12, 2)
    second_fit = recorder.events[count:]
    assert second_fit[:2] == [Event.FIT_START, Event.EPOCH_END]  # the open epoch ends, with none of the new data
    assert second_fit.count(Event.EPOCH_START) == 1
    expected = [x for x, _ in new_data][:2]
    assert all(torch.equal(a, b) for a, b in zip(seen[10:], expected, strict=True))


def test_swa_puts_its_average_in_at_the_last_batch_of_a_run_that_stops_mid_epoch():
    torch.manual_seed(0)
    model = SimpleModel()
    swa = SWA(swa_start=0.5)
    with Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),  # 4 batches an epoch
        max_duration="10ba",
        algorithms=[swa],
        progress_bar=False,
    ) as trainer:
        trainer.fit()
    assert swa.num_averaged == 2  # the epoch end at batch 8 (80% of the run) and the last batch, 10
    assert swa.training_weights is not None and swa.swa_weights is not None
    assert all(torch.equal(p, swa.swa_weights[n]) for n, p in model.named_parameters())
