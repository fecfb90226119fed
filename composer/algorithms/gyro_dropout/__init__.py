"""Gyro Dropout: dropout over a fixed pool of masks (subnetworks), a few of them active at a time.

Lee et al., "Gyro Dropout: Maximizing Ensemble Effect in Neural Network Training", MLSys 2022.
"""

from composer.algorithms.gyro_dropout.gyro_dropout import (
    GyroDropout,
    GyroDropoutHparams,
    GyroDropoutLayer,
    apply_gyro_dropout,
    gyro_dropout_interval,
    gyro_dropout_masks,
)

__all__ = [
    "GyroDropout",
    "GyroDropoutHparams",
    "GyroDropoutLayer",
    "apply_gyro_dropout",
    "gyro_dropout_interval",
    "gyro_dropout_masks",
]
