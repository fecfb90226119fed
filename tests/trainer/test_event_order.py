"""Golden event sequences: the exact order the Trainer fires events in."""

import signal

import pytest
import torch

from composer import Trainer
from composer.core import Algorithm, Callback, Event
from composer.trainer.preemption import Preempted
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


def evaluated_at(*batches_with_eval, total=4):
    """Batches 1..total, with an evaluation after the BATCH_END of each of ``batches_with_eval``."""
    events = []
    for number in range(1, total + 1):
        events += [*batch()[:-1], *evaluation(1), E.BATCH_CHECKPOINT] if number in batches_with_eval else batch()
    return events


@pytest.mark.parametrize(
    ("max_duration", "eval_interval", "at_fit_end", "expected_batches", "at_end"),
    [
        # The weights fit ends with are evaluated after the last EPOCH_END, before EPOCH_CHECKPOINT: an interval
        # that does not divide the run adds an evaluation there, and one due at the last batch waits until then.
        ("4ba", "3ba", True, evaluated_at(3), evaluation(1)),
        ("4ba", "2ba", True, evaluated_at(2), evaluation(1)),
        # A run in epochs is not over at the last BATCH_END: the evaluation due there runs, and not again at the end.
        ("1ep", "2ba", True, evaluated_at(2, 4), []),
        ("4ba", "3ba", False, evaluated_at(3), []),
        ("4ba", "2ba", False, evaluated_at(2, 4), []),
    ],
)
def test_eval_at_fit_end(max_duration, eval_interval, at_fit_end, expected_batches, at_end):
    recorder = run(
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),  # 4 batches per epoch
        eval_dataloader=make_dataloader(num_samples=3, batch_size=3, seed=1),
        eval_interval=eval_interval,
        eval_at_fit_end=at_fit_end,
        max_duration=max_duration,
    )
    expected = [E.INIT, E.FIT_START, E.EPOCH_START, *expected_batches, E.EPOCH_END, *at_end, E.EPOCH_CHECKPOINT]
    assert recorder.events == [*expected, E.FIT_END]


class SignalAt(EventRecorder):
    """Records the events and ``close``, and sends SIGTERM to this process at ``event`` of batch ``batch`` (0-based:
    the batch count when it fires), once."""

    def __init__(self, event: Event, batch: int) -> None:
        super().__init__()
        self.at: tuple[Event, int] | None = (event, batch)

    def run_event(self, event, state, logger):
        super().run_event(event, state, logger)
        if self.at == (event, int(state.timer.batch)):
            self.at = None
            signal.raise_signal(signal.SIGTERM)

    def close(self, state, logger):
        self.events.append("close")


@pytest.fixture
def sigterm_guard():
    """A SIGTERM handler of the test's own, in place outside fit: a signal the Trainer misses does not end pytest."""
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    yield received
    signal.signal(signal.SIGTERM, previous)


def preempted_run(tmp_path, recorder: SignalAt, **kwargs) -> Preempted:
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),  # 3 batches per epoch
        eval_dataloader=make_dataloader(num_samples=3, batch_size=3, seed=1),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[recorder],
        progress_bar=False,
        seed=0,
        save_folder=str(tmp_path),
        **kwargs,
    )
    with pytest.raises(Preempted) as caught:
        trainer.fit()
    return caught.value


def test_preemption_finishes_the_batch_then_closes_without_the_closing_events(tmp_path, sigterm_guard):
    # SIGTERM in the second batch: that batch runs to BATCH_CHECKPOINT (with the evaluation due at it), its checkpoint
    # is saved, and fit raises Preempted after closing: no EPOCH_END, EPOCH_CHECKPOINT or FIT_END (the run goes on).
    recorder = SignalAt(E.AFTER_FORWARD, 1)
    error = preempted_run(tmp_path, recorder, max_duration="2ep", eval_interval="2ba")
    assert recorder.events == [E.INIT, E.FIT_START, E.EPOCH_START, *evaluated_at(2, total=2), "close"]
    assert error.batch == 2 and error.checkpoint == str(tmp_path / "ep0-ba2-rank0.pt")
    assert sigterm_guard == []


def test_preemption_after_the_last_batch_lets_fit_complete_then_raises(tmp_path, sigterm_guard):
    # SIGTERM during the evaluation at the end of fit, after the last batch's check: fit completes, FIT_END included.
    recorder = SignalAt(E.EVAL_START, 3)
    error = preempted_run(tmp_path, recorder, max_duration="1ep", eval_interval="2ba")
    epoch = [E.EPOCH_START, *evaluated_at(2, total=3), E.EPOCH_END, *evaluation(1), E.EPOCH_CHECKPOINT]
    assert recorder.events == [E.INIT, E.FIT_START, *epoch, E.FIT_END, "close"]
    assert error.batch == 3 and error.complete and "after its last batch" in str(error)
    assert sigterm_guard == []
