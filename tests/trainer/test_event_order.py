"""Golden event sequences: the exact order the Trainer fires events in."""

import torch

from composer import Trainer
from composer.core import Algorithm, Callback, Event
from tests.common import EventRecorder, SimpleModel, make_dataloader

E = Event
MICROBATCH = [E.BEFORE_FORWARD, E.AFTER_FORWARD, E.BEFORE_LOSS, E.AFTER_LOSS, E.BEFORE_BACKWARD, E.AFTER_BACKWARD]


def batch(microbatches=1):
    return [
        E.AFTER_DATALOADER,
        E.BATCH_START,
        E.BEFORE_TRAIN_BATCH,
        *MICROBATCH * microbatches,
        E.AFTER_TRAIN_BATCH,
        E.BATCH_END,
        E.BATCH_CHECKPOINT,
    ]


def evaluation(num_batches):
    per_batch = [E.EVAL_BATCH_START, E.EVAL_BEFORE_FORWARD, E.EVAL_AFTER_FORWARD, E.EVAL_BATCH_END]
    return [E.EVAL_START, *per_batch * num_batches, E.EVAL_END]


def run(**kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    recorder = EventRecorder()
    trainer = Trainer(
        model=model,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[recorder],
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    trainer.close()
    return recorder


def test_two_epochs_two_batches_with_eval():
    recorder = run(
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=6, batch_size=3, seed=1),
        max_duration="2ep",
    )
    epoch = [E.EPOCH_START, *batch(), *batch(), E.EPOCH_END, *evaluation(2), E.EPOCH_CHECKPOINT]
    assert recorder.events == [E.INIT, E.FIT_START, *epoch, *epoch, E.FIT_END]


def test_grad_accum_three_on_a_batch_of_ten():
    recorder = run(train_dataloader=make_dataloader(num_samples=10, batch_size=10), max_duration="1ep", grad_accum=3)
    expected = [E.INIT, E.FIT_START, E.EPOCH_START, *batch(microbatches=3), E.EPOCH_END, E.EPOCH_CHECKPOINT, E.FIT_END]
    assert recorder.events == expected


def test_batch_eval_interval_and_mid_epoch_stop():
    recorder = run(
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),  # 3 batches per epoch
        eval_dataloader=make_dataloader(num_samples=3, batch_size=3, seed=1),
        eval_interval="2ba",
        max_duration="4ba",
    )
    expected = [
        E.INIT,
        E.FIT_START,
        E.EPOCH_START,
        *batch(),
        *batch()[:-1],
        *evaluation(1),
        E.BATCH_CHECKPOINT,
        *batch(),
        E.EPOCH_END,
        E.EPOCH_CHECKPOINT,
        E.EPOCH_START,
        *batch()[:-1],  # the run stops in the middle of the second epoch, which stays open: no EPOCH_END
        *evaluation(1),  # the weights fit ends with, before the final checkpoint
        E.BATCH_CHECKPOINT,
        E.FIT_END,
    ]
    assert recorder.events == expected


def test_a_batch_duration_that_ends_an_epoch_ends_it():
    recorder = run(train_dataloader=make_dataloader(num_samples=12, batch_size=4), max_duration="3ba")
    epoch = [E.EPOCH_START, *batch(), *batch(), *batch(), E.EPOCH_END, E.EPOCH_CHECKPOINT]
    assert recorder.events == [E.INIT, E.FIT_START, *epoch, E.FIT_END]


def test_timer_seen_at_each_event():
    recorder = run(train_dataloader=make_dataloader(num_samples=8, batch_size=4), max_duration="1ep")
    seen = {}
    for event, batch_count, epoch in recorder.times:
        seen.setdefault(event, []).append((batch_count, epoch))
    assert seen[E.BATCH_START] == [(0, 0), (1, 0)]  # before the batch is counted
    assert seen[E.AFTER_TRAIN_BATCH] == [(0, 0), (1, 0)]
    assert seen[E.BATCH_END] == [(1, 0), (2, 0)]  # after
    assert seen[E.EPOCH_END] == [(2, 1)]


class TwiceClosureSGD(torch.optim.SGD):
    """An optimizer that evaluates its closure twice per step, as SAM does."""

    def step(self, closure=None):
        closure()
        return super().step(closure)


def test_optimizer_calling_closure_twice_reruns_train_batch_events():
    torch.manual_seed(0)
    model = SimpleModel()
    recorder = EventRecorder()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=4, batch_size=4),
        max_duration="1ba",
        optimizers=TwiceClosureSGD(model.parameters(), lr=0.1),
        callbacks=[recorder],
        progress_bar=False,
    ).fit()
    train_batch = [E.BEFORE_TRAIN_BATCH, *MICROBATCH, E.AFTER_TRAIN_BATCH]
    expected_batch = [E.AFTER_DATALOADER, E.BATCH_START, *train_batch, *train_batch, E.BATCH_END, E.BATCH_CHECKPOINT]
    assert recorder.events[3:-3] == expected_batch


def test_stop_training_finishes_the_batch_and_closing_events():
    class StopAtSecondBatch(EventRecorder):
        def run_event(self, event, state, logger):
            super().run_event(event, state, logger)
            if event == E.BATCH_START and int(state.timer.batch) == 1:
                state.stop_training("enough")

    torch.manual_seed(0)
    model = SimpleModel()
    recorder = StopAtSecondBatch()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=3, batch_size=3, seed=1),
        max_duration="3ep",
        callbacks=[recorder],
        progress_bar=False,
    )
    trainer.fit()
    assert recorder.events == [
        E.INIT,
        E.FIT_START,
        E.EPOCH_START,
        *batch(),
        *batch()[:-1],  # the epoch's data is not exhausted: it stays open, without EPOCH_END
        *evaluation(1),
        E.BATCH_CHECKPOINT,
        E.FIT_END,
    ]
    assert trainer.state.stop_reason == "enough"
    assert int(trainer.state.timer.batch) == 2


def test_algorithms_see_events_in_the_same_order():
    seen = []

    class Spy(Algorithm):
        def match(self, event, state):
            return True

        def apply(self, event, state, logger):
            seen.append(event)

    torch.manual_seed(0)
    model = SimpleModel()
    recorder = EventRecorder()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=4, batch_size=2),
        max_duration="1ep",
        algorithms=[Spy()],
        callbacks=[recorder],
        progress_bar=False,
    ).fit()
    assert seen == recorder.events


def test_a_callback_added_mid_batch_sees_the_rest_of_that_batch():
    # Events nobody handles are skipped (after the first batch found them quiet); a listener added in the middle of
    # a later batch must still be reached at once.
    late = EventRecorder()

    class AddInSecondBatch(Callback):  # handles AFTER_FORWARD only, so every other event is quiet until then
        def after_forward(self, state, logger):
            if int(state.timer.batch) == 1 and late not in state.callbacks:
                state.callbacks.append(late)

    torch.manual_seed(0)
    model = SimpleModel()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        max_duration="2ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[AddInSecondBatch()],
        progress_bar=False,
    ).fit()
    after_forward = MICROBATCH.index(E.AFTER_FORWARD)
    rest_of_batch = [*MICROBATCH[after_forward + 1 :], E.AFTER_TRAIN_BATCH, E.BATCH_END, E.BATCH_CHECKPOINT]
    assert late.events == [*rest_of_batch, E.EPOCH_END, E.EPOCH_CHECKPOINT, E.FIT_END]
