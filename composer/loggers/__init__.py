"""Where logged values go: the Logger and its destinations."""

from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.loggers.console import ConsoleLogger
from composer.loggers.in_memory import InMemoryLogger
from composer.loggers.progress_bar import ProgressBarLogger

__all__ = [
    "LOGGERS",
    "ConsoleLogger",
    "InMemoryLogger",
    "LogLevel",
    "Logger",
    "LoggerDestination",
    "ProgressBarLogger",
]

# Registry name -> destination class.
LOGGERS: dict[str, type[LoggerDestination]] = {
    "console": ConsoleLogger,
    "in_memory": InMemoryLogger,
    "progress_bar": ProgressBarLogger,
}
