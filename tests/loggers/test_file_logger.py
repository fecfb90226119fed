import json

import pytest
import torch

from composer import Trainer
from composer.loggers import FileLogger, FileLoggerHparams, InMemoryLogger
from tests.common import SimpleModel, make_dataloader
from tests.loggers.conftest import assert_same_series, numeric_series


def test_jsonl_lines_read_back_equal_the_in_memory_logger(run_training, tmp_path):
    path = tmp_path / "run" / "log.jsonl"
    memory = run_training(FileLogger(path, log_level="batch", log_interval="1ba"))
    written: dict[str, list] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        for key, value in record["data"].items():
            written.setdefault(key, []).append((record["batch"], value))
    for key, expected in numeric_series(memory).items():
        assert_same_series(written[key], expected, key, rel=1e-12)
    assert written["trainer/algorithms"] == [(0, [])]
    assert set(written) == set(memory.data)


def test_text_lines_at_epoch_level_hold_only_epoch_and_fit_values(run_training, tmp_path):
    path = tmp_path / "log.txt"
    memory = run_training(FileLogger(path, log_level="epoch"))
    lines = path.read_text().splitlines()
    assert lines[0] == "[FIT][epoch=0 batch=0]: trainer/algorithms: []"
    accuracy = memory.values("metrics/eval/Accuracy")
    eval_lines = [line for line in lines if "metrics/eval/Accuracy" in line]
    assert eval_lines[0].startswith("[EPOCH][epoch=1 batch=3]: metrics/eval/Accuracy: ")
    assert [float(line.split("Accuracy: ")[1].split(",")[0]) for line in eval_lines] == pytest.approx(
        accuracy, abs=5e-5
    )
    assert not any(line.startswith("[BATCH]") for line in lines)


def test_log_interval_keeps_every_second_batch(run_training, tmp_path):
    path = tmp_path / "log.jsonl"
    run_training(FileLogger(path, log_level="batch", log_interval="2ba"))
    steps = [json.loads(line)["batch"] for line in path.read_text().splitlines() if "loss/train" in line]
    assert steps == [0, 2, 4]


def test_a_fresh_run_refuses_an_existing_file_unless_told_to_overwrite(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("an earlier run\n")
    with pytest.raises(ValueError, match="already exists and this run starts fresh .*pass overwrite=True"):
        train_24_batches(FileLogger(path))  # at FIT_START: building the logger cannot know whether the run resumes
    assert path.read_text() == "an earlier run\n"
    train_24_batches(FileLogger(path, overwrite=True, log_interval="1ba"))
    assert "an earlier run" not in path.read_text()


def test_an_unwritable_folder_fails_when_built(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"filename='.*a_file/log.txt' cannot be written: .* is a file, not a folder"):
        FileLogger(blocker / "log.txt")


def test_bad_format_and_interval_are_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"format='yaml' is not supported; expected one of \['text', 'jsonl'\]"):
        FileLogger(tmp_path / "log", format="yaml")
    with pytest.raises(ValueError, match="log_interval='3sp' must be a whole number of batches or epochs"):
        FileLogger(tmp_path / "log", log_interval="3sp")


def test_hparams_build_the_logger(tmp_path):
    logger = FileLoggerHparams.from_dict(
        {"filename": str(tmp_path / "x.jsonl"), "log_level": "batch"}
    ).initialize_object()
    assert logger.format == "jsonl" and logger.log_level.name == "BATCH"


def train_24_batches(*loggers, **kwargs):
    torch.manual_seed(0)
    trainer = Trainer(
        model=SimpleModel(),
        train_dataloader=make_dataloader(num_samples=96, batch_size=4),
        eval_dataloader=make_dataloader(num_samples=8, seed=1),
        max_duration="1ep",
        loggers=list(loggers),
        progress_bar=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    trainer.close()
    return trainer


def test_the_default_level_records_the_training_loss_every_10_batches(tmp_path):
    path = tmp_path / "log.jsonl"
    memory = InMemoryLogger()
    train_24_batches(FileLogger(path), memory)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    losses = [(r["batch"], r["data"]["loss/train"]) for r in records if "loss/train" in r["data"]]
    expected = [(step, float(value)) for step, value in zip(memory.steps("loss/train"), memory.values("loss/train"))]
    assert [step for step, _ in losses] == [0, 10, 20]
    assert [value for _, value in losses] == pytest.approx([v for step, v in expected if step % 10 == 0], rel=1e-12)
    # Evaluation metrics are still written after every evaluation.
    assert [r["batch"] for r in records if "metrics/eval/Accuracy" in r["data"]] == [24]


def test_defaults_are_documented_values():
    logger = FileLogger("unused/log.txt")
    assert (logger.log_level.name, str(logger.log_interval)) == ("BATCH", "10ba")
    hparams = FileLoggerHparams(filename="unused/log.txt")
    assert (hparams.log_level, hparams.log_interval) == ("batch", "10ba")


@pytest.mark.parametrize("suffix", [".json", ".log"])
def test_format_json_is_accepted_as_json_lines(tmp_path, suffix):
    path = tmp_path / f"log{suffix}"
    memory = InMemoryLogger()
    logger = FileLogger(path, format="json", log_level="batch", log_interval="1ba")
    assert logger.format == "jsonl"
    train_24_batches(logger, memory)
    records = [json.loads(line) for line in path.read_text().splitlines()]  # one JSON object per line
    assert [r["batch"] for r in records if "loss/train" in r["data"]] == memory.steps("loss/train")


def _log_one_epoch(state, logger_destination):
    from composer.core.logging.logger import Logger

    logger = Logger(state, [logger_destination])
    logger_destination.init(state, logger)
    logger.metric_batch({"loss/train": 0.5})
    logger_destination.close(state, logger)


@pytest.mark.parametrize("format", ["text", "jsonl"])
def test_filename_placeholders_are_filled_like_save_folder(tmp_path, format):
    from composer.core import State
    from composer.utils.checkpoint import format_checkpoint_name

    pattern = str(tmp_path / "out" / "{run_name}" / "rank{rank}" / "log.txt")
    state = State(model=torch.nn.Linear(2, 2), max_duration="1ep", steps_per_epoch=2, run_name="demo-1")
    destination = FileLogger(pattern, format=format, log_interval="1ba")
    _log_one_epoch(state, destination)
    expected = tmp_path / "out" / "demo-1" / "rank0" / "log.txt"
    assert expected == type(expected)(format_checkpoint_name(pattern, state, run_name="demo-1", rank=0))
    assert destination.filename == expected and expected.is_file()
    assert "loss/train" in expected.read_text()
    assert not (tmp_path / "out" / "{run_name}").exists()  # no folder literally named so


def test_a_placeholder_the_run_cannot_fill_is_refused_naming_the_choices(tmp_path):
    from composer.core import State

    state = State(model=torch.nn.Linear(2, 2), max_duration="1ep", steps_per_epoch=2, run_name="demo")
    with pytest.raises(ValueError, match=r"filename='.*\{user\}/log.txt' .*\{user\}.*'run_name'"):
        _log_one_epoch(state, FileLogger(tmp_path / "{user}" / "log.txt"))
    nameless = State(model=torch.nn.Linear(2, 2), max_duration="1ep", steps_per_epoch=2)
    with pytest.raises(ValueError, match=r"uses \{run_name\}, but the run has no name"):
        _log_one_epoch(nameless, FileLogger(tmp_path / "{run_name}" / "log.txt"))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_refused_after_the_placeholders_are_filled(tmp_path):
    from composer.core import State

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "log.txt").write_text("an earlier run\n")
    state = State(model=torch.nn.Linear(2, 2), max_duration="1ep", steps_per_epoch=2, run_name="demo")
    with pytest.raises(ValueError, match=r"filename='.*demo/log.txt' already exists and this run starts fresh"):
        _log_one_epoch(state, FileLogger(tmp_path / "{run_name}" / "log.txt"))
    assert (tmp_path / "demo" / "log.txt").read_text() == "an earlier run\n"


def test_a_trainers_file_logger_fills_in_its_run_name(tmp_path):
    train_24_batches(FileLogger(tmp_path / "out" / "{run_name}" / "log.txt"), run_name="digits-a")
    assert (tmp_path / "out" / "digits-a" / "log.txt").is_file()


def test_resuming_keeps_the_checkpoints_lines_and_drops_a_line_cut_short(tmp_path):
    from composer.loggers.file_logger import keep_lines

    path = tmp_path / "log.jsonl"
    path.write_text('{"batch": 0}\n{"batch": 1}\n{"batch": 2}\n{"bat')  # killed in the middle of a line
    assert keep_lines(path, {"lines": 2}, "filename") == 2
    assert path.read_text() == '{"batch": 0}\n{"batch": 1}\n'
    path.write_text('{"batch": 0}\n{"bat')
    assert keep_lines(path, None, "filename") == 1  # no count saved (a checkpoint without this logger): all whole lines
    assert path.read_text() == '{"batch": 0}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]  # the temporary file was renamed over it


def test_resuming_with_fewer_lines_than_the_checkpoint_counted_keeps_them_and_warns(tmp_path):
    from composer.loggers.file_logger import keep_lines

    path = tmp_path / "log.txt"
    path.write_text("one\n")
    with pytest.warns(UserWarning, match=r"log.txt' holds 1 lines, but the checkpoint .* after 3"):
        assert keep_lines(path, {"lines": 3}, "filename") == 1
    assert path.read_text() == "one\n"
