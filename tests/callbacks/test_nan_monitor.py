import pytest
import torch

from composer import Algorithm, Callback, Event, State, Trainer
from composer.callbacks import NaNMonitor, NaNMonitorHparams, NonFiniteLossError
from composer.callbacks.nan_monitor import DeferredNaNMonitor
from tests.common import SimpleModel, make_dataloader


class Snapshots(Callback):
    def __init__(self):
        self.after_batch = []

    def batch_end(self, state, logger):
        self.after_batch.append({k: v.clone() for k, v in state.model.state_dict().items()})


class PoisonBatch(Callback):
    """Makes the inputs of batch ``at`` infinite."""

    def __init__(self, at):
        self.at = at

    def after_dataloader(self, state, logger):
        if int(state.timer.batch) == self.at:
            x, _ = state.batch
            assert torch.is_tensor(x)
            x.fill_(float("inf"))


def test_raises_at_the_bad_batch_before_the_step_so_weights_stay_good():
    torch.manual_seed(0)
    model = SimpleModel()
    snapshots = Snapshots()
    data = make_dataloader(num_samples=16, batch_size=4)
    batches = [(x.clone(), y.clone()) for x, y in data]
    trainer = Trainer(
        model=model,
        train_dataloader=batches,
        max_duration="4ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        grad_accum=2,
        callbacks=[snapshots, PoisonBatch(at=2), NaNMonitor()],
        progress_bar=False,
    )
    with pytest.raises(
        NonFiniteLossError,
        match=r"loss is (nan|inf) at batch 2 \(epoch 0, batch 2 of the epoch, "
        r"microbatch 0\); .* weights are those after batch 1\.",
    ):
        trainer.fit()
    assert int(trainer.state.timer.batch) == 2
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, snapshots.after_batch[-1][key], rtol=0, atol=0)
    assert len(snapshots.after_batch) == 2


def test_a_finite_run_is_untouched_and_a_dict_loss_is_checked():
    torch.manual_seed(0)
    model = SimpleModel()
    Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        max_duration="2ba",
        callbacks=[NaNMonitor()],
        progress_bar=False,
    ).fit()
    monitor = NaNMonitor()
    state = State(model=model, max_duration="1ep")
    state.loss = {"a": torch.tensor(1.0), "b": [torch.tensor(float("-inf"))]}
    with pytest.raises(NonFiniteLossError, match=r"loss is -inf at batch 0 .* the weights are the initial ones"):
        monitor.after_loss(state, None)
    assert isinstance(NaNMonitorHparams().initialize_object(), NaNMonitor)


class BadLossAt(Algorithm):
    """Makes the loss of batch ``batch`` a dict with a part ``value``, as a model whose loss diverges would."""

    def __init__(self, batch, value):
        self.batch, self.value = batch, value

    def match(self, event, state):
        return event is Event.AFTER_LOSS and int(state.timer.batch) == self.batch

    def apply(self, event, state, logger):
        state.loss = {"a": state.loss * 0.5, "b": torch.tensor(self.value)}


def run_deferred(at, value, grad_accum=1, max_duration="2ep"):
    torch.manual_seed(0)
    model = SimpleModel()
    monitor = DeferredNaNMonitor()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        grad_accum=grad_accum,
        algorithms=[BadLossAt(at, value)],
        callbacks=[monitor],
        check_finite=False,
        progress_bar=False,
    )
    return trainer, monitor


@pytest.mark.parametrize("fold_every", [256, 3])  # 3: the losses are folded into several chunks before the read
def test_deferred_names_the_first_bad_batch_of_a_dict_loss_at_the_epoch_end(monkeypatch, fold_every):
    import composer.callbacks.nan_monitor as nan_monitor_module

    monkeypatch.setattr(nan_monitor_module, "_FOLD_EVERY", fold_every)
    trainer, monitor = run_deferred(at=6, value=float("-inf"), grad_accum=2)
    with pytest.raises(
        NonFiniteLossError,
        match=r"loss was -inf at batch 6 \(epoch 1, batch 2 of the epoch\); found at the end of the epoch, after "
        r"batch 7: .* 1 more batch\(es\)",
    ):
        trainer.fit()
    assert int(trainer.state.timer.batch) == 8
    monitor.check(trainer.state)  # read and cleared: nothing left to report


def test_deferred_check_reads_once_and_clears():
    trainer, monitor = run_deferred(at=99, value=0.0, max_duration="3ba")
    trainer.fit()  # finite: the end of fit reads the 3 losses and finds nothing
    assert not monitor._batches and not monitor._values
    state = trainer.state
    state.loss = torch.tensor(float("nan"))
    state.timer.on_batch_complete()
    monitor.batch_end(state, None)
    with pytest.raises(NonFiniteLossError, match=r"loss was nan at batch 3 .*found before a checkpoint is written"):
        monitor.check(state)
    monitor.check(state)


def test_a_deferred_monitor_keeps_no_graph_alive():
    model = SimpleModel()
    state = State(model=model, max_duration="1ep")
    state.loss = model.module(torch.ones(2, 8)).sum()  # still attached to the graph (not what the Trainer gives)
    state.timer.on_batch_complete()
    monitor = DeferredNaNMonitor()
    monitor.batch_end(state, None)
    assert not monitor._values[0].requires_grad
