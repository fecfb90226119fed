"""The Trainer and what its loop calls into (devices, precision, schedulers, the profiler)."""

from composer.trainer.profiler import Profiler
from composer.trainer.trainer import Trainer

__all__ = ["Profiler", "Trainer"]
