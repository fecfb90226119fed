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
    CSVLogger(tmp_path / "taken.csv")  # an existing file is refused when a fresh run starts, not here
    with pytest.raises(ValueError, match="cannot be written"):
        CSVLogger(tmp_path / "taken.csv" / "m.csv")


def _train_two_batches(destination, **kwargs):
    import torch

    from composer import Trainer
    from tests.common import SimpleModel, make_dataloader

    torch.manual_seed(0)
    model = SimpleModel()
    trainer = Trainer(
        model=model,
        train_dataloader=make_dataloader(num_samples=8),
        max_duration="2ba",
        loggers=[destination],
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    trainer.close()


def test_a_fresh_run_refuses_an_existing_file_at_fit_start_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("an earlier run\n")
    destination = CSVLogger(path)  # building it cannot know yet whether the run resumes
    with pytest.raises(ValueError, match=r"metrics.csv' already exists and this run starts fresh .*overwrite=True"):
        _train_two_batches(destination)
    assert path.read_text() == "an earlier run\n"
    _train_two_batches(CSVLogger(path, overwrite=True))
    with path.open(newline="") as file:
        assert [row["batch"] for row in csv.DictReader(file) if row["name"] == "loss/train"] == ["0", "1"]


def test_a_trainer_that_fails_to_build_leaves_no_file_behind(tmp_path):
    path = tmp_path / "runs" / "metrics.csv"
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    for _ in range(2):  # the same script again fails the same way, not on a file left over
        with pytest.raises(Exception, match="corrupt.pt") as error:
            _train_two_batches(CSVLogger(path), load_path=str(tmp_path / "corrupt.pt"))
        assert "already exists" not in str(error.value)
        assert not path.exists()


def test_resuming_keeps_the_checkpoints_rows_and_drops_a_row_cut_short(tmp_path):
    import io

    from composer.loggers.csv_logger import _keep_rows

    path = tmp_path / "metrics.csv"
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    rows = [(0, b, b, 4 * b, 0, "batch", "note", f"line one\nline {b}") for b in range(3)]  # values with newlines
    writer.writerows(rows)
    path.write_text(out.getvalue() + "0,3,3", newline="")  # killed in the middle of a row
    assert _keep_rows(path, {"rows": 2}) == 2
    with path.open(newline="") as file:
        kept = list(csv.reader(file))
    assert kept == [list(COLUMNS)] + [[str(v) for v in row] for row in rows[:2]]
    assert _keep_rows(path, None) == 2


def test_filename_placeholders_are_filled_like_save_folder(tmp_path):
    pattern = tmp_path / "runs" / "{run_name}" / "metrics-{run_name}-rank{rank}.csv"
    destination = CSVLogger(pattern)
    _train_two_batches(destination, run_name="demo-1")
    expected = tmp_path / "runs" / "demo-1" / "metrics-demo-1-rank0.csv"
    assert destination.filename == expected
    with expected.open(newline="") as file:
        assert [row["batch"] for row in csv.DictReader(file) if row["name"] == "loss/train"] == ["0", "1"]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["demo-1"]  # nothing literally named "{run_name}"
