"""Sequence-length warmup (Li et al. 2021): train on short sequences first, growing them to the full length."""

from composer.algorithms.seq_length_warmup.seq_length_warmup import (
    SeqLengthWarmup,
    SeqLengthWarmupHparams,
    apply_seq_length_warmup,
    set_batch_sequence_length,
    warmup_seq_length,
)

__all__ = [
    "SeqLengthWarmup",
    "SeqLengthWarmupHparams",
    "apply_seq_length_warmup",
    "set_batch_sequence_length",
    "warmup_seq_length",
]
