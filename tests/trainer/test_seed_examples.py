"""The seed pages' examples, as written (typesetting repaired: indentation, ``&&`` -> ``and``)."""

import pytest
import torch

from composer import Algorithm, Event, Logger, State, Trainer
from composer.core.callback import Callback
from composer.core.event import EventDeprecationWarning
from tests.common import SimpleModel, make_dataloader


class ShortenTraining(Algorithm):
    def match(self, state: State, event: Event, logger: Logger) -> bool:
        return event == Event.TRAINING_START

    def apply(self, state: State, event: Event, logger: Logger):
        state.max_epochs /= 2  # cut training time in half


def test_shorten_training_halves_the_run():
    model = SimpleModel()
    with pytest.warns(EventDeprecationWarning, match="FIT_START"):
        trainer = Trainer(
            model=model,
            train_dataloader=make_dataloader(num_samples=8, batch_size=4),
            optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
            max_duration="4ep",
            algorithms=[ShortenTraining()],
            progress_bar=False,
        )
        trainer.fit()
    assert int(trainer.state.timer.epoch) == 2
    assert list(trainer.engine.traces) == ["ShortenTraining/FIT_START"]


class OnBeforeLoss(Algorithm):
    def match(self, event, state):
        return event == Event.BEFORE_LOSS

    def apply(self, event, state, logger):
        state.loss_seen = getattr(state, "loss_seen", 0) + 1


class LateSingleProcess(Algorithm):
    def match(self, event, state):
        return state.epoch > 30 and state.world_size == 1

    def apply(self, event, state, logger):
        raise AssertionError("never reached before epoch 31")


def test_match_examples():
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=8, batch_size=4),
        max_duration="2ep",
        algorithms=[OnBeforeLoss(), LateSingleProcess()],
        progress_bar=False,
    )
    trainer.fit()
    assert trainer.state.loss_seen == 4


class MyCallback(Callback):
    def run_event(self, event: Event, state: State, logger: Logger):
        if event == Event.EPOCH_START:
            print(f"Epoch: {int(state.timer.epoch)}")


def test_run_event_callback_example(capsys):
    model = SimpleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(),
        eval_dataloader=make_dataloader(num_samples=4, seed=1),
        optimizers=optimizer,
        max_duration="1ep",
        callbacks=[MyCallback()],
    )
    _ = trainer.engine.run_event(Event.EPOCH_START)
    assert capsys.readouterr().out == "Epoch: 0\n"
    trainer.engine.close()
