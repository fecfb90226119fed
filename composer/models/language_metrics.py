"""Metrics of language models: per-token cross-entropy, perplexity and token accuracy, and how to feed them logits.

Language models give logits of shape ``(B, S, V)`` and labels of shape ``(B, S)`` in which ``-100`` marks a token
that is not scored (padding, or an unmasked token in masked language modelling). :func:`update_language_metric`
shifts them for a causal model (the logits at position ``t`` predict the label at ``t + 1``), flattens them to
``(N, V)`` and ``(N,)``, and updates a metric; every metric here averages over scored tokens, not over batches.
"""

from __future__ import annotations

import math

import torch
from torchmetrics import Metric

from composer.models.metrics import CrossEntropy

__all__ = ["BitsPerByte", "Perplexity", "TokenAccuracy", "language_model_metrics", "update_language_metric"]

_IGNORE_INDEX = -100


class Perplexity(CrossEntropy):
    """``exp`` of the mean per-token cross-entropy over every scored token seen.

    Args:
        ignore_index: Tokens whose label has this value are not scored.

    Example:
        >>> metric = Perplexity()
        >>> metric.update(torch.zeros(4, 10), torch.tensor([1, 2, 3, -100]))  # uniform over 10 tokens
        >>> round(metric.compute().item(), 4)
        10.0
    """

    def compute(self) -> torch.Tensor:
        """Returns ``exp(summed loss / scored tokens)``."""
        return torch.exp(super().compute())


class BitsPerByte(CrossEntropy):
    """The mean per-token cross-entropy in bits: bits per byte when every token is one byte (a byte-level model).

    The usual figure for byte-level language models: it compares across vocabularies and with compressors (a
    model that has learnt nothing scores 8 bits per byte on a 256-byte vocabulary).

    Args:
        ignore_index: Tokens whose label has this value are not scored.

    Example:
        >>> metric = BitsPerByte()
        >>> metric.update(torch.zeros(3, 256), torch.tensor([1, 2, -100]))  # uniform over 256 bytes
        >>> round(metric.compute().item(), 4)
        8.0
    """

    def compute(self) -> torch.Tensor:
        """Returns ``summed loss / scored tokens / ln 2``."""
        return super().compute() / math.log(2)


class TokenAccuracy(Metric):
    """The fraction of scored tokens whose most likely prediction is the label.

    Args:
        ignore_index: Tokens whose label has this value are not scored.

    Example:
        >>> metric = TokenAccuracy()
        >>> logits = torch.tensor([[5.0, 0.0], [0.0, 5.0], [5.0, 0.0]])
        >>> metric.update(logits, torch.tensor([0, 0, -100]))
        >>> metric.compute()
        tensor(0.5000)
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    correct: torch.Tensor
    total: torch.Tensor

    def __init__(self, ignore_index: int = _IGNORE_INDEX) -> None:
        super().__init__()
        self.ignore_index = ignore_index
        self.add_state("correct", default=torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        """Counts the correct predictions among the scored tokens.

        Args:
            preds: Logits, shape ``(N, V)``.
            target: Token labels, shape ``(N,)``.
        """
        scored = target != self.ignore_index
        self.correct += ((preds.argmax(dim=-1) == target) & scored).sum()
        self.total += scored.sum()

    def compute(self) -> torch.Tensor:
        """Returns correct / scored tokens over every batch since the last reset."""
        return self.correct.float() / self.total


def language_model_metrics() -> dict[str, Metric]:
    """Returns new ``{'CrossEntropy', 'Perplexity', 'TokenAccuracy'}`` metrics, all per scored token.

    Example:
        >>> sorted(language_model_metrics())
        ['CrossEntropy', 'Perplexity', 'TokenAccuracy']
    """
    return {
        "CrossEntropy": CrossEntropy(ignore_index=_IGNORE_INDEX),
        "Perplexity": Perplexity(ignore_index=_IGNORE_INDEX),
        "TokenAccuracy": TokenAccuracy(ignore_index=_IGNORE_INDEX),
    }


def update_language_metric(metric: Metric, logits: torch.Tensor, labels: torch.Tensor, shift: bool) -> None:
    """Updates ``metric`` with a batch of language-model logits and labels.

    Args:
        metric: A metric taking ``(logits (N, V), labels (N,))``, such as those of :func:`language_model_metrics`.
        logits: Shape ``(B, S, V)``.
        labels: Shape ``(B, S)``; ``-100`` marks tokens that are not scored.
        shift: True for a causal model, whose logits at position ``t`` predict the label at ``t + 1``; False when
            the logits at ``t`` predict the label at ``t`` (masked language modelling).

    Example:
        >>> metric = TokenAccuracy()
        >>> labels = torch.tensor([[3, 1, 2]])
        >>> logits = torch.nn.functional.one_hot(torch.tensor([[1, 2, 0]]), 4).float()  # predicts the next label
        >>> update_language_metric(metric, logits, labels, shift=True)
        >>> metric.compute()
        tensor(1.)
    """
    if logits.ndim != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            f"Expected logits of shape (B, S, V) and labels of shape (B, S), got {tuple(logits.shape)} and "
            f"{tuple(labels.shape)}."
        )
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    # Detached: a training metric must not keep the batch's autograd graph alive.
    metric.update(logits.detach().reshape(-1, logits.shape[-1]), labels.reshape(-1))
