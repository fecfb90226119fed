"""The Trainer and what its loop calls into (devices, precision, schedulers)."""

from composer.trainer.trainer import Trainer

__all__ = ["Trainer"]
