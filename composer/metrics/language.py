"""MosaicML Composer v0.32.1's language-model metrics, on this library's per-token metrics.

Each takes the model's logits ``(B, S, V)`` (or a mapping holding them under ``'logits'``, as a Hugging Face model
returns them) and labels ``(B, S)``, flattens them, and scores every token whose label is not ``ignore_index``. No
shifting happens here: the labels must already line up with the logits, as v0.32.1 expected. This library's own
models feed their metrics through :func:`~composer.models.language_metrics.update_language_metric`, which shifts for
causal models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from composer.models.language_metrics import TokenAccuracy
from composer.models.metrics import CrossEntropy

__all__ = ["LanguageCrossEntropy", "LanguagePerplexity", "MaskedAccuracy", "flat_tokens"]


def flat_tokens(output: Mapping[str, Any] | torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``(..., V)`` (or ``output['logits']``) and labels ``(...)`` flattened to ``(N, V)`` and ``(N,)``.

    Args:
        output: Logits, or a mapping holding them under ``'logits'``.
        target: Labels with the logits' shape less the last dimension.

    Returns:
        tuple[Tensor, Tensor]: The flattened logits and labels.

    Example:
        >>> logits, labels = flat_tokens({"logits": torch.zeros(2, 3, 5)}, torch.zeros(2, 3, dtype=torch.long))
        >>> logits.shape, labels.shape
        (torch.Size([6, 5]), torch.Size([6]))
    """
    logits = output["logits"] if isinstance(output, Mapping) else output
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"Expected logits of shape (..., V) and labels of the same leading shape, got {tuple(logits.shape)} and "
            f"{tuple(target.shape)}."
        )
    return logits.reshape(-1, logits.shape[-1]), target.reshape(-1)


class LanguageCrossEntropy(CrossEntropy):
    """Mean cross-entropy per scored token (v0.32.1's name; this library's :class:`CrossEntropy` on flat tokens).

    Args:
        dist_sync_on_step: Synchronise the state across processes at every update (torchmetrics' option).
        ignore_index: Tokens whose label has this value are not scored.

    Example:
        >>> metric = LanguageCrossEntropy()
        >>> metric.update(torch.zeros(1, 2, 4), torch.tensor([[1, -100]]))  # uniform over 4 tokens
        >>> round(metric.compute().item(), 4)  # log(4)
        1.3863
    """

    def __init__(self, dist_sync_on_step: bool = False, ignore_index: int = -100) -> None:
        super().__init__(ignore_index=ignore_index)
        self.dist_sync_on_step = dist_sync_on_step

    def update(self, output: Mapping[str, Any] | torch.Tensor, target: torch.Tensor) -> None:
        """Adds the tokens of one batch.

        Args:
            output: Logits ``(B, S, V)``, or a mapping with them under ``'logits'``.
            target: Labels ``(B, S)``.
        """
        super().update(*flat_tokens(output, target))


class LanguagePerplexity(LanguageCrossEntropy):
    """``exp`` of the mean cross-entropy per scored token (v0.32.1's name; :class:`Perplexity` on flat tokens).

    Args:
        dist_sync_on_step: Synchronise the state across processes at every update (torchmetrics' option).
        ignore_index: Tokens whose label has this value are not scored.

    Example:
        >>> metric = LanguagePerplexity()
        >>> metric.update(torch.zeros(1, 2, 4), torch.tensor([[1, 2]]))
        >>> round(metric.compute().item(), 4)
        4.0
    """

    higher_is_better = False

    def compute(self) -> torch.Tensor:
        """Returns ``exp`` of the mean cross-entropy per scored token."""
        return torch.exp(super().compute())


class MaskedAccuracy(TokenAccuracy):
    """The fraction of scored tokens predicted right (v0.32.1's name for :class:`TokenAccuracy`).

    Args:
        ignore_index: Tokens whose label has this value are not scored.
        dist_sync_on_step: Synchronise the state across processes at every update (torchmetrics' option).

    Example:
        >>> metric = MaskedAccuracy(ignore_index=-100)
        >>> metric.update(torch.tensor([[[5.0, 0.0], [0.0, 5.0]]]), torch.tensor([[0, -100]]))
        >>> metric.compute()
        tensor(1.)
    """

    def __init__(self, ignore_index: int = -100, dist_sync_on_step: bool = False) -> None:
        super().__init__(ignore_index=ignore_index)
        self.dist_sync_on_step = dist_sync_on_step
