"""What ExportForInference and Generate cost, and what the exported files run like (issue 21).

Export: the digits recipe's network (SimpleCNN 16-32-64 on 1x32x32 images) is exported once per format through
:func:`composer.utils.export_for_inference` (wall time of the call, the check included), then the eager network (eval
mode, no grad), the TorchScript file and the ONNX file under ONNX Runtime run the same batch of 64 in interleaved
rounds; the table gives the median and best time per call and the median per-round ratio to eager.

Generate: the GPT of ``recipes/gpt_baseline.yaml`` (4 layers, 128 wide, 128-byte context) continues one prompt by 32
bytes (one :class:`~composer.callbacks.Generate` call with one prompt), against one training step of the recipe's
batch (32 x 128 bytes) on the same model; and a Hugging Face GPT-2 of the same shape generates 96 tokens with its
key/value cache against the same model fed the whole sequence at every step.

All on the CPU with one thread (``torch.set_num_threads(1)``), interleaved so drift in machine speed hits every
variant alike.

Run:  .venv/bin/python benchmarks/export_and_generate.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import print_times, time_interleaved

from composer.callbacks import generate
from composer.models import GPT, GPTConfig, simple_cnn
from composer.utils import export_for_inference

__all__: list[str] = []


def bench_export(rounds: int) -> None:
    import onnxruntime

    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(16, 32, 64), num_classes=10)
    folder = tempfile.mkdtemp()
    x = torch.rand(64, 1, 32, 32)
    paths = {}
    for save_format in ("torchscript", "onnx"):
        start = time.perf_counter()
        result = export_for_inference(model, save_format, f"{folder}/digits.{save_format}", x[:2])
        print(
            f"export {save_format}: {time.perf_counter() - start:.1f} s ({result.exporter}, max |file - eager| "
            f"{result.max_abs_error:.1e})"
        )
        paths[save_format] = result.path
    network = model.module.eval()
    scripted = torch.jit.load(str(paths["torchscript"]))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(paths["onnx"]), options, providers=["CPUExecutionProvider"])
    feed = {"input": x.numpy()}

    def eager() -> None:
        with torch.no_grad():
            network(x)

    def torchscript() -> None:
        with torch.no_grad():
            scripted(x)

    def onnx() -> None:
        session.run(None, feed)

    print("\nInference on a batch of 64 (ms / call):")
    print_times(
        time_interleaved({"eager": eager, "torchscript": torchscript, "onnxruntime": onnx}, rounds, 20),
        "eager",
        "ms / call",
    )


def bench_generate(rounds: int) -> None:
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=256, max_sequence_length=128, n_layer=4, n_head=4, n_embd=128))
    optimizer = torch.optim.AdamW(gpt.parameters(), lr=1e-3)
    batch = {"input_ids": torch.randint(0, 256, (32, 128))}
    prompt = torch.tensor([list(b"def main(")])

    def train_step() -> None:
        loss = gpt.loss(gpt(batch), batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    def generate_32() -> None:
        generate(gpt, prompt, 32)

    print("\nGPT of gpt_baseline.yaml: one Generate call (1 prompt, 32 bytes) against one training step (32 x 128):")
    print_times(time_interleaved({"train step": train_step, "generate 32": generate_32}, rounds, 2), "train step")

    import transformers

    config = transformers.GPT2Config(
        n_layer=4, n_head=4, n_embd=128, vocab_size=256, n_positions=128, bos_token_id=0, eos_token_id=0
    )
    hf = transformers.GPT2LMHeadModel(config).eval()

    class Recompute(nn.Module):
        """The same model without a cache argument: generate feeds it the whole sequence at every step."""

        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.inner(input_ids=input_ids, use_cache=False).logits
            return logits

    recompute = Recompute(hf)
    assert torch.equal(generate(hf, prompt, 8), generate(recompute, prompt, 8))

    print("\nHugging Face GPT-2 (4 x 128): 96 new tokens with the key/value cache against recomputing:")
    print_times(
        time_interleaved(
            {"recompute": lambda: generate(recompute, prompt, 96), "kv cache": lambda: generate(hf, prompt, 96)},
            rounds,
            1,
        ),
        "recompute",
        "ms / call",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bench_export(args.rounds)
    bench_generate(args.rounds)


if __name__ == "__main__":
    main()
