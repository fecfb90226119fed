import pytest
import torch

from composer import Callback, State, Trainer
from composer.callbacks import NaNMonitor, NaNMonitorHparams, NonFiniteLossError
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
