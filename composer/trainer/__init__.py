"""The Trainer and what its loop calls into (devices, precision, schedulers, the profiler, compilation)."""

from composer.trainer.compilation import Compilation
from composer.trainer.profiler import Profiler
from composer.trainer.trainer import Trainer

__all__ = ["Compilation", "Profiler", "Trainer"]
