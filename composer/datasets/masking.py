"""Masked language modelling: hide a random part of the tokens and score the model only where it cannot copy.

A masked language model (BERT, RoBERTa) sees its whole input at once, so with labels equal to its input ids it
learns the identity: it reaches a high token accuracy by copying each token and learns nothing about language.
:func:`mask_tokens` applies the rule of Devlin et al., 2019 (`BERT <https://arxiv.org/abs/1810.04805>`_, section
3.1): each maskable token is chosen with probability ``mlm_probability``; a chosen token is replaced by the mask
token 80% of the time, by a random token 10% of the time and left as it is 10% of the time; the labels keep the
original token where one was chosen and ``-100`` (not scored) everywhere else. :class:`MaskingCollator` does the
same to the batches of a DataLoader.

The built-in byte vocabulary has no mask token among its 256 byte values, so :data:`BYTE_MASK_TOKEN_ID` is 256, one
past them: a masked language model over bytes has ``vocab_size=257`` (:data:`MASKED_BYTE_VOCAB_SIZE`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["BYTE_MASK_TOKEN_ID", "MASKED_BYTE_VOCAB_SIZE", "MaskingCollator", "mask_token_id_of", "mask_tokens"]

BYTE_MASK_TOKEN_ID = 256
"""The mask token of the byte vocabulary: one past the 256 byte values."""

MASKED_BYTE_VOCAB_SIZE = 257
"""The vocabulary of a masked language model over bytes: the 256 byte values and :data:`BYTE_MASK_TOKEN_ID`."""

_IGNORE_INDEX = -100
_BYTE_VALUES = 256
# A 63-bit odd multiplier: spreads a batch's tokens into a per-batch seed (see MaskingCollator's ``seed``).
_MIX = 0x5851F42D4C957F2D


def _check_probability(mlm_probability: float) -> float:
    if isinstance(mlm_probability, bool) or not isinstance(mlm_probability, (int, float)):
        raise ValueError(f"mlm_probability must be a number in (0, 1), got {mlm_probability!r}; BERT uses 0.15.")
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability!r}; BERT uses 0.15.")
    return float(mlm_probability)


def _check_token(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative token id, got {value!r}.")
    return value


def mask_token_id_of(config: object) -> int:
    """Returns the mask token of a model's config (its ``mask_token_id``), or the byte vocabulary's mask token.

    Use it to build the collator of a Hugging Face masked language model: ``transformers`` configs such as
    ``BertConfig`` may carry ``mask_token_id``; those that do not (and models trained on the built-in byte
    corpus) get :data:`BYTE_MASK_TOKEN_ID`.

    Args:
        config: A model config, such as ``model.config`` of a ``transformers`` model.

    Returns:
        int: The mask token id.

    Raises:
        ValueError: If the config's ``mask_token_id`` is not a non-negative int.

    Example:
        >>> from types import SimpleNamespace
        >>> mask_token_id_of(SimpleNamespace(mask_token_id=103)), mask_token_id_of(SimpleNamespace())
        (103, 256)
    """
    value = getattr(config, "mask_token_id", None)
    return BYTE_MASK_TOKEN_ID if value is None else _check_token("the config's mask_token_id", value)


def mask_tokens(
    input_ids: torch.Tensor,
    mask_token_id: int,
    vocab_size: int = _BYTE_VALUES,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    special_token_ids: Sequence[int] = (),
    maskable: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns ``(masked input ids, labels)`` for masked language modelling, by BERT's 80/10/10 rule.

    Each maskable token is chosen with probability ``mlm_probability``. A chosen token becomes ``mask_token_id``
    with probability 0.8, a token drawn uniformly from ``[0, vocab_size)`` with probability 0.1, and stays as it is
    with probability 0.1. The labels hold the original token at the chosen positions and ``-100`` (not scored)
    everywhere else, so the loss and the metrics measure only what the model could not copy. The input is not
    changed.

    Args:
        input_ids: Token ids of any shape, integer dtype.
        mask_token_id: The id that hides a token, such as ``model.config.mask_token_id`` (see
            :func:`mask_token_id_of`) or :data:`BYTE_MASK_TOKEN_ID`.
        vocab_size: Random replacements are drawn from ``[0, vocab_size)``; 256 for bytes.
        mlm_probability: The fraction of maskable tokens chosen. BERT uses 0.15.
        generator: The source of randomness; None draws from torch's default random state.
        special_token_ids: Ids never chosen (padding, ``[CLS]``, ``[SEP]``).
        maskable: Optional boolean tensor of ``input_ids``'s shape; False positions are never chosen (padding
            marked by an ``attention_mask`` of 0).

    Returns:
        tuple[torch.Tensor, torch.Tensor]: The masked input ids and the labels, both of ``input_ids``'s shape.

    Raises:
        ValueError: If ``input_ids`` is not an integer tensor, ``mlm_probability`` is not in (0, 1), a token id is
            negative, or ``maskable`` has another shape.

    Example:
        >>> ids = torch.arange(10, 30).reshape(2, 10)
        >>> masked, labels = mask_tokens(ids, mask_token_id=1, vocab_size=30, mlm_probability=0.5,
        ...                              generator=torch.Generator().manual_seed(0))
        >>> chosen = labels != -100
        >>> torch.equal(labels[chosen], ids[chosen]), torch.equal(masked[~chosen], ids[~chosen])
        (True, True)
        >>> bool((masked[chosen] == 1).any())
        True
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.is_floating_point() or input_ids.is_complex():
        shown = f"a {input_ids.dtype} tensor" if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids must be an integer tensor of token ids, got {shown}.")
    _check_token("mask_token_id", mask_token_id)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(
            f"vocab_size must be a positive int (random replacements are drawn below it), got {vocab_size!r}."
        )
    probability = _check_probability(mlm_probability)
    if maskable is not None and maskable.shape != input_ids.shape:
        raise ValueError(
            f"maskable must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(maskable.shape)}."
        )
    device = input_ids.device
    # Draw on the CPU with the (CPU) generator, so the same seed gives the same masks on every device.
    draws = torch.rand((3, *input_ids.shape), generator=generator)
    random_tokens = torch.randint(0, vocab_size, input_ids.shape, generator=generator, dtype=input_ids.dtype)
    draws, random_tokens = draws.to(device), random_tokens.to(device)
    allowed = torch.ones_like(input_ids, dtype=torch.bool) if maskable is None else maskable.to(device, torch.bool)
    for token in special_token_ids:
        allowed &= input_ids != _check_token("special_token_ids entry", token)
    chosen = (draws[0] < probability) & allowed
    to_mask = chosen & (draws[1] < 0.8)
    # Half of the remaining 20%: 10% of the chosen tokens become random ones, the last 10% stay as they are.
    to_randomize = chosen & ~to_mask & (draws[2] < 0.5)
    masked = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(to_randomize, random_tokens, masked)
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, _IGNORE_INDEX))
    return masked, labels


class MaskingCollator:
    """A DataLoader ``collate_fn`` that batches samples of ``{'input_ids': ...}`` and masks them (:func:`mask_tokens`).

    Pass it as ``collate_fn`` to a loader over samples such as :class:`~composer.datasets.ByteTextDataset`'s, or
    use the ``mlm_probability`` argument of :func:`~composer.datasets.python_docs_dataloaders` and
    :func:`~composer.datasets.text_file_dataloader`. The batch's ``input_ids`` are masked and its ``labels`` are
    replaced (``-100`` where nothing was chosen); positions with ``attention_mask`` 0 are never chosen.

    With ``seed=None`` (training) each batch draws from torch's random state, which in DataLoader workers is the
    per-worker state the loader seeds from its generator, so masks change every epoch and follow the run's seed.
    With an int ``seed`` (evaluation) a batch is masked from the seed and its own tokens, so the same batch gets
    the same masks at every evaluation and the numbers stay comparable.

    Args:
        mask_token_id: The id that hides a token (:func:`mask_token_id_of` reads it from a model's config).
        vocab_size: Random replacements are drawn from ``[0, vocab_size)``. Default: 256, the byte values.
        mlm_probability: The fraction of tokens chosen. Default: 0.15.
        special_token_ids: Ids never chosen.
        seed: None to draw from torch's random state, or an int for masks fixed per batch.

    Example:
        >>> collate = MaskingCollator(mask_token_id=BYTE_MASK_TOKEN_ID, seed=0)
        >>> samples = [{"input_ids": torch.arange(100), "labels": torch.arange(100)} for _ in range(4)]
        >>> batch = collate(samples)
        >>> batch["input_ids"].shape, bool((batch["labels"] == -100).any())
        (torch.Size([4, 100]), True)
        >>> torch.equal(collate(samples)["input_ids"], batch["input_ids"])  # seeded: the same masks again
        True
    """

    def __init__(
        self,
        mask_token_id: int,
        vocab_size: int = _BYTE_VALUES,
        mlm_probability: float = 0.15,
        special_token_ids: Sequence[int] = (),
        seed: int | None = None,
    ) -> None:
        self.mask_token_id = _check_token("mask_token_id", mask_token_id)
        self.vocab_size = vocab_size
        self.mlm_probability = _check_probability(mlm_probability)
        self.special_token_ids = tuple(_check_token("special_token_ids entry", t) for t in special_token_ids)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be None or an int, got {seed!r}.")
        self.seed = seed

    def _generator(self, input_ids: torch.Tensor) -> torch.Generator | None:
        if self.seed is None:
            return None
        # A seed from the collator's seed and the batch's tokens, so a batch seen again is masked the same way.
        # Integer arithmetic (wrapping on overflow), so the fingerprint is exact on every machine.
        weights = torch.arange(1, input_ids.numel() + 1, dtype=torch.int64) * _MIX
        fingerprint = int((input_ids.reshape(-1).long().cpu() * weights).sum().item())
        return torch.Generator().manual_seed((self.seed * _MIX + fingerprint) % (2**63))

    def __call__(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Stacks the samples' tensors into a batch and masks its ``input_ids``."""
        if not samples or not all(isinstance(s, Mapping) and "input_ids" in s for s in samples):
            shown = type(samples[0]).__name__ if samples else "no samples"
            raise ValueError(
                f"MaskingCollator expects samples that are dicts with an 'input_ids' entry, got {shown}. Use a dataset "
                "of dicts such as ByteTextDataset."
            )
        batch = {key: torch.stack([torch.as_tensor(s[key]) for s in samples]) for key in samples[0]}
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        batch["input_ids"], batch["labels"] = mask_tokens(
            input_ids,
            self.mask_token_id,
            self.vocab_size,
            self.mlm_probability,
            generator=self._generator(input_ids),
            special_token_ids=self.special_token_ids,
            maskable=None if attention_mask is None else attention_mask != 0,
        )
        return batch

    def __repr__(self) -> str:
        return (
            f"MaskingCollator(mask_token_id={self.mask_token_id}, vocab_size={self.vocab_size}, "
            f"mlm_probability={self.mlm_probability}, special_token_ids={self.special_token_ids}, seed={self.seed})"
        )
