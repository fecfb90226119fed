"""Sequence-length warmup: train on short sequences first, lengthening them step by step to the full length.

Li et al. 2021, "Curriculum Learning: A Regularization Method for Efficient and Stable Billion-Scale GPT Model
Pre-Training" (https://arxiv.org/abs/2108.06084). Early in training short sequences are cheaper per token (attention
is quadratic in length) and stabilise large learning rates; the length grows to the full one over the first
``duration`` of the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from composer.algorithms.utils.sequence_length import batch_input_ids, check_positive_int, cut_sequences, scaled_length
from composer.core.algorithm import Algorithm
from composer.core.event import Event
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State

__all__ = [
    "SeqLengthWarmup",
    "SeqLengthWarmupHparams",
    "apply_seq_length_warmup",
    "set_batch_sequence_length",
    "warmup_seq_length",
]


def _check_warmup(duration: float, min_seq_length: int, max_seq_length: int, step_size: int) -> None:
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0.0 <= duration <= 1.0:
        raise ValueError(
            f"duration must be a fraction of the run in [0, 1], got {duration!r}; for example 0.3 warms up over the "
            "first 30% of training."
        )
    check_positive_int("min_seq_length", min_seq_length)
    check_positive_int("max_seq_length", max_seq_length)
    check_positive_int("step_size", step_size)
    if min_seq_length > max_seq_length:
        raise ValueError(
            f"min_seq_length={min_seq_length} is greater than max_seq_length={max_seq_length}; the warmup goes from "
            "min_seq_length up to max_seq_length, so pass min_seq_length <= max_seq_length."
        )
    if (max_seq_length - min_seq_length) % step_size:
        raise ValueError(
            f"step_size={step_size} does not divide max_seq_length - min_seq_length = "
            f"{max_seq_length - min_seq_length} (from {min_seq_length} to {max_seq_length}), so the warmup would "
            "never reach max_seq_length exactly. Choose a step_size that divides the difference, or move "
            "min_seq_length."
        )


def warmup_seq_length(elapsed: float, duration: float, min_seq_length: int, max_seq_length: int, step_size: int) -> int:
    """Returns the sequence length at ``elapsed`` (a fraction of the run) under the warmup schedule.

    The ``n = (max_seq_length - min_seq_length) / step_size`` lengths ``min_seq_length, min_seq_length + step_size,
    ..., max_seq_length - step_size`` each last ``duration / n`` of the run, in that order; from ``elapsed =
    duration`` on the length is ``max_seq_length``.

    Args:
        elapsed: Fraction of training done, in ``[0, 1]``.
        duration: Fraction of training the warmup lasts.
        min_seq_length: Length at the start.
        max_seq_length: Length at the end of the warmup and after it.
        step_size: Increment between lengths; it divides ``max_seq_length - min_seq_length``.

    Returns:
        int: The sequence length to train on at ``elapsed``.

    Example:
        >>> [warmup_seq_length(e / 10, 0.4, 8, 32, 8) for e in range(6)]
        [8, 8, 16, 24, 32, 32]
    """
    _check_warmup(duration, min_seq_length, max_seq_length, step_size)
    num_steps = (max_seq_length - min_seq_length) // step_size
    if duration == 0 or elapsed >= duration:
        return max_seq_length
    return min_seq_length + step_size * min(num_steps, int(num_steps * elapsed / duration))


def apply_seq_length_warmup(batch: Mapping[str, Any], curr_seq_len: int, truncate: bool = True) -> Mapping[str, Any]:
    """Returns the batch with every ``(B, S, ...)`` tensor cut to sequences of ``curr_seq_len`` tokens.

    :func:`~composer.algorithms.utils.sequence_length.cut_sequences` under the name of the method's functional API:
    ``truncate=True`` keeps each sequence's prefix, ``truncate=False`` re-reads all tokens in rows of
    ``curr_seq_len`` (padding the last).

    Args:
        batch: A dict of tensors with ``'input_ids'`` of shape ``(B, S)``.
        curr_seq_len: The sequence length to cut to.
        truncate: Keep the prefix of each sequence (True) or reshape all tokens into shorter sequences (False).

    Returns:
        Mapping: The cut batch, of the input's mapping type (the input itself when nothing needed cutting).

    Example:
        >>> batch = {"input_ids": torch.arange(12).view(2, 6)}
        >>> apply_seq_length_warmup(batch, curr_seq_len=4)["input_ids"]
        tensor([[0, 1, 2, 3],
                [6, 7, 8, 9]])
    """
    return cut_sequences(batch, curr_seq_len, truncate)


set_batch_sequence_length = apply_seq_length_warmup
"""Alias of :func:`apply_seq_length_warmup` (the name in Composer's ``composer.functional``): the same function."""


def _combined_cut(
    curr_seq_len: int, truncate: bool, min_seq_length: int, scaled_seq_len: int | None
) -> tuple[int, bool]:
    """The one cut to make, ``(length, truncate)``, when ALiBi's scaling also asks for ``scaled_seq_len`` tokens.

    Both lengths come from the batch the dataloader yielded. ALiBi's is raised to ``min_seq_length``; unless the
    warmup's ``curr_seq_len`` is then shorter, it applies, by reshaping (ALiBi keeps every token); otherwise the
    warmup's length applies, in its own mode. ``scaled_seq_len=None`` (no ALiBi scaling) gives the warmup's cut.

    Example:
        >>> _combined_cut(16, True, 8, 4), _combined_cut(16, True, 8, 12), _combined_cut(12, True, 8, 12)
        ((8, False), (12, False), (12, False))
        >>> _combined_cut(8, True, 8, 12), _combined_cut(8, False, 8, None)
        ((8, True), (8, False))
    """
    if scaled_seq_len is not None and max(scaled_seq_len, min_seq_length) <= curr_seq_len:
        return max(scaled_seq_len, min_seq_length), False
    return curr_seq_len, truncate


def _tile_to_length(value: Any, num_rows: int, batch_size: int, seq_len: int, length: int) -> Any:
    """A batch entry for the pre-allocation pass: ``num_rows`` rows, sequences repeated out to ``length``."""
    if not isinstance(value, torch.Tensor) or value.ndim == 0 or value.shape[0] != batch_size:
        return value
    value = value[:num_rows]
    if value.ndim >= 2 and value.shape[1] == seq_len:
        repeats = (1, math.ceil(length / seq_len), *([1] * (value.ndim - 2)))
        value = value.repeat(*repeats)[:, :length]
    return value


class SeqLengthWarmup(Algorithm):
    """Progressively increases the sequence length during training.

    On every ``AFTER_DATALOADER`` the batch's sequences are cut to the current length (see
    :func:`warmup_seq_length`): ``min_seq_length`` at the start, growing by ``step_size`` until ``max_seq_length``
    at ``duration`` of the run, then ``max_seq_length`` to the end. ``truncate=True`` keeps each sequence's prefix;
    ``truncate=False`` reshapes all tokens into more, shorter sequences (see :func:`apply_seq_length_warmup`).
    Batches must be dicts with ``'input_ids'``, as Hugging Face collators produce them.

    With :class:`~composer.algorithms.Alibi` and its ``train_sequence_length_scaling`` in the same run, the batch
    is cut once, here, whatever the order of the two in ``algorithms``: at ``INIT`` this algorithm says in
    ``state.sequence_cut`` that it cuts to a schedule, and ALiBi says its scaling there. Both lengths are computed
    from the batch the dataloader yielded; ALiBi's (raised to ``min_seq_length`` if it is below) applies, by
    reshaping, unless the scheduled length is shorter, which then applies as without ALiBi.

    Changing lengths can fragment GPU memory, so on the first batch the algorithm runs one forward and backward
    pass at ``max_seq_length`` (the batch's own tokens repeated, with ``ceil(batch_size / grad_accum)`` rows) to
    allocate memory for the largest shape first, then clears the gradients. That pass uses no training randomness:
    it draws nothing from ``state.rng`` and restores torch's random state (dropout) afterwards.

    Args:
        duration: Fraction of training spent warming up, in ``[0, 1]``.
        min_seq_length: Sequence length at the start.
        max_seq_length: Sequence length at the end of the warmup (and of the pre-allocation pass).
        step_size: Increment of the length; must divide ``max_seq_length - min_seq_length`` (a multiple of 8 suits
            GPUs).
        truncate: Truncate sequences (True) or reshape their tokens into more, shorter sequences (False).

    Example:
        >>> from composer.algorithms import SeqLengthWarmup
        >>> SeqLengthWarmup(duration=0.5, min_seq_length=16, max_seq_length=128, step_size=16)
        SeqLengthWarmup(duration=0.5, min_seq_length=16, max_seq_length=128, step_size=16, truncate=True)
        >>> SeqLengthWarmup(min_seq_length=8, max_seq_length=100, step_size=8)
        Traceback (most recent call last):
        ...
        ValueError: step_size=8 does not divide max_seq_length - min_seq_length = 92 ...
    """

    def __init__(
        self,
        duration: float = 0.3,
        min_seq_length: int = 8,
        max_seq_length: int = 1024,
        step_size: int = 8,
        truncate: bool = True,
    ) -> None:
        _check_warmup(duration, min_seq_length, max_seq_length, step_size)
        self.duration = duration
        self.min_seq_length = min_seq_length
        self.max_seq_length = max_seq_length
        self.step_size = step_size
        self.truncate = truncate
        self._preallocated = False

    def match(self, event: Event, state: State) -> bool:
        """Runs on ``INIT`` and every ``AFTER_DATALOADER``."""
        return event == Event.AFTER_DATALOADER or event == Event.INIT

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        """Pre-allocates memory on the first batch, then cuts the batch to the scheduled length (or ALiBi's)."""
        if event == Event.INIT:
            state.sequence_cut.scheduled = True  # ALiBi's scaling is applied here, in the same cut
            return
        if not self._preallocated:
            self._preallocate(state)
            self._preallocated = True
        curr_seq_len = warmup_seq_length(
            state.get_elapsed_duration().value, self.duration, self.min_seq_length, self.max_seq_length, self.step_size
        )
        batch, scaling = state.batch_dict, state.sequence_cut.scaling
        scaled_seq_len = None if scaling == 1.0 else scaled_length(int(batch_input_ids(batch).shape[1]), scaling)
        curr_seq_len, truncate = _combined_cut(curr_seq_len, self.truncate, self.min_seq_length, scaled_seq_len)
        state.batch = cut_sequences(batch, curr_seq_len, truncate)
        logger.metric_batch(
            {
                "seq_length_warmup/curr_seq_len": curr_seq_len,
                "seq_length_warmup/curr_bs": int(state.batch["input_ids"].shape[0]),
            }
        )

    def _preallocate(self, state: State) -> None:
        batch = state.batch_dict
        input_ids = batch.get("input_ids")
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
            return  # apply_seq_length_warmup reports the problem with the batch
        batch_size, seq_len = input_ids.shape
        num_rows = math.ceil(batch_size / state.grad_accum)
        full = {
            key: _tile_to_length(value, num_rows, batch_size, seq_len, self.max_seq_length)
            for key, value in batch.items()
        }
        model: Any = state.model
        cuda_devices = [state.device] if state.device.type == "cuda" else []
        # fork_rng restores torch's CPU (and this GPU's) random state afterwards, so dropout here draws nothing
        # that training would have drawn.
        with torch.random.fork_rng(devices=cuda_devices):
            outputs = model(full)
            loss = model.loss(outputs, full)
            losses = [loss] if isinstance(loss, torch.Tensor) else list(loss)
            torch.autograd.backward(torch.stack([part.float() for part in losses]).sum())
        model.zero_grad(set_to_none=True)
        for optimizer in state.optimizers:
            optimizer.zero_grad(set_to_none=True)


SeqLengthWarmupHparams = hparams_for(SeqLengthWarmup)
"""See :class:`SeqLengthWarmup`; the fields are its arguments (YAML key ``seq_length_warmup``)."""
