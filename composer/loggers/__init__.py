"""Where logged values go: the Logger and its destinations; ``LOGGERS`` maps each registry name to its class.

TensorBoard, MLflow and Weights & Biases need the ``loggers`` extra (``pip install 'opencomposer[loggers]'``); their
modules import those packages only when a run starts, so importing this package stays cheap.
"""

from composer.core.hparams import Hparams
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.loggers.buffered_destination import BufferedDestination
from composer.loggers.console import ConsoleLogger, ConsoleLoggerHparams
from composer.loggers.csv_logger import CSVLogger, CSVLoggerHparams
from composer.loggers.file_logger import FileLogger, FileLoggerHparams
from composer.loggers.in_memory import InMemoryLogger, InMemoryLoggerHparams
from composer.loggers.log_interval import LogInterval
from composer.loggers.mlflow_logger import MLflowLogger, MLflowLoggerHparams, is_mlflow_available
from composer.loggers.progress_bar import ProgressBarLogger, ProgressBarLoggerHparams
from composer.loggers.remote_uploader import RemoteUploader, RemoteUploaderHparams
from composer.loggers.tensorboard_logger import TensorboardLogger, TensorboardLoggerHparams, is_tensorboard_available
from composer.loggers.wandb_logger import WandBLogger, WandBLoggerHparams, is_wandb_available
from composer.utils.porting import pointer_getattr

__all__ = [
    "LOGGERS",
    "LOGGER_HPARAMS",
    "RANK_ZERO_DESTINATIONS",
    "BufferedDestination",
    "CSVLogger",
    "CSVLoggerHparams",
    "ConsoleLogger",
    "ConsoleLoggerHparams",
    "FileLogger",
    "FileLoggerHparams",
    "InMemoryLogger",
    "InMemoryLoggerHparams",
    "LogInterval",
    "LogLevel",
    "Logger",
    "LoggerDestination",
    "MLflowLogger",
    "MLflowLoggerHparams",
    "ProgressBarLogger",
    "ProgressBarLoggerHparams",
    "RemoteUploader",
    "RemoteUploaderHparams",
    "TensorboardLogger",
    "TensorboardLoggerHparams",
    "WandBLogger",
    "WandBLoggerHparams",
    "is_mlflow_available",
    "is_tensorboard_available",
    "is_wandb_available",
]

_NO_DESTINATION = (
    "this library has no destination for that service; log to MLflowLogger, WandBLogger or TensorboardLogger, or "
    "write a LoggerDestination of your own."
)
__getattr__ = pointer_getattr(
    __name__,
    {
        "RemoteUploaderDownloader": "RemoteUploader uploads the run's log files; checkpoints go to an s3:// save_folder.",
        "NeptuneLogger": _NO_DESTINATION,
        "CometMLLogger": _NO_DESTINATION,
        "MosaicMLLogger": _NO_DESTINATION,
        "SlackLogger": _NO_DESTINATION,
    },
)

# MosaicML Composer v0.32.1's spelling, the same class; importable, and left out of __all__ so that the API reference
# lists the class once.
MLFlowLogger = MLflowLogger

LOGGERS: dict[str, type[LoggerDestination]] = {
    "console": ConsoleLogger,
    "csv": CSVLogger,
    "file": FileLogger,
    "in_memory": InMemoryLogger,
    "mlflow": MLflowLogger,
    "progress_bar": ProgressBarLogger,
    "remote_uploader": RemoteUploader,
    "tensorboard": TensorboardLogger,
    "wandb": WandBLogger,
}
"""The logger registry: each name a recipe's ``loggers:`` may use, mapped to its destination class."""

LOGGER_HPARAMS: dict[str, type[Hparams]] = {
    "console": ConsoleLoggerHparams,
    "csv": CSVLoggerHparams,
    "file": FileLoggerHparams,
    "in_memory": InMemoryLoggerHparams,
    "mlflow": MLflowLoggerHparams,
    "progress_bar": ProgressBarLoggerHparams,
    "remote_uploader": RemoteUploaderHparams,
    "tensorboard": TensorboardLoggerHparams,
    "wandb": WandBLoggerHparams,
}
"""Each registry name mapped to the config class (``*Hparams``) that builds its destination from a recipe."""

RANK_ZERO_DESTINATIONS: tuple[type[LoggerDestination], ...] = (
    ConsoleLogger,
    CSVLogger,
    FileLogger,
    MLflowLogger,
    ProgressBarLogger,
    TensorboardLogger,
    WandBLogger,
)
"""Destinations that write to the console, files or an experiment tracker: a launched Trainer keeps them (and their
subclasses) on rank 0 only. Others (``InMemoryLogger``, your own) run on every rank; check ``state.rank`` in them if
they write somewhere."""
