import csv

import pytest

from composer.loggers import CSVLogger, CSVLoggerHparams
from composer.loggers.csv_logger import COLUMNS
from tests.loggers.conftest import assert_same_series, numeric_series


def test_rows_read_back_with_the_csv_reader_equal_the_in_memory_logger(run_training, tmp_path):
    path = tmp_path / "metrics.csv"
    memory = run_training(CSVLogger(path))
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    written: dict[str, list] = {}
    for row in rows:
        written.setdefault(row["name"], []).append((int(row["batch"]), row["value"]))
    for key, expected in numeric_series(memory).items():
        got = [(step, float(value)) for step, value in written[key]]
        assert_same_series(got, expected, key, rel=1e-12)
    assert written["trainer/algorithms"] == [(0, "[]")]
    epoch_rows = [row for row in rows if row["name"] == "metrics/eval/Accuracy"]
    assert [(row["epoch"], row["level"]) for row in epoch_rows] == [("1", "epoch"), ("2", "epoch")]


def test_epoch_level_csv_has_no_batch_rows(run_training, tmp_path):
    path = tmp_path / "metrics.csv"
    run_training(CSVLogger(path, log_level="epoch"))
    with path.open(newline="") as file:
        levels = {row["level"] for row in csv.DictReader(file)}
    assert levels == {"fit", "epoch"}


def test_hparams_and_bad_paths(tmp_path):
    assert isinstance(CSVLoggerHparams(filename=str(tmp_path / "m.csv")).initialize_object(), CSVLogger)
    (tmp_path / "taken.csv").write_text("")
    with pytest.raises(ValueError, match="already exists"):
        CSVLogger(tmp_path / "taken.csv")
    with pytest.raises(ValueError, match="cannot be written"):
        CSVLogger(tmp_path / "taken.csv" / "m.csv")
