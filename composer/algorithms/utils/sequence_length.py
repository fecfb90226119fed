"""Cutting the sequences of a dict batch to a shorter length: what ALiBi and SeqLengthWarmup share.

:func:`cut_sequences` keeps each sequence's prefix, or re-reads all tokens in rows of the new length; ALiBi's
training-length scaling and SeqLengthWarmup's schedule both cut batches with it. The two agree on the length through
``state.sequence_cut`` (:attr:`~composer.core.state.State.sequence_cut`), never through each other.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from typing import Any

import torch

__all__ = ["batch_input_ids", "check_positive_int", "cut_sequences", "scaled_length"]

# Values for the padding that reshaping adds after the last token: unscored labels, masked attention.
_PAD_VALUES = {"labels": -100, "attention_mask": 0}
_DEFAULT_PAD_VALUE = 0


def check_positive_int(name: str, value: object) -> int:
    """``value`` if it is a positive int; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def scaled_length(seq_len: int, scaling: float) -> int:
    """``seq_len * scaling``, checked to be a whole number of tokens that divides ``seq_len`` (ValueError otherwise).

    Example:
        >>> scaled_length(64, 0.25)
        16
    """
    new_len = seq_len * scaling
    if not float(new_len).is_integer() or new_len < 1 or seq_len % int(new_len):
        raise ValueError(
            f"train_sequence_length_scaling={scaling} turns sequences of {seq_len} tokens into {new_len:g}; it must "
            f"give a whole number of tokens that divides {seq_len} (for example 0.25 or 0.5 when {seq_len} is a "
            "multiple of 4)."
        )
    return int(new_len)


def _reshape_rows(value: torch.Tensor, seq_len: int, pad_value: int) -> tuple[torch.Tensor, int]:
    """``value (B, S, ...)`` as rows of ``seq_len``: ``(ceil(B*S / seq_len), seq_len, ...)``, and the pad count."""
    flat = value.reshape(-1, *value.shape[2:])  # (B * S, ...): the tokens in reading order
    num_pad = -len(flat) % seq_len
    if num_pad:
        flat = torch.cat([flat, flat.new_full((num_pad, *flat.shape[1:]), pad_value)])
    return flat.reshape(-1, seq_len, *flat.shape[1:]), num_pad


def batch_input_ids(batch: Mapping[str, Any]) -> torch.Tensor:
    """``batch['input_ids']``, checked to be a ``(B, S)`` tensor in a mapping (TypeError or ValueError otherwise)."""
    if not isinstance(batch, Mapping):
        raise TypeError(
            f"Cutting sequences needs a batch that is a dict of tensors such as {{'input_ids': ..., "
            f"'labels': ...}}, got a {type(batch).__name__}. Use a dataset or collator that yields dicts."
        )
    if "input_ids" not in batch:
        raise ValueError(
            f"Cutting sequences needs batch['input_ids'] of shape (B, S) to know the sequence length; the "
            f"batch has keys {sorted(batch)}. Name the token ids 'input_ids'."
        )
    input_ids = batch["input_ids"]
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise ValueError(
            f"batch['input_ids'] must be a tensor of shape (B, S), got "
            f"{tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__}."
        )
    return input_ids


def cut_sequences(batch: Mapping[str, Any], curr_seq_len: int, truncate: bool = True) -> Mapping[str, Any]:
    """Returns the batch with every ``(B, S, ...)`` tensor cut to sequences of ``curr_seq_len`` tokens.

    ``truncate=True`` keeps the first ``curr_seq_len`` tokens of each sequence. ``truncate=False`` keeps every
    token: each tensor is read row after row and re-cut into rows of ``curr_seq_len`` (more, shorter sequences,
    ``ceil(B * S / curr_seq_len)`` of them); when the tokens do not fill the last row it is padded with
    ``labels = -100``, ``attention_mask = 0`` and ``0`` elsewhere, and an ``attention_mask`` is added if the batch
    had none. Every key is cut the same way (``input_ids``, ``labels``, ``attention_mask``, ``token_type_ids``,
    ...); tensors of another shape (per-sample labels) are left as they are when truncating. A batch of sequences
    no longer than ``curr_seq_len`` is returned unchanged. The result has the batch's mapping type (a
    ``transformers`` ``BatchEncoding`` stays one).

    Args:
        batch: A dict of tensors with ``'input_ids'`` of shape ``(B, S)``.
        curr_seq_len: The sequence length to cut to.
        truncate: Keep the prefix of each sequence (True) or reshape all tokens into shorter sequences (False).

    Returns:
        Mapping: The cut batch, of the input's mapping type (the input itself when nothing needed cutting).

    Raises:
        TypeError: If ``batch`` is not a mapping.
        ValueError: If it has no ``'input_ids'``, or (reshaping) a batched tensor that is not ``(B, S, ...)``.

    Example:
        >>> batch = {"input_ids": torch.arange(12).view(2, 6), "labels": torch.arange(12).view(2, 6)}
        >>> cut_sequences(batch, curr_seq_len=4, truncate=True)["input_ids"]
        tensor([[0, 1, 2, 3],
                [6, 7, 8, 9]])
        >>> reshaped = cut_sequences(batch, curr_seq_len=4, truncate=False)
        >>> reshaped["input_ids"]
        tensor([[ 0,  1,  2,  3],
                [ 4,  5,  6,  7],
                [ 8,  9, 10, 11]])
        >>> cut_sequences(batch, curr_seq_len=5, truncate=False)["labels"]
        tensor([[   0,    1,    2,    3,    4],
                [   5,    6,    7,    8,    9],
                [  10,   11, -100, -100, -100]])
    """
    input_ids = batch_input_ids(batch)
    check_positive_int("curr_seq_len", curr_seq_len)
    batch_size, seq_len = input_ids.shape
    if seq_len <= curr_seq_len:
        return batch
    result: MutableMapping[str, Any] = copy.copy(batch) if isinstance(batch, MutableMapping) else dict(batch)
    num_pad = 0
    for key, value in batch.items():
        if not isinstance(value, torch.Tensor) or value.ndim == 0:
            continue
        if value.ndim >= 2 and value.shape[:2] == (batch_size, seq_len):
            if truncate:
                result[key] = value[:, :curr_seq_len].contiguous()
            else:
                result[key], num_pad = _reshape_rows(value, curr_seq_len, _PAD_VALUES.get(key, _DEFAULT_PAD_VALUE))
        elif not truncate:
            raise ValueError(
                f"Cannot reshape batch[{key!r}] of shape {tuple(value.shape)} into sequences of {curr_seq_len}: "
                f"only tensors of shape (B, S, ...) = ({batch_size}, {seq_len}, ...) can be. Use truncate=True, or "
                "drop that key from the batch."
            )
    if num_pad and "attention_mask" not in batch:
        present = torch.ones(batch_size, seq_len, dtype=torch.long, device=input_ids.device)
        result["attention_mask"], _ = _reshape_rows(present, curr_seq_len, 0)
    return result
