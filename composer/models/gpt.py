"""GPT: a compact decoder-only transformer language model, trainable as it is by the Trainer.

Pre-LayerNorm blocks (causal self-attention, then a GELU MLP), learned token and position embeddings, and an output
layer (optionally tied to the token embedding), as in GPT-2 (Radford et al. 2019). Attention runs through
:func:`torch.nn.functional.scaled_dot_product_attention`, so it uses the fused kernels where they exist. With the
default byte vocabulary it trains directly on :func:`composer.datasets.python_docs_dataloaders`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from composer.core.data_spec import Batch
from composer.models.base import ComposerModel

if TYPE_CHECKING:  # torchmetrics is imported when the metrics are built, not with the model
    from torchmetrics import Metric

__all__ = ["GPT", "CausalSelfAttention", "GPTBlock", "GPTConfig"]

_IGNORE_INDEX = -100


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The shape of a :class:`GPT`.

    Args:
        vocab_size: Number of token ids (256 for bytes).
        max_sequence_length: Longest input the learned position embedding covers.
        n_layer: Transformer blocks.
        n_head: Attention heads per block.
        n_embd: Width of the residual stream; a multiple of ``n_head``.
        dropout: Dropout on embeddings, attention weights and residual branches.
        tie_embeddings: Share the token embedding with the output layer (GPT-2 does). Off by default: for a byte
            vocabulary it saves only ``vocab_size * n_embd`` parameters and slows early learning (a 2-layer,
            64-wide model on the built-in text: training loss 2.56 nats after 300 steps untied, 3.03 tied).

    Example:
        >>> GPTConfig(n_layer=2, n_embd=64).n_head
        4
        >>> GPTConfig(n_embd=30, n_head=4)
        Traceback (most recent call last):
        ...
        ValueError: GPTConfig n_embd=30 must be a multiple of n_head=4 (each head gets n_embd / n_head channels).
    """

    vocab_size: int = 256
    max_sequence_length: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_sequence_length", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig {name} must be a positive int, got {value!r}.")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig n_embd={self.n_embd} must be a multiple of n_head={self.n_head} (each head gets "
                "n_embd / n_head channels)."
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig dropout must be in [0, 1), got {self.dropout!r}.")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: token ``i`` attends to tokens ``0..i``.

    Args:
        config: The model's shape.

    Example:
        >>> attention = CausalSelfAttention(GPTConfig(n_embd=32, n_head=4))
        >>> attention(torch.randn(2, 5, 32)).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # queries, keys and values in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.resid_dropout = nn.Dropout(config.dropout)

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of shape ``(B, n_head, S, head_dim)`` for inputs ``x`` of shape ``(B, S, D)``."""
        batch_size, seq_len, _ = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        shape = (batch_size, seq_len, self.n_head, self.n_embd // self.n_head)
        return q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2)

    def merge_heads(self, y: torch.Tensor) -> torch.Tensor:
        """The output projection of per-head results ``y`` of shape ``(B, n_head, S, head_dim)``: ``(B, S, D)``."""
        batch_size, _, seq_len, _ = y.shape
        y = y.transpose(1, 2).reshape(batch_size, seq_len, self.n_embd)
        out: torch.Tensor = self.resid_dropout(self.c_proj(y))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the attention output, shape ``(B, S, D)``, for inputs of shape ``(B, S, D)``."""
        q, k, v = self.split_heads(x)
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        return self.merge_heads(y)


class GPTBlock(nn.Module):
    """One pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``.

    Args:
        config: The model's shape.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the block's output, shape ``(B, S, D)``."""
        x = x + self.attn(self.ln_1(x))
        out: torch.Tensor = x + self.mlp(self.ln_2(x))
        return out


class GPT(ComposerModel):
    """A compact GPT language model that the Trainer trains directly (batches of token ids in, next-token loss out).

    Batches are dicts with ``'input_ids'`` of shape ``(B, S)`` (as Hugging Face collators and
    :func:`~composer.datasets.python_docs_dataloaders` produce them), optionally ``'labels'`` (default: the input
    ids; ``-100`` marks unscored tokens) and ``'attention_mask'``, which is read only to leave padding unscored when
    there are no labels (a padded tail does not affect earlier tokens under causal attention). A bare tensor of
    token ids works too. :meth:`forward` returns logits ``(B, S, vocab_size)``; :meth:`loss` is the mean
    cross-entropy of each position's prediction of the next token. Metrics (training and evaluation):
    ``CrossEntropy`` (per token, in nats), ``Perplexity``, ``TokenAccuracy``, and for a byte vocabulary
    (``vocab_size=256``, where a token is a byte) ``BitsPerByte``.

    Inputs longer than ``max_sequence_length`` raise a :class:`ValueError`: the learned position embedding has no
    row for them. :class:`~composer.algorithms.alibi.Alibi` replaces it and lifts that limit.

    Args:
        config: The model's shape; default :class:`GPTConfig` ``()`` (4 layers, 4 heads, width 128, bytes).

    Example:
        >>> model = GPT(GPTConfig(n_layer=2, n_embd=32, max_sequence_length=16))
        >>> batch = {"input_ids": torch.randint(0, 256, (2, 16))}
        >>> logits = model(batch)
        >>> logits.shape
        torch.Size([2, 16, 256])
        >>> abs(model.loss(logits, batch).item() - math.log(256)) < 0.5  # near uniform at initialisation
        True
        >>> model({"input_ids": torch.zeros(1, 17, dtype=torch.long)})
        Traceback (most recent call last):
        ...
        ValueError: GPT got a sequence of length 17, longer than max_sequence_length=16. ...
    """

    def __init__(self, config: GPTConfig | None = None) -> None:
        super().__init__()
        config = GPTConfig() if config is None else config
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT config must be a GPTConfig, got {type(config).__name__}.")
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.max_sequence_length, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(GPTBlock(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        # GPT-2's scaling of the residual projections: the residual stream's variance stays O(1) with depth.
        for name, parameter in self.named_parameters():
            if name.endswith(("attn.c_proj.weight", "mlp.2.weight")):
                nn.init.normal_(parameter, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @staticmethod
    def _input_ids(batch: Batch) -> torch.Tensor:
        if isinstance(batch, torch.Tensor):
            return batch
        if isinstance(batch, Mapping) and "input_ids" in batch:
            input_ids: torch.Tensor = batch["input_ids"]
            return input_ids
        keys = sorted(batch) if isinstance(batch, Mapping) else None
        raise ValueError(
            f"GPT expects a tensor of token ids or a dict with 'input_ids' of shape (B, S), got a "
            f"{type(batch).__name__}" + (f" with keys {keys}" if keys is not None else "") + "."
        )

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Returns next-token logits of shape ``(B, S, vocab_size)`` for token ids of shape ``(B, S)``."""
        if input_ids.ndim != 2:
            raise ValueError(f"GPT expects input_ids of shape (B, S), got shape {tuple(input_ids.shape)}.")
        seq_len = input_ids.shape[1]
        # Read from the module, not the config: Alibi swaps in a position embedding with a longer limit.
        limit = getattr(self.wpe, "num_embeddings", self.config.max_sequence_length)
        if seq_len > limit:
            raise ValueError(
                f"GPT got a sequence of length {seq_len}, longer than max_sequence_length={limit}. Truncate the "
                "inputs, build the model with a larger GPTConfig(max_sequence_length=...), or apply Alibi, whose "
                "max_sequence_length sets the limit."
            )
        positions = torch.arange(seq_len, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))  # (B, S, D) + (S, D)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.lm_head(self.ln_f(x))
        return logits

    def forward(self, batch: Batch) -> torch.Tensor:
        """Returns logits of shape ``(B, S, vocab_size)`` for a batch of token ids."""
        return self.logits(self._input_ids(batch))

    def labels(self, batch: Batch) -> torch.Tensor:
        """The batch's labels: ``'labels'``, else the input ids with padding (``attention_mask == 0``) unscored."""
        if isinstance(batch, Mapping) and "labels" in batch:
            labels: torch.Tensor = batch["labels"]
            return labels
        input_ids = self._input_ids(batch)
        if isinstance(batch, Mapping) and "attention_mask" in batch:
            return input_ids.masked_fill(batch["attention_mask"] == 0, _IGNORE_INDEX)
        return input_ids

    def loss(self, outputs: Any, batch: Batch, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Mean cross-entropy of the logits at each position against the label at the next one."""
        labels = self.labels(batch)
        logits = outputs[:, :-1]
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=_IGNORE_INDEX
        )

    def targets(self, batch: Batch) -> torch.Tensor:
        """Same as :meth:`labels`."""
        return self.labels(batch)

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        """Returns new per-next-token metrics: ``CrossEntropy``, ``Perplexity``, ``TokenAccuracy``, ``BitsPerByte``.

        ``BitsPerByte`` only for a byte vocabulary (``vocab_size=256``), where bits per token are bits per byte.
        """
        from composer.models.language_metrics import BitsPerByte, language_model_metrics

        del is_train
        metrics = language_model_metrics()
        if self.config.vocab_size == 256:
            metrics["BitsPerByte"] = BitsPerByte(ignore_index=-100)
        return metrics

    def update_metric(self, batch: Batch, outputs: Any, metric: Metric) -> None:
        """Updates ``metric`` with the logits shifted against the labels (position ``t`` predicts ``t + 1``)."""
        from composer.models.language_metrics import update_language_metric

        update_language_metric(metric, outputs, self.labels(batch), shift=True)
