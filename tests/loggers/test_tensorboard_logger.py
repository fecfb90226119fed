import pytest
import torch

from composer.callbacks import ImageVisualizer
from composer.loggers import TensorboardLogger, TensorboardLoggerHparams, is_tensorboard_available
from tests.loggers.conftest import assert_same_series, numeric_series

pytestmark = pytest.mark.skipif(not is_tensorboard_available(), reason="tensorboard is not installed")


def read_events(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def test_event_files_read_back_equal_the_in_memory_logger(run_training, tmp_path):
    memory = run_training(TensorboardLogger(tmp_path / "tb"))
    events = read_events(tmp_path / "tb")
    expected = numeric_series(memory)
    assert set(events.Tags()["scalars"]) == set(expected)
    for key, series in expected.items():
        written = [(event.step, event.value) for event in events.Scalars(key)]
        assert_same_series(written, series, key, rel=1e-6)  # TensorBoard stores float32
    assert "trainer/algorithms/text_summary" in events.Tags()["tensors"]


def test_images_from_the_visualizer_are_written(tmp_path):
    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer
    from composer.loggers import InMemoryLogger
    from composer.models import ComposerClassifier

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.rand(8, 3, 4, 4), torch.arange(8) % 2), batch_size=4)
    net = ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2)), num_classes=2)
    memory = InMemoryLogger()
    trainer = Trainer(
        model=net,
        train_dataloader=data,
        max_duration="2ep",
        loggers=[memory, TensorboardLogger(tmp_path / "tb")],
        callbacks=[ImageVisualizer(interval="1ep", num_images=3, nrow=2)],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    events = read_events(tmp_path / "tb")
    images = events.Images("images/train")
    assert [image.step for image in images] == [int(t.batch) for t, _ in memory.images["images/train"]] == [0, 2]
    grid = memory.images["images/train"][0][1]
    assert (images[0].height, images[0].width) == tuple(grid.shape[1:]) == (14, 14)


def test_bad_folder_fails_when_built_and_hparams_build(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"log_dir='.*file' cannot be written: it exists and is not a folder"):
        TensorboardLogger(tmp_path / "file")
    assert TensorboardLoggerHparams(log_dir=str(tmp_path / "tb")).initialize_object().log_dir == tmp_path / "tb"
