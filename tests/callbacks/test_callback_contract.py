"""The contract every registered callback and logger destination keeps.

Each one trains 2 batches through the Trainer, survives a second ``fit``, round-trips its ``state_dict`` (also through
``torch.save`` / ``torch.load(weights_only=True)``), and sees the State only through a read-only proxy: it may read
anything and stop the run through ``state.stop_training``, and nothing else (STYLE.md rule 10).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import os
import pkgutil
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import composer.callbacks
import composer.loggers
from composer import Callback, Trainer
from composer.callbacks import CALLBACKS, MetricStopper
from composer.core.logging.logger import LoggerDestination
from composer.datasets import ByteTextDataset
from composer.loggers import (
    LOGGERS,
    BufferedDestination,
    is_mlflow_available,
    is_tensorboard_available,
    is_wandb_available,
)
from composer.loggers.buffered_destination import OpenedOnFitDestination
from composer.loggers.file_destination import FileDestination
from composer.models import GPT, ComposerClassifier, GPTConfig
from tests.loggers.conftest import mlflow_uri

# Registry name -> a factory taking tmp_path (for destinations that write files).
SETTINGS: dict[str, Any] = {
    "activation_monitor": lambda tmp: CALLBACKS["activation_monitor"](interval="1ba"),
    "checkpoint_saver": lambda tmp: CALLBACKS["checkpoint_saver"](folder=str(tmp / "ckpt"), save_interval="1ba"),
    "early_stopper": lambda tmp: CALLBACKS["early_stopper"]("loss/train", patience="5ba"),
    "export_for_inference": lambda tmp: CALLBACKS["export_for_inference"](str(tmp / "model"), "torchscript"),
    "generate": lambda tmp: CALLBACKS["generate"](["def "], interval="1ba", max_new_tokens=2),
    "grad_monitor": lambda tmp: CALLBACKS["grad_monitor"](log_layer_grad_norms=True),
    "image_visualizer": lambda tmp: CALLBACKS["image_visualizer"](interval="1ba", num_images=2),
    "lr_monitor": lambda tmp: CALLBACKS["lr_monitor"](),
    "memory_monitor": lambda tmp: CALLBACKS["memory_monitor"](),
    "nan_monitor": lambda tmp: CALLBACKS["nan_monitor"](),
    "optimizer_monitor": lambda tmp: CALLBACKS["optimizer_monitor"](log_interval="1ba"),
    "runtime_estimator": lambda tmp: CALLBACKS["runtime_estimator"](skip_batches=1),
    "speed_monitor": lambda tmp: CALLBACKS["speed_monitor"](window_size=2),
    "system_metrics_monitor": lambda tmp: CALLBACKS["system_metrics_monitor"](log_interval="1ba"),
    "threshold_stopper": lambda tmp: CALLBACKS["threshold_stopper"]("loss/train", threshold=-1.0),
    "console": lambda tmp: LOGGERS["console"](log_level="batch", stream=io.StringIO()),
    "csv": lambda tmp: LOGGERS["csv"](tmp / "metrics.csv"),
    "file": lambda tmp: LOGGERS["file"](tmp / "log.jsonl", log_level="batch"),
    "in_memory": lambda tmp: LOGGERS["in_memory"](),
    "mlflow": lambda tmp: LOGGERS["mlflow"](mlflow_uri(tmp)),
    "progress_bar": lambda tmp: LOGGERS["progress_bar"](enabled=True, stream=io.StringIO(), refresh_seconds=0),
    # The bucket and endpoint of the test's S3 server (test_contract puts them in the environment).
    "remote_uploader": lambda tmp: LOGGERS["remote_uploader"](
        os.environ["COMPOSER_TEST_S3_FOLDER"], {"endpoint_url": os.environ["COMPOSER_TEST_S3_ENDPOINT"]}
    ),
    "tensorboard": lambda tmp: LOGGERS["tensorboard"](tmp / "tb"),
    "wandb": lambda tmp: LOGGERS["wandb"](dir=tmp),
}
NEEDS = {
    "system_metrics_monitor": (lambda: importlib.util.find_spec("psutil") is not None, "psutil"),
    "mlflow": (is_mlflow_available, "mlflow"),
    "tensorboard": (is_tensorboard_available, "tensorboard"),
    "wandb": (is_wandb_available, "wandb"),
}
NEEDS_S3 = {"remote_uploader"}  # a store to upload to: the session's moto server
SLOW = {"mlflow", "wandb"}
LANGUAGE = {
    "generate"
}  # needs a language model: a tiny GPT on byte text  # MLflow builds its SQLite schema; W&B starts a service process


def _params():
    for name in sorted({**CALLBACKS, **LOGGERS}):
        marks = []
        if name in NEEDS:
            available, package = NEEDS[name]
            marks.append(pytest.mark.skipif(not available(), reason=f"{package} is not installed"))
        if name in SLOW:
            marks.append(pytest.mark.slow)
        yield pytest.param(name, marks=marks, id=name)


class ReadOnlyState:
    """Reads go to the State; attribute writes raise; ``stop_training`` is the one way to change it."""

    def __init__(self, state):
        object.__setattr__(self, "_state", state)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_state"), name)

    def __setattr__(self, name, value):
        raise AssertionError(f"A callback assigned state.{name}; callbacks may only call state.stop_training().")

    def __delattr__(self, name):
        raise AssertionError(f"A callback deleted state.{name}; callbacks may only call state.stop_training().")


def fingerprint(state):
    """What a callback could change through references the proxy hands out (the stop reason is allowed)."""
    return (
        [p.detach().clone() for p in state.model.parameters()],
        [[(g["lr"], len(g["params"])) for g in opt.param_groups] for opt in state.optimizers],
        state.timer.state_dict(),
        str(state.max_duration),
        state.grad_accum,
        id(state.batch),
        id(state.outputs),
        id(state.loss),
        bytes(state.rng.get_state().numpy()),
        len(state.callbacks),
        len(state.algorithms),
    )


def assert_unchanged(before, after, who):
    params_before, *rest_before = before
    params_after, *rest_after = after
    for a, b in zip(params_before, params_after):
        assert torch.equal(a, b), f"{who} changed the model's parameters"
    assert rest_before == rest_after, f"{who} changed the training state"


class Guarded(LoggerDestination):
    """Runs ``inner`` against a read-only view of the State and checks it changed nothing."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):  # metric_names and the like, where the inner object has them
        return getattr(self.__dict__["inner"], name)

    def log_images(self, timestamp, log_level, name, images):
        if callable(getattr(self.inner, "log_images", None)):
            self.inner.log_images(timestamp, log_level, name, images)

    def log_text(self, timestamp, log_level, name, text):
        if callable(getattr(self.inner, "log_text", None)):
            self.inner.log_text(timestamp, log_level, name, text)

    def run_event(self, event, state, logger):
        before = fingerprint(state)
        self.inner.run_event(event, ReadOnlyState(state), logger)
        assert_unchanged(before, fingerprint(state), f"{type(self.inner).__name__} at {event}")

    def will_log(self, state, log_level):
        return self.inner.will_log(ReadOnlyState(state), log_level)

    def log_metric(self, timestamp, log_level, data):
        self.inner.log_metric(timestamp, log_level, data)

    def close(self, state, logger):
        self.inner.close(ReadOnlyState(state), logger)

    def post_close(self):
        self.inner.post_close()

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


def image_model_and_data():
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.rand(8, 3, 4, 4), torch.arange(8) % 3), batch_size=4)
    model = ComposerClassifier(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3)), num_classes=3)
    return model, data


def text_model_and_data():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=8))
    return model, DataLoader(ByteTextDataset(b"def f(x): return x * 2\n" * 2, seq_len=8), batch_size=2)


@pytest.mark.parametrize("name", list(_params()))
def test_contract(name, tmp_path, monkeypatch, request):
    monkeypatch.setenv("WANDB_SILENT", "true")
    if name in NEEDS_S3:
        server = request.getfixturevalue("s3_env")
        monkeypatch.setenv("COMPOSER_TEST_S3_FOLDER", f"s3://{server.create_bucket()}/logs")
        monkeypatch.setenv("COMPOSER_TEST_S3_ENDPOINT", server.endpoint_url)
    subject = SETTINGS[name](tmp_path)
    guarded = Guarded(subject)
    model, data = text_model_and_data() if name in LANGUAGE else image_model_and_data()
    is_destination = isinstance(subject, LoggerDestination) and not isinstance(subject, MetricStopper)
    trainer = Trainer(
        model=model,
        train_dataloader=data,
        eval_dataloader=data
        if name in LANGUAGE
        else DataLoader(TensorDataset(torch.rand(4, 3, 4, 4), torch.arange(4) % 3), batch_size=4),
        max_duration="2ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        loggers=[guarded] if is_destination else [composer.loggers.InMemoryLogger()],
        # Destinations that take images get some from an ImageVisualizer.
        callbacks=[CALLBACKS["image_visualizer"](interval="1ba", num_images=2)] if is_destination else [guarded],
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    assert int(trainer.state.timer.batch) == 2
    trainer.fit(duration="1ba")  # a second fit continues
    assert int(trainer.state.timer.batch) == 3
    trainer.close()

    saved = subject.state_dict()
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = SETTINGS[name](tmp_path / "fresh")
    fresh.load_state_dict(loaded)
    assert fresh.state_dict() == saved


def _defined_in(package, base):
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, base) and obj.__module__ == module.__name__:
                found.add(obj)
    return found


# Built by the Trainer from its arguments rather than listed in a config: DeferredNaNMonitor from check_finite (tested
# in tests/trainer/test_check_finite.py and tests/callbacks/test_nan_monitor.py).
UNREGISTERED: set[str] = {"DeferredNaNMonitor"}


def test_every_callback_and_destination_is_registered_and_has_settings():
    callbacks = {
        c for c in _defined_in(composer.callbacks, Callback) - {MetricStopper} if c.__name__ not in UNREGISTERED
    }
    assert callbacks == set(CALLBACKS.values())
    destinations = _defined_in(composer.loggers, LoggerDestination) - {
        BufferedDestination,
        OpenedOnFitDestination,
        FileDestination,
    }
    assert destinations == set(LOGGERS.values())
    assert set(SETTINGS) == set(CALLBACKS) | set(LOGGERS)


class AssignsBatch(Callback):
    def after_dataloader(self, state, logger):
        state.batch = None


class ChangesLR(Callback):
    def batch_end(self, state, logger):
        state.optimizers[0].param_groups[0]["lr"] = 0.0


class Stops(Callback):
    def batch_end(self, state, logger):
        state.stop_training("enough")


@pytest.mark.parametrize(
    ("callback", "message"),
    [(AssignsBatch(), "assigned state.batch"), (ChangesLR(), "changed the training state"), (Stops(), None)],
)
def test_the_guard_catches_writes_and_allows_stop_training(callback, message):
    model, data = image_model_and_data()
    trainer = Trainer(
        model=model, train_dataloader=data, max_duration="2ba", callbacks=[Guarded(callback)], progress_bar=False
    )
    if message is None:
        trainer.fit()
        assert trainer.state.stop_reason == "enough" and int(trainer.state.timer.batch) == 1
    else:
        with pytest.raises(AssertionError, match=message):
            trainer.fit()


# The fields each config needs beyond its defaults.
REQUIRED_FIELDS = {
    "early_stopper": {"monitor": "loss/train"},
    "generate": {"prompts": ["def "]},
    "threshold_stopper": {"monitor": "loss/train", "threshold": 0.1},
    "csv": {"filename": "{tmp}/m.csv"},
    "file": {"filename": "{tmp}/log.txt"},
    "mlflow": {"tracking_uri": "sqlite:///{tmp}/mlflow.db"},
    "remote_uploader": {"remote_folder": "s3://logs/run"},
    "tensorboard": {"log_dir": "{tmp}/tb"},
    "wandb": {"dir": "{tmp}"},
}


@pytest.mark.parametrize("name", list(_params()))
def test_every_entry_has_a_config_that_builds_it(name, tmp_path):
    from composer.callbacks import CALLBACK_HPARAMS
    from composer.loggers import LOGGER_HPARAMS

    configs = {**CALLBACK_HPARAMS, **LOGGER_HPARAMS}
    fields = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in REQUIRED_FIELDS.get(name, {}).items()}
    config = configs[name].from_dict(fields)
    assert type(config).from_dict(config.to_dict()) == config
    built = config.initialize_object()
    assert type(built) is {**CALLBACKS, **LOGGERS}[name]
