import io

import torch

from composer import Trainer
from composer.loggers import ConsoleLogger, ProgressBarLogger
from tests.common import SimpleModel, make_dataloader


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def train(bar, **kwargs):
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=12, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=4, seed=1),
        max_duration="2ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        loggers=[bar],
        progress_bar=False,
        **kwargs,
    )
    trainer.fit()
    trainer.close()


def test_draws_epoch_and_eval_bars_on_a_terminal():
    stream = FakeTerminal()
    train(ProgressBarLogger(stream=stream, refresh_seconds=0.0))
    out = stream.getvalue()
    assert "Epoch 0" in out and "Epoch 1" in out
    assert "3/3" in out  # three batches per epoch
    assert "Eval eval" in out and "Accuracy" in out
    assert "loss=" in out


def test_prints_nothing_outside_a_terminal():
    stream = io.StringIO()
    train(ProgressBarLogger(stream=stream))
    assert stream.getvalue() == ""


def test_default_trainer_output_is_silent_outside_a_terminal(capsys):
    torch.manual_seed(0)
    model = SimpleModel()
    Trainer(model=model, train_dataloader=make_dataloader(), max_duration="1ep").fit()
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_console_logger_prints_epoch_metrics_only():
    stream = io.StringIO()
    train(ConsoleLogger(stream=stream))
    lines = stream.getvalue().splitlines()
    assert sum("metrics/eval/Accuracy" in line for line in lines) == 2
    assert not any("loss/train" in line for line in lines)
