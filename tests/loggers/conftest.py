"""A small training run that logs through the destinations under test next to an InMemoryLogger."""

from __future__ import annotations

import pytest
import torch

from composer import Trainer
from composer.callbacks import LRMonitor, SpeedMonitor
from composer.loggers import InMemoryLogger
from composer.optim import linear_scheduler
from tests.common import SimpleModel, make_dataloader


def numeric_series(memory: InMemoryLogger) -> dict[str, list[tuple[int, float]]]:
    """Key -> [(step, value)] of every number the in-memory logger kept."""
    series = {}
    for key in memory.data:
        values = memory.values(key)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            series[key] = list(zip(memory.steps(key), values))
    return series


@pytest.fixture
def run_training():
    """Trains 2 epochs of 3 batches (evaluating after each) with LR and speed monitors; returns the memory logger."""

    def run(*loggers, callbacks=(), **kwargs) -> InMemoryLogger:
        torch.manual_seed(0)
        model = SimpleModel()
        memory = InMemoryLogger()
        trainer = Trainer(
            model=model,
            train_dataloader=make_dataloader(num_samples=12, batch_size=4),
            eval_dataloader=make_dataloader(num_samples=8, seed=1),
            max_duration="2ep",
            optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
            schedulers=linear_scheduler,
            loggers=[memory, *loggers],
            callbacks=[LRMonitor(), SpeedMonitor(window_size=2), *callbacks],
            progress_bar=False,
            seed=0,
            **kwargs,
        )
        trainer.fit()
        trainer.close()
        return memory

    return run


def assert_same_series(written, expected, key, rel=1e-12):
    """Same steps, and values equal up to ``rel`` (float32 stores need 1e-6)."""
    assert [step for step, _ in written] == [step for step, _ in expected], key
    assert [value for _, value in written] == pytest.approx([value for _, value in expected], rel=rel), key


_MLFLOW_TEMPLATE: list = []


def mlflow_uri(folder) -> str:
    """A ``sqlite:///`` tracking URI in ``folder``, copied from one database made once per session.

    MLflow takes seconds to create its schema; copying a ready database takes none.
    """
    import shutil
    import tempfile
    from pathlib import Path

    if not _MLFLOW_TEMPLATE:
        from mlflow.tracking import MlflowClient

        template = Path(tempfile.mkdtemp()) / "template.db"
        MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()
        _MLFLOW_TEMPLATE.append(template)
    Path(folder).mkdir(parents=True, exist_ok=True)
    target = Path(folder) / "mlflow.db"
    shutil.copy(_MLFLOW_TEMPLATE[0], target)
    return f"sqlite:///{target}"
