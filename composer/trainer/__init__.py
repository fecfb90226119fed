"""The Trainer and what its loop calls into (precision, schedulers, the profiler, compilation, preemption)."""

from composer.profiler.profiler import Profiler
from composer.trainer.compilation import Compilation
from composer.trainer.preemption import Interrupted, Preempted
from composer.trainer.trainer import Trainer

__all__ = ["Compilation", "Interrupted", "Preempted", "Profiler", "Trainer"]
