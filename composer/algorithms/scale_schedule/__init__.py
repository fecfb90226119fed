"""Scale the learning-rate schedule and the training budget by one ratio."""

from composer.algorithms.scale_schedule.scale_schedule import (
    SCALABLE_SCHEDULERS,
    ScaleSchedule,
    ScaleScheduleHparams,
    UnsupportedMethodError,
    scale_scheduler,
)

__all__ = ["SCALABLE_SCHEDULERS", "ScaleSchedule", "ScaleScheduleHparams", "UnsupportedMethodError", "scale_scheduler"]
