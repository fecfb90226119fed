"""Training time: units, immutable amounts of time, and the Timer that counts them.

Durations and points in training are written as a number followed by a unit: ``'90ep'`` (epochs), ``'250ba'``
(batches), ``'1000sp'`` (samples), ``'2048tok'`` (tokens) or ``'0.5dur'`` (a fraction of the whole run). Every public
parameter that takes a time accepts such a string or a :class:`Time`; :meth:`Time.from_input` does the conversion.

The :class:`Timer` holds the trainer's counters. The training loop calls :meth:`Timer.on_batch_complete` after every
optimisation step and :meth:`Timer.on_epoch_complete` at the end of every epoch; everything else only reads it.

This module is where to import all four names from. :class:`TimeUnit`, :class:`Time` and the parsing are defined in
the private module ``composer.core._time``, and :class:`Timestamp` and :class:`Timer` in :mod:`composer.core.timer`,
which both build on it.
"""

from __future__ import annotations

from composer.core._time import Time, TimeUnit
from composer.core.timer import Timer, Timestamp

__all__ = ["Time", "TimeUnit", "Timer", "Timestamp"]
