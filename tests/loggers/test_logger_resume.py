"""A run killed with SIGKILL and re-run with autoresume leaves each logger's files as an uninterrupted run would.

This file is also the command the tests run once, in a fresh process::

    python tests/loggers/test_logger_resume.py FOLDER

It trains 3 epochs of 4 batches (evaluating after each, a checkpoint at every epoch end) three times, each in a
forked child of a process that has only imported modules: into ``FOLDER/resumed`` killed with SIGKILL at the end of
batch 7 (the newest checkpoint is from batch 4, and the loggers have written batches 4-6 since), then the same
command again, which resumes; and uninterrupted into ``FOLDER/reference``. Every run writes through a CSVLogger, a
FileLogger in JSON lines and one in text, and a TensorboardLogger. Most write each record at once, so the killed run
leaves records from after its checkpoint on disk (an MLflowLogger in a SQLite file too); the JSON-lines logger keeps up to 100 pending, so only the
checkpoint's own flush puts the records before the checkpoint on disk. The tests read the files back with the csv and
json modules and TensorBoard's EventAccumulator.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from composer import Callback, Trainer
from composer.loggers import CSVLogger, FileLogger, MLflowLogger, is_mlflow_available
from composer.loggers.tensorboard_logger import TensorboardLogger, is_tensorboard_available
from tests.common import SimpleModel, make_dataloader
from tests.common.forking import in_forked_child

REPO = Path(__file__).resolve().parents[2]
KILL_AFTER_BATCH = 7  # batches trained when the process kills itself; the newest checkpoint is from batch 4
TRAINING_NAMES = ("loss/train", "metrics/eval/Accuracy")  # what both runs log at the same batches


class KillAt(Callback):
    """SIGKILLs this process at the end of batch ``batches`` (1-based), as a crash or a pre-emption would."""

    def __init__(self, batches: int) -> None:
        self.batches = batches

    def batch_end(self, state, logger) -> None:
        del logger
        if int(state.timer.batch) == self.batches:
            os.kill(os.getpid(), signal.SIGKILL)


def train(folder: Path, kill_after: int | None) -> None:
    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=16, batch_size=4, shuffle=True),
        eval_dataloader=make_dataloader(num_samples=8, seed=1),
        max_duration="3ep",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.5),
        loggers=[
            CSVLogger(folder / "metrics.csv", flush_interval=1),
            FileLogger(folder / "log.jsonl", log_interval="1ba"),  # 100 pending: written at the checkpoint
            FileLogger(folder / "log.txt", log_interval="1ba", flush_interval=1),
            *([TensorboardLogger(folder / "tb", flush_interval=1)] if is_tensorboard_available() else []),
            *([MLflowLogger(f"sqlite:///{folder / 'mlflow.db'}", flush_interval=1)] if is_mlflow_available() else []),
        ],
        callbacks=[KillAt(kill_after)] if kill_after is not None else [],
        progress_bar=False,
        seed=0,
        save_folder=str(folder / "checkpoints"),
        save_interval="1ep",
        run_name="resume-logs",
        autoresume=True,
    )
    loaded = trainer.checkpointing.loaded_path
    with open(folder / "resumed.txt", "a") as file:
        file.write(f"{loaded.name if loaded else '-'}\n")
    trainer.fit()
    trainer.close()


def in_child(folder: Path, kill_after: int | None) -> int:
    """Runs :func:`train` in a forked child; returns its exit code (minus the signal that ended it)."""
    folder.mkdir(parents=True, exist_ok=True)
    return in_forked_child(train, folder, kill_after)


def main(folder: Path) -> None:
    torch.set_num_threads(1)
    if is_mlflow_available():  # MLflow takes seconds to create a database: create it once, copy it to each run
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=f"sqlite:///{folder / 'template.db'}").search_experiments()
        for run in ("resumed", "reference"):
            (folder / run).mkdir()
            shutil.copyfile(folder / "template.db", folder / run / "mlflow.db")
    codes = [
        in_child(folder / "resumed", KILL_AFTER_BATCH),
        in_child(folder / "resumed", None),
        in_child(folder / "reference", None),
    ]
    (folder / "codes.json").write_text(json.dumps(codes))


# ---- the tests ---------------------------------------------------------------------------------------------------

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork and SIGKILL")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("logger_resume")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), str(folder)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    codes = json.loads((folder / "codes.json").read_text())
    assert codes == [-signal.SIGKILL, 0, 0], done.stderr
    assert (folder / "resumed" / "resumed.txt").read_text() == "-\nep1-ba4-rank0.pt\n"
    return folder


def _csv_records(path: Path) -> list[tuple[int, str, str]]:
    with path.open(newline="") as file:
        return [(int(row["batch"]), row["name"], row["value"]) for row in csv.DictReader(file)]


def _training(records: list[tuple[int, str, object]]) -> list[tuple[int, str, object]]:
    return [record for record in records if record[1] in TRAINING_NAMES]


def test_csv_continues_its_file_and_drops_the_rows_after_the_checkpoint(runs):
    resumed = _csv_records(runs / "resumed" / "metrics.csv")
    reference = _csv_records(runs / "reference" / "metrics.csv")
    assert _training(resumed) == _training(reference)  # the same values, written as the same text
    losses = [batch for batch, name, _ in resumed if name == "loss/train"]
    assert losses == list(range(12))  # each batch once
    # What the run logs at FIT_START (its algorithms) is logged again by the resumed run, at the batch it resumed at.
    assert [(b, n) for b, n, _ in resumed if n == "trainer/algorithms"] == [
        (0, "trainer/algorithms"),
        (4, "trainer/algorithms"),
    ]


def _jsonl_records(path: Path) -> list[tuple[int, str, object]]:
    records = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        records += [(record["batch"], name, value) for name, value in record["data"].items()]
    return records


def test_json_lines_keep_what_was_pending_at_the_checkpoint_and_drop_what_came_after(runs):
    resumed = _jsonl_records(runs / "resumed" / "log.jsonl")
    reference = _jsonl_records(runs / "reference" / "log.jsonl")
    assert _training(resumed) == _training(reference)
    assert [batch for batch, name, _ in resumed if name == "loss/train"] == list(range(12))


def test_text_lines_continue_the_file(runs):
    pattern = re.compile(r"\[(\w+)\]\[epoch=(\d+) batch=(\d+)\]: (.*)")

    def lines(path: Path) -> list[tuple[str, ...]]:
        parsed = [pattern.fullmatch(line) for line in path.read_text().splitlines()]
        assert all(parsed), path.read_text()
        return [m.groups() for m in parsed if m and "trainer/algorithms" not in m.group(4)]

    resumed, reference = lines(runs / "resumed" / "log.txt"), lines(runs / "reference" / "log.txt")
    assert resumed == reference
    assert [int(g[2]) for g in resumed if g[3].startswith("loss/train")] == list(range(12))


@pytest.mark.skipif(not is_tensorboard_available(), reason="needs tensorboard")
def test_tensorboard_purges_the_steps_after_the_checkpoint(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
        events = EventAccumulator(str(folder / "tb"))
        events.Reload()
        return {name: [(e.step, e.value) for e in events.Scalars(name)] for name in TRAINING_NAMES}

    resumed, reference = scalars(runs / "resumed"), scalars(runs / "reference")
    assert resumed == reference
    assert [step for step, _ in resumed["loss/train"]] == list(range(12))
    assert len(list((runs / "resumed" / "tb").iterdir())) == 2  # the killed run's event file, and the resumed one's


@pytest.mark.skipif(not is_mlflow_available(), reason="needs mlflow")
def test_mlflow_continues_the_same_run_and_its_newest_value_per_step_is_the_uninterrupted_runs(runs):
    from mlflow.tracking import MlflowClient

    def histories(folder: Path) -> dict[str, list[tuple[int, float]]]:
        client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
        found = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert len(found) == 1 and found[0].info.status == "FINISHED"
        series = {}
        for name in TRAINING_NAMES:
            history = sorted(client.get_metric_history(found[0].info.run_id, name), key=lambda m: m.timestamp)
            series[name] = [(m.step, m.value) for m in history]
        return series

    resumed, reference = histories(runs / "resumed"), histories(runs / "reference")
    for name in TRAINING_NAMES:
        newest = dict(resumed[name])  # the resumed run's value wins at a step logged twice (as documented)
        assert sorted(newest.items()) == sorted(reference[name])
    steps = [step for step, _ in resumed["loss/train"]]
    twice = sorted({step for step in steps if steps.count(step) > 1})
    assert twice == [4, 5, 6]  # what the killed run logged after its checkpoint (batch 4) and before the kill (7)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
