"""The numeric precisions training can run in."""

from __future__ import annotations

from enum import Enum

__all__ = ["Precision"]

_ALIASES = {"amp_fp16": "amp", "fp16": "amp", "amp_bf16": "bf16", "float32": "fp32", "bfloat16": "bf16"}


class Precision(Enum):
    """Numeric precision of training.

    Attributes:
        FP32: Full float32.
        AMP: Mixed float16 with a gradient scaler (CUDA only). Also accepted: ``'amp_fp16'``, ``'fp16'``.
        BF16: Mixed bfloat16 autocast, on CPU and CUDA; no scaler needed. Also accepted: ``'amp_bf16'``.

    Example:
        >>> Precision("amp_bf16")
        <Precision.BF16: 'bf16'>
    """

    FP32 = "fp32"
    AMP = "amp"
    BF16 = "bf16"

    @classmethod
    def _missing_(cls, value: object) -> Precision:
        if isinstance(value, str):
            key = value.lower()
            key = _ALIASES.get(key, key)
            for member in cls:
                if member.value == key:
                    return member
        choices = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"Unknown precision {value!r}; expected one of {choices} (or 'amp_fp16', 'amp_bf16').")
