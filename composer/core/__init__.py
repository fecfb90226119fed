"""The vocabulary of the library: events, time, state, the engine, algorithms, callbacks, logging and data."""

from composer.core.algorithm import Algorithm
from composer.core.callback import Callback
from composer.core.data_spec import DataSpec
from composer.core.engine import Engine, Trace, Traces
from composer.core.evaluator import Evaluator
from composer.core.event import Event
from composer.core.logging.logger import Logger, LoggerDestination, LogLevel
from composer.core.precision import Precision
from composer.core.serializable import Serializable
from composer.core.state import State
from composer.core.time import Time, Timer, Timestamp, TimeUnit

__all__ = [
    "Algorithm",
    "Callback",
    "DataSpec",
    "Engine",
    "Evaluator",
    "Event",
    "LogLevel",
    "Logger",
    "LoggerDestination",
    "Precision",
    "Serializable",
    "State",
    "Time",
    "TimeUnit",
    "Timer",
    "Timestamp",
    "Trace",
    "Traces",
]
