"""Factorize on the digits CNN and on the compact GPT's MLPs: parameters, multiply-adds, step time, accuracy / loss.

Digits: the model of ``recipes/digits_baseline.yaml`` (SimpleCNN, widths 16/32/64, 1x32x32 inputs) with its
convolutions of at least 16 channels factorized at ``--latent`` (fractions of ``min(in, out)``). Parameters and
multiply-adds (Conv2d and Linear layers, one image) are counted exactly. Step time: forward, backward and an SGD step
on a batch of 32, variants interleaved in rotating order over ``--rounds``; the ratio is the median over rounds of
variant / baseline. Accuracy: the digits baseline recipe with ``factorize`` added, ``--epochs`` epochs, ``--seeds``,
interleaved by seed (held-out accuracy; ``fit()`` time ratio, median over seeds).

GPT: ``GPT(n_layer=4, n_head=4, n_embd=128)`` (the text recipe's model) with each block's MLP (128 -> 512 -> 128)
factorized at a quarter of ``min(in, out)`` (latent 32). Parameters and multiply-adds per 128-byte sequence; step
time of forward, backward and AdamW on 16 x 128 bytes, interleaved; per-byte validation loss after ``--gpt-steps``
batches of 16 x 128 bytes of the built-in Python-documentation corpus (same seed, same data order).

Run:  .venv/bin/python benchmarks/factorize.py --threads 1 [--rounds 15] [--epochs 4] [--seeds 0 1] [--gpt-steps 200]
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for _interleaved, run as a script

from _interleaved import count_macs, digits_runs, print_runs, print_times, sgd_step, time_interleaved

from composer import Trainer
from composer.datasets import ByteTextDataset, load_python_docs, python_docs_dataloaders
from composer.functional import apply_factorization
from composer.models import GPT, GPTConfig, simple_cnn

__all__: list[str] = []


def _params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def digits(latents: list[float], rounds: int, epochs: int, seeds: list[int]) -> None:
    torch.manual_seed(0)
    base = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10).module
    nets = {"baseline": base}
    for latent in latents:
        nets[f"factorize(latent={latent})"] = apply_factorization(
            copy.deepcopy(base), min_channels=16, latent_channels=latent, factorize_linears=False
        )
    image = torch.randn(1, 1, 32, 32)
    print("digits CNN: parameters and multiply-adds (Conv2d + Linear, one 1x32x32 image)")
    print("| variant | parameters | ratio | multiply-adds | ratio |\n|---|---:|---:|---:|---:|")
    for name, net in nets.items():
        p, m = _params(net), count_macs(net.eval(), image)
        print(f"| {name} | {p:,} | {p / _params(base):.3f} | {m:,} | {m / count_macs(base, image):.3f} |")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 1, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    steps = {name: sgd_step(net.train(), x, y) for name, net in nets.items()}
    print(f"\ndigits CNN: forward + backward + SGD step, batch 32, {rounds} rounds of 5 steps")
    print_times(time_interleaved(steps, rounds, 5), "baseline")
    if epochs:
        variants = {"baseline": []}
        for latent in latents:
            fields = f"min_channels: 16, latent_channels: {latent}, factorize_linears: false"
            variants[f"factorize(latent={latent})"] = [f"algorithms.factorize={{{fields}}}"]
        print(f"\ndigits recipe, {epochs} epochs, seeds {seeds}:")
        print_runs(digits_runs(variants, f"{epochs}ep", seeds), "baseline")


def _gpt(factorized: bool) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=256, max_sequence_length=128, n_layer=4, n_head=4, n_embd=128))
    if factorized:
        apply_factorization(model, min_features=128, latent_features=0.25, modules="*.mlp.*")
    return model


def gpt(rounds: int, train_steps: int) -> None:
    models = {"baseline": _gpt(False), "factorize(MLPs, latent=0.25)": _gpt(True)}
    ids = {"input_ids": torch.randint(0, 256, (1, 128), generator=torch.Generator().manual_seed(0))}
    print("\nGPT (4 layers, width 128): parameters and multiply-adds per 128-byte sequence")
    print("| variant | parameters | MLP parameters | multiply-adds | ratio |\n|---|---:|---:|---:|---:|")
    base_macs = count_macs(models["baseline"], ids)
    for name, model in models.items():
        mlp = sum(_params(block.mlp) for block in model.blocks)
        m = count_macs(model, ids)
        print(f"| {name} | {_params(model):,} | {mlp:,} | {m:,} | {m / base_macs:.3f} |")
    data = load_python_docs("train")
    batch = {"input_ids": data[: 16 * 128].long().view(16, 128)}

    def adamw_step(model: GPT) -> Callable[[], None]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            model.loss(model(batch), batch).backward()
            optimizer.step()

        return step

    print(f"\nGPT: forward + backward + AdamW step, 16 x 128 bytes, {rounds} rounds of 2 steps")
    print_times(time_interleaved({n: adamw_step(m) for n, m in models.items()}, rounds, 2), "baseline")
    if train_steps:
        validation = DataLoader(ByteTextDataset(load_python_docs("validation")[: 256 * 128], 128), batch_size=64)
        print(f"\nGPT: per-byte validation loss after {train_steps} batches of 16 x 128 bytes (AdamW lr 2e-3)")
        for name in models:
            train_dl, _ = python_docs_dataloaders(seq_len=128, batch_size=16, seed=0)
            model = _gpt(name != "baseline")
            trainer = Trainer(
                model=model,
                train_dataloader=train_dl,
                max_duration=f"{train_steps}ba",
                optimizers=torch.optim.AdamW(model.parameters(), lr=2e-3),
                device="cpu",
                seed=0,
                progress_bar=False,
            )
            trainer.fit()
            loss = trainer.eval(validation)["metrics/eval/CrossEntropy"]
            trainer.close()
            print(f"  {name:<30} validation loss {loss:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latent", nargs="+", type=float, default=[0.25, 0.5])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=4, help="digits training epochs (0: skip accuracy)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--gpt-steps", type=int, default=200, help="GPT training batches (0: skip the loss)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=("digits", "gpt"), default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.only != "gpt":
        digits(args.latent, args.rounds, args.epochs, args.seeds)
    if args.only != "digits":
        gpt(args.rounds, args.gpt_steps)


if __name__ == "__main__":
    main()
