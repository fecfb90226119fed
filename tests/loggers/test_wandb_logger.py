import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from composer import Callback, Trainer
from composer.loggers import InMemoryLogger, WandBLogger, WandBLoggerHparams, is_wandb_available
from tests.common import SimpleModel, make_dataloader
from tests.loggers.conftest import assert_same_series, numeric_series

pytestmark = pytest.mark.skipif(not is_wandb_available(), reason="wandb is not installed")


def read_offline_run(wandb_dir):
    """The records of the offline run under ``wandb_dir``, through W&B's own reader (``wandb leet inspect``)."""
    [run_file] = Path(wandb_dir).glob("wandb/offline-run-*/run-*.wandb")
    return read_offline_run_file(run_file)


def read_offline_run_file(run_file):
    """The records of one offline run file, through ``wandb leet inspect``."""
    cli = shutil.which("wandb", path=str(Path(sys.executable).parent)) or "wandb"
    out = subprocess.run([cli, "leet", "inspect", "--json", str(run_file)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow  # W&B starts its service process
def test_offline_run_files_read_back_equal_the_in_memory_logger(run_training, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    memory = run_training(WandBLogger(project="tests", name="tiny", dir=tmp_path))
    records = read_offline_run(tmp_path)
    history = [r["history"] for r in records if r["type"] == "history"]
    written: dict[str, list] = {}
    for row in history:
        for key, value in row["item"].items():
            if not key.startswith("_"):
                written.setdefault(key, []).append((row["step"].get("num", 0), value))
    expected = numeric_series(memory)
    assert set(written) == set(expected)
    for key, series in expected.items():
        assert_same_series(written[key], series, key, rel=1e-12)
    config = {}
    for record in records:
        if record["type"] == "config":
            config.update(record["config"].get("update", {}))
    assert config["trainer/algorithms"] == []
    run = next(r["run"] for r in records if r["type"] == "run")
    assert run["project"] == "tests" and run["display_name"] == "tiny"


def test_bad_mode_and_folder_fail_when_built(tmp_path):
    with pytest.raises(ValueError, match=r"mode='offlne' is not a W&B mode; expected one of \['offline'"):
        WandBLogger(mode="offlne")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"dir='.*file' cannot be written"):
        WandBLogger(dir=tmp_path / "file")


def test_hparams_build_the_logger(tmp_path):
    logger = WandBLoggerHparams(project="p", dir=str(tmp_path)).initialize_object()
    assert logger.init_params["mode"] == "offline" and logger.init_params["project"] == "p"


class _CrashAt(Callback):
    """Raises at the end of batch ``batches`` (1-based): an in-process stand-in for a kill."""

    def __init__(self, batches: int) -> None:
        self.batches = batches

    def batch_end(self, state, logger) -> None:
        del logger
        if int(state.timer.batch) == self.batches:
            raise RuntimeError("crash")


def _train(folder: Path, *loggers, crash_after: int | None = None) -> Trainer:
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4, shuffle=True),
        max_duration="3ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
        loggers=list(loggers),
        callbacks=[_CrashAt(crash_after)] if crash_after is not None else [],
        progress_bar=False,
        seed=0,
        save_folder=str(folder / "checkpoints"),
        save_interval="1ep",
        run_name="resume-wandb",
        autoresume=True,
    )
    return trainer


@pytest.mark.slow  # W&B starts its service process twice
def test_a_resumed_run_continues_the_same_wandb_run_by_step(tmp_path, monkeypatch):
    """In-process: the first fit raises at batch 7 (its trainer is closed, so W&B finishes that launch's files as a
    crash handler would); a second Trainer with the same folders resumes from the batch-4 checkpoint."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    first = WandBLogger(project="tests", dir=tmp_path / "wb", flush_interval=1)
    crashed = _train(tmp_path, first, crash_after=7)
    with pytest.raises(RuntimeError, match="crash"):
        crashed.fit()
    crashed.close()
    time.sleep(1.05 - time.time() % 1)  # W&B names an offline launch's folder by the second it started, and the id
    second = WandBLogger(project="tests", dir=tmp_path / "wb", flush_interval=1)
    resumed = _train(tmp_path, second)
    assert resumed.checkpointing.loaded_path is not None and resumed.checkpointing.loaded_path.name.startswith("ep1-")
    resumed.fit()
    resumed.close()
    memory = InMemoryLogger()
    _train(tmp_path / "reference", memory).fit()
    expected = dict(zip(memory.steps("loss/train"), memory.values("loss/train")))

    assert second.run_id == first.run_id is not None
    folders = sorted((tmp_path / "wb" / "wandb").glob(f"offline-run-*-{first.run_id}"))
    assert len(folders) == 2  # one per launch, under the same run id
    launches = []
    for folder in folders:
        records = read_offline_run_file(next(folder.glob("run-*.wandb")))
        launches.append(
            {
                r["history"]["step"].get("num", 0): r["history"]["item"]["loss/train"]
                for r in records
                if r["type"] == "history" and "loss/train" in r["history"]["item"]
            }
        )
    assert sorted(launches[0]) == list(range(7)) and sorted(launches[1]) == list(range(4, 12))
    for launch in launches:  # each step's value equals the uninterrupted run's (logged twice: steps 4-6)
        assert launch == {step: expected[step] for step in launch}
