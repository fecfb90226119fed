"""Logged values in an MLflow run (a local SQLite file or folder, or a tracking server)."""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger, LogLevel
from composer.core.state import State
from composer.core.time import Time, Timestamp
from composer.loggers.buffered_destination import OpenedOnFitDestination
from composer.loggers.log_path import check_writable
from composer.loggers.log_value import is_number
from composer.loggers.optional_packages import is_package_available, require_package
from composer.loggers.record_buffer import Record

__all__ = ["MLflowLogger", "MLflowLoggerHparams", "is_mlflow_available"]

# MLflow's log_batch accepts at most 1000 metrics per call.
_MAX_METRICS_PER_CALL = 1000


def is_mlflow_available() -> bool:
    """Whether the ``mlflow`` package is installed (``pip install 'opencomposer[loggers]'``).

    Returns:
        bool: True when ``mlflow`` can be imported.
    """
    return is_package_available("mlflow")


def _local_path(tracking_uri: str) -> tuple[Path, bool] | None:
    """The file (SQLite) or folder (file store) a local tracking URI writes, or None for a server."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri.removeprefix("sqlite:///")), False
    if tracking_uri.startswith("file://"):
        return Path(tracking_uri.removeprefix("file://")), True
    if "://" not in tracking_uri:
        return Path(tracking_uri), True
    return None


class MLflowLogger(OpenedOnFitDestination):
    """Writes logged values to an MLflow run, through :class:`mlflow.tracking.MlflowClient` (no global active run).

    Numbers become metrics at step ``timestamp.batch``; strings and other values become run tags (tags may change,
    so a value logged again is simply updated); images become MLflow images. The run is created at
    ``Event.FIT_START`` (or at the first value logged, when nothing is trained), once any checkpoint is loaded, and
    ended when the trainer closes (``FAILED`` if training raised).

    A run that resumes from a checkpoint (``autoresume``, or ``load_path`` with the whole state) continues the same
    MLflow run: checkpoints save its ``run_id``, and the resumed run sets it back to ``RUNNING`` and logs on by step
    (a run id the tracking store no longer has starts a new run, with a warning). MLflow cannot delete single metric
    values, so a step that the interrupted run logged after its last checkpoint and the resumed run logs again holds
    two values in the metric's history, the resumed run's with the later timestamp; the run's latest value
    (``run.data.metrics``) and MLflow's charts of the latest values are the resumed run's. Keep the newest value per
    step when reading a history back::

        latest = {m.step: m.value for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.timestamp)}

    Metrics are sent in batches. With
    ``tracking_uri='sqlite:///path/mlflow.db'`` everything stays in one local file, no server needed; browse it with
    ``mlflow ui --backend-store-uri sqlite:///path/mlflow.db``. Needs the ``loggers`` extra.

    Args:
        tracking_uri (str, optional): Where runs are stored: ``'sqlite:///<file>'``, a folder, or a server URL.
            Default: MLflow's own default (the ``MLFLOW_TRACKING_URI`` environment variable, else a local store).
        experiment_name (str): The experiment; created if missing.
        run_name (str, optional): The run's name; default: MLflow picks one.
        tags (dict[str, str], optional): Tags set on the run when it is created.
        artifact_location (str, optional): Where a newly created experiment keeps artifacts (images); default:
            an ``mlartifacts`` folder next to a local store, else MLflow's default.
        log_level (LogLevel | str): The most verbose level written (default: BATCH).
        log_interval (str | Time | int): Write BATCH values every this many batches, or EPOCH values every this many
            epochs (``'1ep'``).
        flush_interval (int): Send after this many records are pending.

    Attributes:
        run_id (str | None): The MLflow run's id, once created.
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment_name: str = "composer",
        run_name: str | None = None,
        tags: dict[str, str] | None = None,
        artifact_location: str | None = None,
        log_level: LogLevel | str = LogLevel.BATCH,
        log_interval: str | Time[Any] | int = "1ba",
        flush_interval: int = 100,
    ) -> None:
        require_package("mlflow", "MLflowLogger")
        super().__init__(log_level, log_interval, flush_interval)
        if tracking_uri is not None:
            local = _local_path(tracking_uri)
            if local is not None:
                path, is_dir = local
                check_writable(path, "tracking_uri", is_dir=is_dir)
                if artifact_location is None:
                    artifact_location = str((path if is_dir else path.parent).resolve() / "mlartifacts")
        if artifact_location is not None and "://" not in artifact_location:
            check_writable(artifact_location, "artifact_location", is_dir=True)
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.artifact_location = artifact_location
        self.run_id: str | None = None
        self._client: Any = None

    def _open(self) -> Any:
        """The client, with the run created, or the checkpoint's run resumed, on the first call after INIT."""
        if self._client is not None or not self._started:
            return self._client
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        resumed_id = None if self.resumed_from is None else self.resumed_from.get("run_id")
        if resumed_id is not None:
            try:
                client.get_run(resumed_id)
            except MlflowException as error:
                warnings.warn(
                    f"The checkpoint this run resumes from logged to the MLflow run {resumed_id!r}, which the tracking "
                    f"store {self.tracking_uri!r} does not have ({error}); logging to a new run. Resume with the same "
                    "tracking_uri to continue that run.",
                    stacklevel=2,
                )
                resumed_id = None
        if resumed_id is not None:
            client.update_run(resumed_id, status="RUNNING")
            self._client, self.run_id = client, resumed_id
            return client
        experiment = client.get_experiment_by_name(self.experiment_name)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            experiment_id = client.create_experiment(self.experiment_name, artifact_location=self.artifact_location)
        run = client.create_run(experiment_id, run_name=self.run_name, tags=self.tags)
        self._client, self.run_id = client, run.info.run_id
        return client

    def resume_state(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.run_id = state.get("run_id")  # the run is reopened at FIT_START

    def write(self, records: list[Record]) -> None:
        if self._open() is None:
            return
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        metrics, tags = [], {}
        for record in records:
            step = int(record.timestamp.batch)
            for name, value in record.data.items():
                if is_number(value):
                    metrics.append(Metric(name, float(value), now_ms, step))
                else:
                    tags[name] = value if isinstance(value, str) else json.dumps(value)
        for start in range(0, len(metrics), _MAX_METRICS_PER_CALL):
            self._client.log_batch(self.run_id, metrics=metrics[start : start + _MAX_METRICS_PER_CALL])
        for name, text in tags.items():
            self._client.set_tag(self.run_id, name, text)

    def log_images(self, timestamp: Timestamp, log_level: LogLevel, name: str, images: Any) -> None:
        """Logs ``images`` (one (C, H, W) image or a (N, C, H, W) batch, floats in [0, 1]) as MLflow images."""
        del log_level
        self.flush()
        if self._open() is None:
            return
        batch = images if images.ndim == 4 else images[None]
        for i, image in enumerate(batch):
            key = name if len(batch) == 1 else f"{name}/{i}"
            # MLflow takes (H, W, C) arrays.
            array = image.detach().clamp(0, 1).permute(1, 2, 0).cpu().numpy()
            self._client.log_image(self.run_id, array, key=key, step=int(timestamp.batch))

    def log_text(self, timestamp: Timestamp, log_level: LogLevel, name: str, text: str) -> None:
        """Saves ``text`` as the run's artifact ``<name>/batch_<B>.txt``."""
        del log_level
        self.flush()
        if self._open() is None:
            return
        self._client.log_text(self.run_id, text, f"{name}/batch_{int(timestamp.batch)}.txt")

    def close(self, state: State, logger: Logger) -> None:
        super().close(state, logger)
        if self._client is not None:
            failed = sys.exc_info()[0] is not None
            self._client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")
            self._client = None


MLflowLoggerHparams = hparams_for(MLflowLogger)
"""See :class:`MLflowLogger`; the fields are its arguments (YAML key ``mlflow``)."""
