"""Training throughput of the built-in GPT: short against full sequences (SeqLengthWarmup), ALiBi against learned
position embeddings (Alibi).

Every step trains on the same number of tokens (``--tokens``, default 4096) of the built-in Python-documentation
text, cut into rows of the length measured, so tokens/s compares like with like. A step is forward, loss, backward
and an AdamW update of ``GPT(GPTConfig(n_layer=4, n_head=4, n_embd=128))`` (0.8M parameters) on the CPU, one thread
by default. Each round times every configuration once, interleaved, so drifts in machine speed hit all of them;
the figure reported is the median over rounds of tokens per second.

With ``--effect``, it also trains a small GPT (2 layers, width 64) for ``--effect-steps`` batches of 16 x 64
bytes three ways (learned positions; Alibi; SeqLengthWarmup from 8 to 64 over the first 30%, reshaping) and reports
the per-token validation loss on the first 32 KB of the validation split, at length 64 and (ALiBi) 128.

Run:  .venv/bin/python benchmarks/language_models.py [--steps 10] [--rounds 5] [--short 8] [--full 256] [--effect]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from composer import Trainer
from composer.algorithms import Algorithm, Alibi, SeqLengthWarmup
from composer.algorithms.alibi import apply_alibi
from composer.algorithms.alibi.policies import gpt_alibi_forward
from composer.datasets import ByteTextDataset, load_python_docs, python_docs_dataloaders
from composer.models import GPT, GPTConfig
from composer.models.gpt import CausalSelfAttention

__all__: list[str] = []


def make_model(max_sequence_length: int, alibi: bool) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=4, n_head=4, n_embd=128, max_sequence_length=max_sequence_length))
    if alibi:
        apply_alibi(model, None, max_sequence_length, "wpe", CausalSelfAttention, "forward", gpt_alibi_forward)
    return model


def make_step(model: GPT, data: torch.Tensor, seq_len: int, tokens: int) -> Callable[[int], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rows = tokens // seq_len

    def step(index: int) -> None:
        start = (index * tokens) % (len(data) - tokens)
        batch = {"input_ids": data[start : start + rows * seq_len].long().view(rows, seq_len)}
        optimizer.zero_grad(set_to_none=True)
        model.loss(model(batch), batch).backward()
        optimizer.step()

    return step


def time_steps(step: Callable[[int], None], steps: int) -> float:
    start = time.perf_counter()
    for index in range(steps):
        step(index)
    return time.perf_counter() - start


def effect(steps: int) -> None:
    """Validation loss after ``steps`` batches: learned positions, ALiBi, sequence-length warmup."""
    seq_len = 64
    text = load_python_docs("validation")[: 512 * seq_len]

    def validation_loss(trainer: Trainer, length: int) -> float:
        loader = DataLoader(ByteTextDataset(text, length), batch_size=64)
        return trainer.eval(loader)["metrics/eval/CrossEntropy"]

    for name in ("learned positions", "Alibi", "SeqLengthWarmup 8->64"):
        train_dl, _ = python_docs_dataloaders(seq_len=seq_len, batch_size=16, seed=0)
        torch.manual_seed(0)
        model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, max_sequence_length=seq_len))
        algorithms: list[Algorithm] = []
        if name == "Alibi":
            algorithms.append(Alibi.from_model(model, max_sequence_length=4 * seq_len, train_sequence_length_scaling=1))
        elif name.startswith("SeqLengthWarmup"):
            algorithms.append(SeqLengthWarmup(duration=0.3, min_seq_length=8, max_seq_length=seq_len, truncate=False))
        trainer = Trainer(
            model=model,
            train_dataloader=train_dl,
            max_duration=f"{steps}ba",
            algorithms=algorithms,
            optimizers=torch.optim.AdamW(model.parameters(), lr=3e-3),
            device="cpu",
            seed=0,
            progress_bar=False,
        )
        start = time.perf_counter()
        trainer.fit()
        elapsed = time.perf_counter() - start
        losses = f"val loss @64 {validation_loss(trainer, seq_len):.3f}"
        if name == "Alibi":
            losses += f", @128 {validation_loss(trainer, 2 * seq_len):.3f}"
        print(f"  {name:<24} {losses}  ({elapsed:.0f} s to train)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per step")
    parser.add_argument("--short", type=int, default=8, help="the warmup's shortest length (min_seq_length)")
    parser.add_argument("--full", type=int, default=256, help="the full length (max_seq_length)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--effect", action="store_true", help="also train three small GPTs and compare losses")
    parser.add_argument("--effect-steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load_python_docs("train")
    configs = {
        f"learned positions, length {args.short}": (make_model(args.full, alibi=False), args.short),
        f"learned positions, length {args.full}": (make_model(args.full, alibi=False), args.full),
        f"ALiBi, length {args.full}": (make_model(args.full, alibi=True), args.full),
    }
    steps = {name: make_step(model, data, seq_len, args.tokens) for name, (model, seq_len) in configs.items()}
    for step in steps.values():
        time_steps(step, 3)  # warm up allocator and kernels
    rates: dict[str, list[float]] = {name: [] for name in steps}
    for round_index in range(args.rounds):
        for name, step in steps.items():
            rates[name].append(args.steps * args.tokens / time_steps(step, args.steps))
        print(f"round {round_index}: " + "  ".join(f"{name}: {rates[name][-1]:,.0f} tok/s" for name in rates))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\nmedian training throughput over {args.rounds} rounds ({args.tokens} tokens per step):")
    for name, value in medians.items():
        print(f"  {name:<32} {value:>10,.0f} tokens/s")
    short, full, alibi = medians.values()
    print(
        f"short / full length: {short / full:.2f}x   ALiBi / learned positions at length {args.full}: {alibi / full:.2f}x"
    )
    if args.effect:
        print(f"\nper-token validation loss after {args.effect_steps} batches of 16 x 64 bytes:")
        effect(args.effect_steps)


if __name__ == "__main__":
    main()
