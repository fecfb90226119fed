"""The weights fit ends with are evaluated, even when the evaluation interval does not divide the run."""

from __future__ import annotations

import pytest
import torch

from composer import Callback, Trainer
from composer.algorithms import SWA
from composer.core import Evaluator, Logger, State
from tests.common import SimpleModel, make_dataloader


class Evaluations(Callback):
    """The batch count at every evaluation's end, by label, and the weights the last one scored."""

    def __init__(self) -> None:
        self.at: list[tuple[str, int]] = []
        self.weights: dict[str, torch.Tensor] = {}

    def eval_end(self, state: State, logger: Logger) -> None:
        self.at.append((state.dataloader_label, int(state.timer.batch)))
        self.weights = {k: v.clone() for k, v in state.model.state_dict().items()}


def _fit(max_duration: str, eval_interval: str, algorithms=(), **kwargs) -> tuple[Trainer, Evaluations]:
    torch.manual_seed(0)
    model, evaluations = SimpleModel(), Evaluations()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=40, batch_size=4),  # 10 batches an epoch
        eval_interval=eval_interval,
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        algorithms=list(algorithms),
        callbacks=[evaluations],
        progress_bar=False,
        seed=0,
        **{"eval_dataloader": make_dataloader(num_samples=8, seed=1), **kwargs},
    )
    trainer.fit()
    trainer.close()
    return trainer, evaluations


@pytest.mark.parametrize(
    ("max_duration", "eval_interval", "expected"),
    [
        ("25ba", "10ba", [10, 20, 25]),  # the final weights are evaluated too
        ("20ba", "10ba", [10, 20]),  # once, when the interval divides the run
        ("2ep", "1ep", [10, 20]),
        ("25ba", "1ep", [10, 20, 25]),
    ],
)
def test_fit_ends_with_an_evaluation_of_its_final_weights(max_duration, eval_interval, expected):
    _, evaluations = _fit(max_duration, eval_interval)
    assert [batch for _, batch in evaluations.at] == expected


def test_the_switch_turns_it_off():
    _, evaluations = _fit("25ba", "10ba", eval_at_fit_end=False)
    assert [batch for _, batch in evaluations.at] == [10, 20]


def test_every_evaluator_and_the_weights_swa_ends_with():
    swa = SWA(swa_start=0.5, anneal_epochs=1)
    torch.manual_seed(0)
    second = Evaluator(label="second", dataloader=make_dataloader(num_samples=8, seed=2), eval_interval="7ba")
    trainer, evaluations = _fit("20ba", "10ba", [swa], eval_dataloader=[make_dataloader(num_samples=8, seed=1), second])
    # The batch-20 evaluation waits for SWA's average (put in at the last EPOCH_END), and scores it.
    assert evaluations.at == [("second", 7), ("eval", 10), ("second", 14), ("eval", 20), ("second", 20)]
    for name, value in trainer.state.model.state_dict().items():
        assert torch.equal(evaluations.weights[name], value), name
