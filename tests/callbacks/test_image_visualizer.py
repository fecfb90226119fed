import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Algorithm, Event, Trainer
from composer.callbacks import ImageVisualizer, ImageVisualizerHparams, make_image_grid
from composer.loggers import CSVLogger, InMemoryLogger
from composer.models import ComposerClassifier


def test_grid_places_images_row_by_row_with_padding():
    images = torch.arange(1, 4).float().view(3, 1, 1, 1).expand(3, 1, 2, 2)  # three constant 2x2 images
    grid = make_image_grid(images / 4, nrow=2, padding=1, normalize=False)
    expected = torch.zeros(1, 7, 7)
    expected[:, 1:3, 1:3] = 0.25
    expected[:, 1:3, 4:6] = 0.5
    expected[:, 4:6, 1:3] = 0.75
    torch.testing.assert_close(grid, expected)


def test_grid_normalizes_each_image_to_the_unit_range():
    images = torch.tensor([[[[-2.0, 2.0]]], [[[10.0, 30.0]]]])  # (2, 1, 1, 2)
    grid = make_image_grid(images, nrow=1, padding=0)
    torch.testing.assert_close(grid, torch.tensor([[[0.0, 1.0], [0.0, 1.0]]]))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\) batch; got shape \(2, 2\)"):
        make_image_grid(torch.zeros(2, 2))


class Invert(Algorithm):
    """An augmentation at AFTER_DATALOADER: x -> 1 - x."""

    def match(self, event, state):
        return event == Event.AFTER_DATALOADER

    def apply(self, event, state, logger):
        x, y = state.batch
        state.batch = (1 - x, y)


def train(visualizer, *loggers, algorithms=()):
    torch.manual_seed(0)
    images = torch.rand(8, 3, 4, 4)
    data = DataLoader(TensorDataset(images, torch.arange(8) % 2), batch_size=4)
    net = ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2)), num_classes=2)
    trainer = Trainer(
        model=net,
        train_dataloader=data,
        max_duration="2ep",
        algorithms=list(algorithms),
        loggers=list(loggers),
        callbacks=[visualizer],
        progress_bar=False,
    )
    trainer.fit()
    trainer.close()
    return images


def test_logs_the_inputs_after_augmentation_every_interval():
    memory = InMemoryLogger()
    images = train(ImageVisualizer(interval="3ba", num_images=2, normalize=False), memory, algorithms=[Invert()])
    logged = memory.images["images/train"]
    assert [int(t.batch) for t, _ in logged] == [0, 3]
    expected = make_image_grid(1 - images[:2], normalize=False)  # the first two inputs of batch 0, inverted
    torch.testing.assert_close(logged[0][1], expected)


def test_nothing_is_computed_without_a_destination_that_takes_images(tmp_path, monkeypatch):
    calls = []
    import composer.callbacks.image_visualizer as module

    monkeypatch.setattr(module, "make_image_grid", lambda *a, **k: calls.append(1))
    train(ImageVisualizer(interval="1ba"), CSVLogger(tmp_path / "m.csv"))
    assert calls == []


def test_bad_inputs_are_explained():
    with pytest.raises(ValueError, match="interval='0.5dur' must be a whole number of batches or epochs"):
        ImageVisualizer(interval="0.5dur")
    visualizer = ImageVisualizer(interval="1ba")
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.rand(4, 6), torch.arange(4) % 2), batch_size=4)
    net = ComposerClassifier(torch.nn.Linear(6, 2), num_classes=2)
    trainer = Trainer(
        model=net,
        train_dataloader=data,
        max_duration="1ba",
        loggers=[InMemoryLogger()],
        callbacks=[visualizer],
        progress_bar=False,
    )
    with pytest.raises(ValueError, match=r"needs a batch of images \(N, C, H, W\); the inputs are \(4, 6\)"):
        trainer.fit()


def test_hparams():
    visualizer = ImageVisualizerHparams(interval="1ep", num_images=4).initialize_object()
    assert str(visualizer.interval) == "1ep" and visualizer.num_images == 4
