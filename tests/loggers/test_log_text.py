"""Logger.log_text reaches every destination that takes text, each in its own form; others ignore it."""

from __future__ import annotations

import io
import json

import pytest
import torch

from composer import Callback, Trainer
from composer.core.logging.logger import LoggerDestination, LogLevel
from composer.loggers import (
    ConsoleLogger,
    CSVLogger,
    FileLogger,
    InMemoryLogger,
    MLflowLogger,
    TensorboardLogger,
    WandBLogger,
    is_mlflow_available,
    is_tensorboard_available,
    is_wandb_available,
)
from tests.common import SimpleModel, make_dataloader
from tests.loggers.conftest import mlflow_uri

TEXT = "def f(x):\n    return x"


class LogsText(Callback):
    """Logs TEXT after every batch at the given level."""

    def __init__(self, level: str) -> None:
        self.level = level

    def batch_end(self, state, logger):
        logger.log_text("sample/0", f"{TEXT}  # {int(state.timer.batch)}", self.level)


def _run(*destinations, level: str = "epoch") -> None:
    torch.manual_seed(0)
    trainer = Trainer(model=SimpleModel(), train_dataloader=make_dataloader(num_samples=8, batch_size=4),
                      max_duration="2ba", loggers=list(destinations), callbacks=[LogsText(level)],
                      progress_bar=False)  # fmt: skip
    trainer.fit()
    trainer.close()


def test_console_file_and_memory_take_text(tmp_path):
    stream, memory, batch_only = io.StringIO(), InMemoryLogger(), InMemoryLogger(log_level="epoch")
    lines, jsonl = FileLogger(tmp_path / "log.txt", log_interval="1ba"), FileLogger(tmp_path / "log.jsonl")
    csv = CSVLogger(tmp_path / "m.csv")  # takes no text: its columns are numbers
    _run(ConsoleLogger(stream=stream), memory, batch_only, lines, jsonl, csv)
    assert [(int(t.batch), text) for t, text in memory.texts["sample/0"]] == [(1, f"{TEXT}  # 1"), (2, f"{TEXT}  # 2")]
    assert len(batch_only.texts["sample/0"]) == 2  # EPOCH level: kept by a logger of EPOCH values
    assert "[EPOCH][epoch=0 batch=1]: sample/0:\n  def f(x):\n      return x  # 1\n" in stream.getvalue()
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["data"]["sample/0"] for r in records if "sample/0" in r["data"]] == [f"{TEXT}  # 1", f"{TEXT}  # 2"]
    assert "sample/0" in (tmp_path / "log.txt").read_text()
    assert "sample/0" not in (tmp_path / "m.csv").read_text()


def test_the_level_filters_text_like_values():
    memory = InMemoryLogger(log_level="epoch")
    _run(memory, level="batch")
    assert memory.texts == {}
    with pytest.raises(TypeError, match="log_text text must be a str, got list"):

        class Bad(Callback):
            def batch_end(self, state, logger):
                logger.log_text("x", [1, 2])

        trainer = Trainer(model=SimpleModel(), train_dataloader=make_dataloader(num_samples=4), max_duration="1ba",
                          loggers=[InMemoryLogger()], callbacks=[Bad()], progress_bar=False)  # fmt: skip
        trainer.fit()


def test_a_destination_without_log_text_ignores_it():
    class Numbers(LoggerDestination):
        pass

    _run(Numbers())  # the base class's log_text does nothing
    assert LoggerDestination().log_text(None, LogLevel.EPOCH, "x", "y") is None  # type: ignore[func-returns-value]


@pytest.mark.skipif(not is_tensorboard_available(), reason="tensorboard is not installed")
def test_tensorboard_writes_text_summaries(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _run(TensorboardLogger(tmp_path / "tb"))
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    events.Reload()
    written = events.Tensors("sample/0/text_summary")
    assert [e.step for e in written] == [1, 2]
    assert written[0].tensor_proto.string_val[0].decode() == f"{TEXT}  # 1"


@pytest.mark.slow
@pytest.mark.skipif(not is_mlflow_available(), reason="mlflow is not installed")
def test_mlflow_saves_text_artifacts(tmp_path):
    from mlflow.tracking import MlflowClient

    destination = MLflowLogger(mlflow_uri(tmp_path))
    _run(destination)
    client = MlflowClient(tracking_uri=destination.tracking_uri)
    names = sorted(a.path for a in client.list_artifacts(destination.run_id, "sample/0"))
    assert names == ["sample/0/batch_1.txt", "sample/0/batch_2.txt"]
    downloaded = client.download_artifacts(destination.run_id, "sample/0/batch_2.txt", str(tmp_path / "down"))
    with open(downloaded, encoding="utf-8") as file:
        assert file.read() == f"{TEXT}  # 2"


@pytest.mark.slow  # W&B starts its service process
@pytest.mark.skipif(not is_wandb_available(), reason="wandb is not installed")
def test_wandb_logs_text_as_a_table(tmp_path, monkeypatch):
    from tests.loggers.test_wandb_logger import read_offline_run

    monkeypatch.setenv("WANDB_SILENT", "true")
    _run(WandBLogger(project="tests", dir=tmp_path))
    rows = [r["history"] for r in read_offline_run(tmp_path) if r["type"] == "history"]
    steps = [row["step"].get("num", 0) for row in rows if row["item"].get("sample/0._type") == "table-file"]
    assert steps == [1, 2]
    files = tmp_path.glob("wandb/offline-run-*/files/media/table/sample/0_*.table.json")
    tables = sorted(json.loads(path.read_text())["data"] for path in files)
    assert tables == [[[f"{TEXT}  # 1"]], [[f"{TEXT}  # 2"]]]
