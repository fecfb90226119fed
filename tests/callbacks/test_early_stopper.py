import pytest
import torch

from composer import Callback, Trainer
from composer.callbacks import EarlyStopper, EarlyStopperHparams, ThresholdStopper, ThresholdStopperHparams
from tests.common import SimpleModel, make_dataloader


class Scripted(Callback):
    """Logs ``custom/score`` from a list: one value per epoch end, or per batch end."""

    def __init__(self, values, per="epoch"):
        self.values = list(values)
        self.per = per
        self.logged = 0

    def metric_names(self, state):
        return ["custom/score"]

    def _log(self, logger):
        if self.logged < len(self.values):
            logger.metric_epoch({"custom/score": torch.tensor(self.values[self.logged])})
            self.logged += 1

    def epoch_end(self, state, logger):
        if self.per == "epoch":
            self._log(logger)

    def batch_end(self, state, logger):
        if self.per == "batch":
            self._log(logger)


def train(*callbacks, max_duration="10ep", eval=False, lr=0.1):
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=8, seed=1) if eval else None,
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=lr),
        callbacks=list(callbacks),
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return trainer.state


def test_stops_after_patience_epochs_without_improvement():
    # Best 0.6 after epoch 2; epochs 3 and 4 do not beat it: with patience 2ep, stop at the end of epoch 4.
    stopper = EarlyStopper("custom/score", mode="max", patience="2ep")
    state = train(Scripted([0.5, 0.6, 0.6, 0.55, 0.9, 0.9]), stopper)
    assert (int(state.timer.epoch), int(state.timer.batch)) == (4, 12)
    assert state.stop_reason.startswith("EarlyStopper: custom/score has not improved on its best, 0.6,")
    assert stopper.state_dict() == {"best": pytest.approx(0.6), "best_at": 2.0}


def test_min_delta_and_min_mode_and_batch_patience():
    # Per batch, lower is better; an improvement must beat the best by more than 0.05.
    values = [1.0, 0.9, 0.88, 0.87, 0.86, 0.5]
    stopper = EarlyStopper("custom/score", mode="min", min_delta=0.05, patience="3ba")
    state = train(Scripted(values, per="batch"), stopper)
    # Best 0.9 judged at batch 2; 0.88, 0.87 and 0.86 are within min_delta; at batch 5 three batches have passed.
    assert int(state.timer.batch) == 5


def test_stops_on_an_eval_metric_that_never_improves():
    state = train(EarlyStopper("metrics/eval/Accuracy", patience=1), eval=True, lr=0.0)
    assert int(state.timer.epoch) == 2


def test_loss_is_inferred_as_lower_is_better():
    assert EarlyStopper("loss/train").mode == "min"
    assert EarlyStopper("metrics/eval/Accuracy").mode == "max"


def test_an_unknown_metric_fails_before_the_first_batch():
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        eval_dataloader=make_dataloader(seed=1),
        max_duration="1ep",
        callbacks=[EarlyStopper("metrics/eval/Acuracy")],
        progress_bar=False,
    )
    with pytest.raises(
        ValueError,
        match=r"monitor='metrics/eval/Acuracy'\): no such metric is logged in this run.*"
        r"'metrics/eval/Accuracy'",
    ):
        trainer.fit()
    assert int(trainer.state.timer.batch) == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"mode='up' is not supported; expected one of \['min', 'max'\]"):
        EarlyStopper("loss/train", mode="up")
    with pytest.raises(ValueError, match="patience='0ep' must be positive"):
        EarlyStopper("loss/train", patience="0ep")
    with pytest.raises(ValueError, match="patience='soon' is not a time"):
        EarlyStopper("loss/train", patience="soon")
    with pytest.raises(ValueError, match="min_delta=-1"):
        EarlyStopper("loss/train", min_delta=-1)


def test_threshold_stopper_stops_at_the_first_value_past_the_threshold():
    state = train(Scripted([0.5, 0.7, 0.92, 0.95]), ThresholdStopper("custom/score", 0.9, mode="max"))
    assert int(state.timer.epoch) == 3
    assert state.stop_reason == "ThresholdStopper: custom/score = 0.92 >= 0.9 at batch 9."
    state = train(ThresholdStopper("loss/train", threshold=10.0))
    assert int(state.timer.batch) == 1  # the first loss is below 10


def test_hparams_and_state_dict_round_trip():
    stopper = EarlyStopperHparams(monitor="loss/train", patience="2ba").initialize_object()
    assert str(stopper.patience) == "2ba"
    stopper.load_state_dict({"best": 0.5, "best_at": 3.0})
    assert stopper.state_dict() == {"best": 0.5, "best_at": 3.0}
    assert ThresholdStopperHparams(monitor="loss/train", threshold=0.1).initialize_object().threshold == 0.1
