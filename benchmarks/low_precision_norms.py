"""Step time of LowPrecisionLayerNorm and LowPrecisionGroupNorm under bf16 autocast on the CPU, against the plain norms.

Two models, each trained with forward, loss, backward and an AdamW step inside ``torch.autocast('cpu',
dtype=torch.bfloat16)`` (what ``Trainer(precision='bf16')`` does), with and without the norm surgery:

* ``gpt``: the built-in GPT (4 layers, width 128, 9 LayerNorms), batches of 8 x 128 bytes of the built-in text;
* ``gn_cnn``: a conv net of 4 conv + GroupNorm(8 groups) stages (width 64) on 8 x 3 x 32 x 32 images.

Each round times baseline and candidate once, interleaved, so drifts of a shared machine hit both; the figure is the
median over rounds of the per-round time ratio (candidate / baseline), with the median ms per step of each. It also
reports the largest difference between the bf16 outputs of the two variants and float32 (same weights, one batch).

Run:  .venv/bin/python benchmarks/low_precision_norms.py [--steps 5] [--rounds 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from composer.datasets import load_python_docs
from composer.functional import apply_low_precision_groupnorm, apply_low_precision_layernorm
from composer.models import GPT, GPTConfig

__all__: list[str] = []


def _gpt() -> tuple[nn.Module, Callable[[nn.Module], torch.Tensor], Callable[[nn.Module, torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=4, n_head=4, n_embd=128, max_sequence_length=128))
    data = load_python_docs("train")[: 8 * 128].long().view(8, 128)
    batch = {"input_ids": data}

    def forward(m: nn.Module) -> torch.Tensor:
        return m(batch)

    def loss(m: nn.Module, out: torch.Tensor) -> torch.Tensor:
        return m.loss(out, batch)  # type: ignore[operator]

    return model, forward, loss


def _gn_cnn() -> tuple[
    nn.Module, Callable[[nn.Module], torch.Tensor], Callable[[nn.Module, torch.Tensor], torch.Tensor]
]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    channels = 3
    for _ in range(4):
        layers += [nn.Conv2d(channels, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.ReLU()]
        channels = 64
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,), generator=g)

    def forward(m: nn.Module) -> torch.Tensor:
        return m(x)

    def loss(m: nn.Module, out: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(out.float(), y)

    return model, forward, loss


SETTINGS = {"gpt": (_gpt, apply_low_precision_layernorm), "gn_cnn": (_gn_cnn, apply_low_precision_groupnorm)}


def _time(model: nn.Module, forward: Callable, loss: Callable, optimizer: torch.optim.Optimizer, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = forward(model)
            value = loss(model, out)
        value.backward()
        optimizer.step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name, (build, surgery) in SETTINGS.items():
        base, forward, loss = build()
        low = surgery(copy.deepcopy(base))
        with torch.no_grad():
            reference = forward(base).float()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                err_base = (forward(base).float() - reference).abs().max().item()
                err_low = (forward(low).float() - reference).abs().max().item()
        opt_base = torch.optim.AdamW(base.parameters(), lr=1e-4)
        opt_low = torch.optim.AdamW(low.parameters(), lr=1e-4)
        _time(base, forward, loss, opt_base, 1)  # warm up both
        _time(low, forward, loss, opt_low, 1)
        times_base, times_low, ratios = [], [], []
        for _ in range(args.rounds):
            tb = _time(base, forward, loss, opt_base, args.steps)
            tl = _time(low, forward, loss, opt_low, args.steps)
            times_base.append(tb)
            times_low.append(tl)
            ratios.append(tl / tb)
        print(
            f"{name}: baseline {statistics.median(times_base) * 1e3:.1f} ms/step, low-precision "
            f"{statistics.median(times_low) * 1e3:.1f} ms/step (medians), ratio {statistics.median(ratios):.3f} "
            f"(median of {args.rounds} per-round ratios; min {min(ratios):.3f}, max {max(ratios):.3f}); "
            f"max |bf16 - fp32| of the outputs: baseline {err_base:.4f}, low-precision {err_low:.4f}"
        )


if __name__ == "__main__":
    main()
