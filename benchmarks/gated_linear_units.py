"""Gated Linear Units on the built-in text at equal wall time: validation perplexity of the GPT with and without GLU.

Two copies of ``GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=64))`` (the same initial weights
outside the feed-forward blocks), one with :func:`~composer.functional.apply_gated_linear_units` (GEGLU by default,
hidden size 168 instead of 256), train on the built-in Python-documentation text (batches of 16 x 64 bytes, the same
order for both) with AdamW (lr 2e-3, 20 warm-up steps, then constant). They take turns: each trains for ``--slice``
seconds, then the other, until each has had ``--budget`` seconds, so a drift in the speed of a shared machine hits
both alike. Then each is evaluated on the first ``--eval-batches`` batches of the validation split; the figure is the
validation perplexity (exp of the mean per-byte loss) at equal training time, with the steps each took and the
median of the per-turn step-time ratios (GLU / baseline).

Run:  .venv/bin/python benchmarks/gated_linear_units.py [--budget 120] [--slice 5] [--activation gelu] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from collections.abc import Iterator

import torch

from composer.datasets import python_docs_dataloaders
from composer.functional import apply_gated_linear_units
from composer.models import GPT, GPTConfig

__all__: list[str] = []


class _Run:
    def __init__(self, model: GPT, seed: int) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=1e-4)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: min(1.0, (step + 1) / 20))
        train, _ = python_docs_dataloaders(seq_len=64, batch_size=16, seed=seed)
        self.batches = self._forever(train)
        self.steps = 0
        self.seconds = 0.0

    @staticmethod
    def _forever(loader: torch.utils.data.DataLoader) -> Iterator[dict[str, torch.Tensor]]:
        while True:
            yield from loader

    def train_for(self, seconds: float) -> float:
        """Trains for about ``seconds``; returns the time per step of this turn."""
        self.model.train()
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            batch = next(self.batches)
            self.optimizer.zero_grad(set_to_none=True)
            self.model.loss(self.model(batch), batch).backward()
            self.optimizer.step()
            self.scheduler.step()
            steps += 1
        elapsed = time.perf_counter() - start
        self.steps += steps
        self.seconds += elapsed
        return elapsed / steps

    @torch.no_grad()
    def validation_loss(self, batches: int) -> float:
        self.model.eval()
        _, validation = python_docs_dataloaders(seq_len=64, batch_size=16)
        losses = []
        for i, batch in enumerate(validation):
            if i == batches:
                break
            losses.append(float(self.model.loss(self.model(batch), batch)))
        return statistics.fmean(losses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=120.0, help="training seconds per model")
    parser.add_argument("--slice", type=float, default=5.0, help="seconds per turn")
    parser.add_argument("--activation", default="gelu")
    parser.add_argument("--eval-batches", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    base_model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=64))
    glu_model = apply_gated_linear_units(
        copy.deepcopy(base_model), activation=args.activation, generator=torch.Generator().manual_seed(args.seed)
    )
    counts = [sum(p.numel() for p in m.parameters()) for m in (base_model, glu_model)]
    base, glu = _Run(base_model, args.seed), _Run(glu_model, args.seed)
    ratios = []
    while base.seconds < args.budget or glu.seconds < args.budget:
        per_step_base = base.train_for(args.slice)
        per_step_glu = glu.train_for(args.slice)
        ratios.append(per_step_glu / per_step_base)
    results = {name: run.validation_loss(args.eval_batches) for name, run in (("baseline", base), ("glu", glu))}
    print(f"parameters: baseline {counts[0]:,}, glu ({args.activation}) {counts[1]:,}")
    for name, run in (("baseline", base), ("glu", glu)):
        loss = results[name]
        print(
            f"{name}: {run.steps} steps in {run.seconds:.0f} s, validation loss {loss:.4f} nats/byte, "
            f"perplexity {math.exp(loss):.3f}"
        )
    print(
        f"perplexity ratio glu/baseline {math.exp(results['glu'] - results['baseline']):.4f}; step-time ratio "
        f"glu/baseline {statistics.median(ratios):.3f} (median of {len(ratios)} turns)"
    )


if __name__ == "__main__":
    main()
