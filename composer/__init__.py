"""composer: train PyTorch models faster with an event-driven Trainer and composable speed-up methods.

``import composer`` is cheap: the names below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composer._lazy import lazy_attributes
from composer._version import __version__

if TYPE_CHECKING:
    from composer.core import (
        Algorithm,
        Callback,
        DataSpec,
        Engine,
        Evaluator,
        Event,
        Logger,
        LoggerDestination,
        LogLevel,
        State,
        Time,
        Timer,
        TimeUnit,
    )
    from composer.models import ComposerClassifier, ComposerModel
    from composer.trainer import Trainer

__all__ = [
    "Algorithm",
    "Callback",
    "ComposerClassifier",
    "ComposerModel",
    "DataSpec",
    "Engine",
    "Evaluator",
    "Event",
    "LogLevel",
    "Logger",
    "LoggerDestination",
    "State",
    "Time",
    "TimeUnit",
    "Timer",
    "Trainer",
    "__version__",
]

# Public name -> the module that defines it.
_LAZY = {
    "Algorithm": "composer.core",
    "Callback": "composer.core",
    "DataSpec": "composer.core",
    "Engine": "composer.core",
    "Evaluator": "composer.core",
    "Event": "composer.core",
    "LogLevel": "composer.core",
    "Logger": "composer.core",
    "LoggerDestination": "composer.core",
    "State": "composer.core",
    "Time": "composer.core",
    "TimeUnit": "composer.core",
    "Timer": "composer.core",
    "ComposerClassifier": "composer.models",
    "ComposerModel": "composer.models",
    "Trainer": "composer.trainer",
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
