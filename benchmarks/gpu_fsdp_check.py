"""The GPU check of issue #10: world size 1 with NCCL (init, DDP wrap, a few steps) and FSDP2 on the GPU.

One process, one GPU, no launcher needed (the script sets RANK/WORLD_SIZE/MASTER_* itself when torchrun did not);
under ``torchrun --nproc_per_node N`` every rank trains on the same batches, so the same comparisons hold.
Each check trains a small MLP for a few steps and compares the result with the same training unwrapped on the same
device (TF32 off, so the comparisons are float32-exact up to reduction order):

* ``nccl_init``: the process group comes up on NCCL and an all_reduce gives the right sum;
* ``ddp``: DistributedDataParallel (device_ids=[0]) trains to the unwrapped result;
* ``fsdp``: :func:`composer.distributed.fsdp.prepare_fsdp_module` (every Linear a unit), optimizer built before, trains
  to the unwrapped result, and the gathered full state dict loads into an unwrapped model;
* ``fsdp_bf16``: ``param_dtype='bf16'``: forward sees bfloat16 weights, the shards stay float32, close to float32;
* ``fsdp_cpu_offload``: ``cpu_offload=True``: the shards live on the CPU and the step runs;
* ``low_precision_norms``: LowPrecisionLayerNorm and LowPrecisionGroupNorm under fp16 and bf16 autocast: the output
  has the autocast dtype (plain ``nn.LayerNorm``/``nn.GroupNorm`` give float32 there on CUDA), is within 4 unit
  roundoffs of float32, and the forward + backward time of a large LayerNorm against the plain one is reported;
* ``auto_microbatch``: ``Trainer(grad_accum='auto')`` on a batch about twice too big for the GPU (sized from its
  free memory): grad_accum=1 runs out of memory, 'auto' finds a count that fits and trains to the weights of a run
  with that count fixed (CUDA only);
* ``auto_microbatch_fsdp``: the same with ``fsdp_config`` (every Linear a unit): the error comes between FSDP
  collectives, the sharded model is reset and the batch runs again (CUDA only);
* ``optimizer_step_kinds``: DecoupledSGDW and DecoupledAdamW with ``foreach=True`` and ``fused=True`` on the device
  train to the for-loop step's weights, and the default (None) takes the foreach step on CUDA (issue 20);
* ``export_and_generate``: :func:`composer.utils.export_for_inference` on a DDP-wrapped model trained on the device
  (TorchScript and ONNX, each checked against the eager network), a model sharded with FSDP refused by name, and
  :func:`composer.callbacks.generate`'s sampling on the device reproducible by seed;
* ``monitors``: OptimizerMonitor's norms on the GPU match the gradients read on the host; ActivationMonitor logs;
  SystemMetricsMonitor reports this GPU's utilisation and memory through NVML (CUDA only);
* ``profiler``: ``Trainer(profiler=Profiler(...))`` on the device (the process group is up, so the model is
  DDP-wrapped): the trace holds the named ranges and, on CUDA, the GPU kernels; the summary counts every step
  (issue 20);
* ``compile``: ``Trainer(compile_config={'backend': 'inductor'})`` (Triton kernels on CUDA, C++ on the CPU) trains a
  small CNN (convolution, batch norm, ReLU, pooling: ops inductor can fuse) from the eager Trainer's weights: the first
  step's loss and the weights after ``--steps`` steps agree with the eager Trainer's within a tolerance (fusion
  reorders float32 sums), parameter names stay plain, and dynamo compiled a single graph.

It prints one line per check and a JSON summary, and exits 1 when a check fails. ``--device cpu`` runs the same
checks on gloo (no CPU offload) to try the script without a GPU.

Run:  .venv/bin/python benchmarks/gpu_fsdp_check.py [--device cuda|cpu] [--steps 5] [--checks compile ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as torch_dist
from torch import nn

from composer.distributed.fsdp import FSDPConfig, full_model_state_dict, prepare_fsdp_module

__all__: list[str] = []


def _model(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device, steps: int) -> None:
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(16, 32, generator=generator), torch.randint(10, (16,), generator=generator)
        nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
        optimizer.step()
        optimizer.zero_grad()


def _reference(device: torch.device, steps: int) -> dict[str, torch.Tensor]:
    model = _model(device)
    _train(model, torch.optim.AdamW(model.parameters(), lr=1e-3), device, steps)
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _max_diff(state: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    if torch_dist.get_rank() != 0 and not state:
        return 0.0  # full state dicts are gathered on rank 0 only
    assert state.keys() == reference.keys(), (sorted(state), sorted(reference))
    return max((state[k].float().cpu() - reference[k].float()).abs().max().item() for k in reference)


def check_nccl_init(device: torch.device, steps: int) -> str:
    tensor = torch.ones(3, device=device)
    torch_dist.all_reduce(tensor)
    assert tensor.tolist() == [float(torch_dist.get_world_size())] * 3, tensor
    return f"backend={torch_dist.get_backend()} world_size={torch_dist.get_world_size()}"


def check_ddp(device: torch.device, steps: int) -> str:
    from torch.nn.parallel import DistributedDataParallel

    model = _model(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    _train(ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-3), device, steps)
    diff = _max_diff({k: v.detach() for k, v in model.state_dict().items()}, _reference(device, steps))
    assert diff < 1e-5, f"DDP differs from unwrapped training by {diff}"
    return f"max |ddp - unwrapped| = {diff:.2e}"


def check_fsdp(device: torch.device, steps: int) -> str:
    model = _model(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # built before sharding, as the Trainer may
    prepare_fsdp_module(model, FSDPConfig(module_classes=["Linear"], min_params=None), optimizer)
    kinds = {type(p).__name__ for p in model.parameters()}
    assert kinds == {"DTensor"}, kinds
    _train(model, optimizer, device, steps)
    state = full_model_state_dict(model)
    diff = _max_diff(state, _reference(device, steps))
    assert diff < 1e-5, f"FSDP differs from unwrapped training by {diff}"
    plain = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    if torch_dist.get_rank() == 0:
        plain.load_state_dict(state)
    return f"max |fsdp - unwrapped| = {diff:.2e}; full state dict loads unwrapped"


def check_fsdp_bf16(device: torch.device, steps: int) -> str:
    model = prepare_fsdp_module(_model(device), FSDPConfig(param_dtype="bf16", reduce_dtype="fp32"))
    seen: set[torch.dtype] = set()
    model[0].register_forward_hook(lambda module, args, output: seen.add(module.weight.dtype))
    _train(model, torch.optim.AdamW(model.parameters(), lr=1e-3), device, steps)
    assert seen == {torch.bfloat16}, seen
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    diff = _max_diff(full_model_state_dict(model), _reference(device, steps))
    assert diff < 2e-2, f"bf16 FSDP differs from float32 by {diff}"
    return f"forward in bf16, fp32 shards, max |bf16 - fp32| = {diff:.2e}"


def check_fsdp_cpu_offload(device: torch.device, steps: int) -> str:
    if device.type != "cuda":
        return "skipped: CPU offload needs CUDA"
    model = prepare_fsdp_module(_model(device), FSDPConfig(cpu_offload=True))
    places = {p.to_local().device.type for p in model.parameters()}  # type: ignore[attr-defined]
    assert places == {"cpu"}, places
    _train(model, torch.optim.AdamW(model.parameters(), lr=1e-3), device, steps)
    diff = _max_diff(full_model_state_dict(model), _reference(device, steps))
    assert diff < 1e-4, f"offloaded FSDP differs by {diff}"
    return f"shards on cpu, max |offload - unwrapped| = {diff:.2e}"


def check_low_precision_norms(device: torch.device, steps: int) -> str:
    """The low-precision norms against float32 under each half dtype, and a large LayerNorm's time against plain."""
    from composer.algorithms.low_precision_groupnorm import LowPrecisionGroupNormModule
    from composer.algorithms.low_precision_layernorm import LowPrecisionLayerNormModule

    roundoff = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
    generator = torch.Generator().manual_seed(0)
    details = []
    for dtype, unit in roundoff.items():
        norms = [
            (nn.LayerNorm(256), LowPrecisionLayerNormModule, torch.randn(16, 32, 256, generator=generator)),
            (nn.GroupNorm(8, 64), LowPrecisionGroupNormModule, torch.randn(16, 64, 8, 8, generator=generator)),
        ]
        for plain, low_class, x in norms:
            plain = plain.to(device)
            with torch.no_grad():
                plain.weight.uniform_(0.5, 1.5)
                plain.bias.normal_(0.0, 0.5)
            low = (
                low_class.from_layernorm(plain) if isinstance(plain, nn.LayerNorm) else low_class.from_groupnorm(plain)
            )  # type: ignore[attr-defined]
            x = (x * 3 + 1).to(device)
            reference = plain(x)
            with torch.autocast(device.type, dtype=dtype):
                out, plain_out = low(x), plain(x)
            assert out.dtype == dtype, (type(low).__name__, out.dtype)
            if device.type == "cuda":
                assert plain_out.dtype == torch.float32, plain_out.dtype  # autocast upcasts the plain norm
            error = (out.float() - reference).abs().max().item()
            assert error <= 4 * unit * (1 + reference.abs().max().item()), (type(low).__name__, dtype, error)
            details.append(f"{type(plain).__name__} {str(dtype)[6:]} max err {error:.1e}")
    # Time: forward + backward of a (64, 1024, 1024) LayerNorm in bf16 autocast, low precision against plain.
    if device.type == "cuda":
        plain = nn.LayerNorm(1024).to(device)
        low = LowPrecisionLayerNormModule.from_layernorm(plain)
        x = torch.randn(64, 1024, 1024, device=device, requires_grad=True)
        times = {}
        for name, module in (("plain", plain), ("low", low), ("plain", plain), ("low", low)):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(max(steps, 10)):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    module(x).float().sum().backward()
            torch.cuda.synchronize()
            times[name] = (time.perf_counter() - start) / max(steps, 10)
        details.append(
            f"LayerNorm(1024) on 64x1024 rows, bf16 fwd+bwd: low/plain time {times['low'] / times['plain']:.2f}"
        )
    return "; ".join(details)


def _wide_model(width: int, depth: int) -> nn.Module:
    """Cheap in FLOPs, heavy in activations: every elementwise layer keeps a ``(batch, width)`` tensor for backward."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(64, width)]
    for _ in range(depth):
        layers += [_Scale(width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


class _Scale(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def check_auto_microbatch(device: torch.device, steps: int) -> str:
    """``grad_accum='auto'`` on a batch about twice too big for the GPU: grad_accum=1 runs out of memory, 'auto'
    finds a count that fits and trains to the weights of a run with that count fixed."""
    return _auto_microbatch(device, steps, fsdp=False)


def check_auto_microbatch_fsdp(device: torch.device, steps: int) -> str:
    """The same with ``fsdp_config`` (every Linear a unit): the real out-of-memory error comes in the middle of the
    chain of FSDP collectives; the sharded model is reset (``reset_iter_state``) and the batch runs again. Under
    ``torchrun --nproc_per_node N`` the ranks also agree at every collective."""
    return _auto_microbatch(device, steps, fsdp=True)


def _auto_microbatch(device: torch.device, steps: int, *, fsdp: bool) -> str:
    import gc

    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer
    from composer.models import ComposerClassifier

    if device.type != "cuda" or not torch.cuda.is_available():
        return "skipped: a real out-of-memory error needs CUDA"
    width, depth = 16384, 16
    torch.cuda.empty_cache()
    free = torch.cuda.mem_get_info(device)[0]
    per_sample = width * 4 * (2 * depth + 4)  # bytes of activations kept for backward, roughly
    batch = int(2 * free / per_sample)
    x = torch.randn(2 * batch, 64, generator=torch.Generator().manual_seed(2))
    data = TensorDataset(x, torch.randint(10, (2 * batch,), generator=torch.Generator().manual_seed(3)))

    def run(grad_accum: int | str) -> tuple[Trainer, nn.Module]:
        model = ComposerClassifier(_wide_model(width, depth), num_classes=10)
        trainer = Trainer(
            model=model,
            train_dataloader=DataLoader(data, batch_size=batch),
            optimizers=torch.optim.SGD(model.parameters(), lr=0.01),
            max_duration=f"{min(steps, 2)}ba",
            grad_accum=grad_accum,
            device=device,
            seed=0,
            progress_bar=False,
            fsdp_config={"module_classes": ["Linear"], "min_params": None} if fsdp else None,
        )
        trainer.fit()
        return trainer, model

    def host_weights(model: nn.Module) -> dict[str, torch.Tensor]:
        state = model.state_dict()
        if fsdp:
            state = {k: v.full_tensor() for k, v in state.items()}
        return {k: v.detach().cpu() for k, v in state.items()}

    try:
        run(1)
        raise AssertionError(f"grad_accum=1 with a batch of {batch} did not run out of memory; the check is void")
    except torch.cuda.OutOfMemoryError:
        pass
    gc.collect()
    torch.cuda.empty_cache()
    start = time.perf_counter()
    trainer, model = run("auto")
    auto_seconds = time.perf_counter() - start
    found = trainer.state.grad_accum
    auto_weights = host_weights(model)
    trainer.close()
    del trainer, model
    gc.collect()
    torch.cuda.empty_cache()
    trainer, model = run(found)
    diff = _max_diff(host_weights(model), auto_weights)
    trainer.close()
    assert found > 1 and diff <= 1e-6, f"grad_accum found {found}, |auto - fixed| = {diff}"
    return (
        f"batch {batch} ({free / 2**30:.1f} GiB free): grad_accum=1 out of memory, 'auto' found {found} "
        f"({auto_seconds:.1f} s with the retries), max |auto - fixed at {found}| = {diff:.2e}"
    )


def check_optimizer_step_kinds(device: torch.device, steps: int) -> str:
    from composer.optim import DecoupledAdamW, DecoupledSGDW

    diffs = []
    for optimizer_class, fields in (
        (DecoupledSGDW, {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": True}),
        (DecoupledAdamW, {"lr": 1e-3, "weight_decay": 1e-2, "amsgrad": True}),
    ):
        trained = {}
        for kind, flags in {"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}.items():
            model = _model(device)
            _train(model, optimizer_class(model.parameters(), **fields, **flags), device, steps)
            trained[kind] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        for kind in ("foreach", "fused"):
            diff = max((trained[kind][k] - v).abs().max().item() for k, v in trained["loop"].items())
            assert diff < 1e-5, f"{optimizer_class.__name__}({kind}=True) differs from the for-loop step by {diff}"
            diffs.append(diff)
    from composer.optim._multi_tensor import default_foreach

    on_cuda = default_foreach(_model(device).parameters())
    assert on_cuda == (device.type == "cuda"), on_cuda
    return f"max |foreach or fused - for-loop| = {max(diffs):.2e}; default foreach on {device.type}: {on_cuda}"


def check_monitors(device: torch.device, steps: int) -> str:
    """OptimizerMonitor, ActivationMonitor and SystemMetricsMonitor on the GPU: the norms match the gradients read
    on the host, and NVML reports this GPU's utilisation and memory."""
    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer
    from composer.callbacks import ActivationMonitor, OptimizerMonitor, SystemMetricsMonitor
    from composer.loggers import InMemoryLogger
    from composer.models import ComposerClassifier

    if device.type != "cuda":
        return "skipped: NVML and device-side norms need CUDA"
    g = torch.Generator().manual_seed(4)
    data = TensorDataset(torch.randn(64, 32, generator=g), torch.randint(10, (64,), generator=g))
    model = ComposerClassifier(_model(device), num_classes=10)
    memory = InMemoryLogger()
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=16),
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        max_duration=f"{max(steps, 2)}ba",
        callbacks=[OptimizerMonitor("1ba"), ActivationMonitor("1ba"), SystemMetricsMonitor("1ba")],
        loggers=[memory],
        device=device,
        progress_bar=False,
    )
    trainer.fit()
    grad_norm = sum(float(p.grad.double().square().sum()) for p in model.parameters()) ** 0.5
    trainer.close()
    logged = memory.values("l2_norm/grad/global")[-1]
    assert abs(logged - grad_norm) <= 1e-4 * grad_norm, f"grad norm {logged} != {grad_norm} from the host"
    assert memory.values("activations/max/module.0")[-1] > 0
    index = device.index or 0
    gpu = [key for key in memory.data if key.startswith(f"system/gpu{index}/")]
    assert gpu, f"no system/gpu{index}/ values: is nvidia-ml-py installed (pip install 'opencomposer[loggers]')?"
    utilization = memory.values(f"system/gpu{index}/utilization_percent")[-1]
    used = memory.values(f"system/gpu{index}/memory_used_bytes")[-1]
    assert 0 <= utilization <= 100 and used > 0, (utilization, used)
    return f"grad norm {logged:.6f} (host {grad_norm:.6f}); GPU {index}: {utilization:.0f}% busy, {used / 2**30:.2f} GiB used"


def check_export_and_generate(device: torch.device, steps: int) -> str:
    """ExportForInference's function on a DDP-wrapped model trained on the device (both formats, checked against the
    eager network), a sharded model refused by name, and Generate's sampling on the device reproducible by seed."""
    import tempfile

    from torch.nn.parallel import DistributedDataParallel

    from composer.callbacks import generate
    from composer.distributed.fsdp import FSDPConfig, prepare_fsdp_module
    from composer.models import GPT, GPTConfig, simple_cnn
    from composer.utils import export_for_inference
    from composer.utils.export import is_onnx_available

    torch.manual_seed(0)
    model = simple_cnn(in_channels=1, widths=(8, 16), num_classes=10).to(device)
    wrapped = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.rand(8, 1, 16, 16, device=device), torch.randint(10, (8,), device=device)
        torch.nn.functional.cross_entropy(wrapped((x, y)), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    folder = tempfile.mkdtemp()
    formats = ["torchscript", "onnx"] if is_onnx_available() else ["torchscript"]
    errors = {
        f: export_for_inference(wrapped, f, f"{folder}/m.{f}", torch.rand(2, 1, 16, 16, device=device)).max_abs_error
        for f in formats
    }
    assert next(model.parameters()).device.type == device.type and model.training  # the trained model is untouched
    sharded = prepare_fsdp_module(_model(device), FSDPConfig(module_classes=["Linear"], min_params=None))
    try:
        export_for_inference(sharded, "torchscript", f"{folder}/s.pt", torch.rand(2, 32, device=device))
        raise AssertionError("a sharded model was exported")
    except ValueError as error:
        assert "sharded with FSDP" in str(error), error
    gpt = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, max_sequence_length=32)).to(device)
    prompt = torch.tensor([list(b"def ")], device=device)

    def draw(seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return generate(gpt, prompt, 16, do_sample=True, top_k=20, generator=generator)

    assert torch.equal(draw(1), draw(1)) and not torch.equal(draw(1), draw(2)) and gpt.training
    return f"max |file - eager|: {errors}; sharded model refused; seeded sampling reproducible on {device.type}"


def check_profiler(device: torch.device, steps: int) -> str:
    """The profiler on the device: named ranges in the trace, the GPU's kernels in it on CUDA, every step summarized."""
    import tempfile
    from pathlib import Path

    from torch.utils.data import DataLoader, TensorDataset

    from composer import Trainer
    from composer.models import ComposerClassifier
    from composer.trainer import Profiler

    g = torch.Generator().manual_seed(5)
    data = TensorDataset(torch.randn(128, 32, generator=g), torch.randint(10, (128,), generator=g))
    model = ComposerClassifier(_model(device), num_classes=10)
    batches = max(steps, 4)
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(
            model=model,
            train_dataloader=DataLoader(data, batch_size=16),
            optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
            max_duration=f"{batches}ba",
            device=device,
            progress_bar=False,
            profiler=Profiler(wait=1, warmup=1, active=2, folder=folder, print_summary=False),
        )
        trainer.fit()
        session = trainer.profiler
        trainer.close()
        assert session is not None and session.summary is not None and session.traces, "no trace written"
        assert session.summary.steps == batches, session.summary.steps
        events = json.loads(Path(session.traces[0]).read_text())["traceEvents"]
        names = {event.get("name") for event in events}
        wanted = {"event/BATCH_END", "trainer/forward", "trainer/backward", "trainer/optimizer_step"}
        assert wanted <= names, f"missing ranges {wanted - names}"
        kernels = sum(1 for event in events if event.get("cat") == "kernel")
        if device.type == "cuda":
            assert kernels > 0, "no GPU kernel in the trace"
    return f"{len(names)} event names in the trace, {kernels} GPU kernels; {session.summary.steps} steps summarized"


def _cnn(device: torch.device) -> nn.Module:
    from composer.models import ComposerClassifier

    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    return ComposerClassifier(module, num_classes=10).to(device)


def check_compile(device: torch.device, steps: int) -> str:
    """The compiled Trainer (inductor) trains to the eager Trainer's weights and first loss, within a tolerance."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from composer import Trainer
    from composer.core import Callback, Logger, State

    class Losses(Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def batch_end(self, state: State, logger: Logger) -> None:
            self.losses.append(float(state.loss))

    generator = torch.Generator().manual_seed(4)
    batches = [
        (torch.randn(16, 3, 16, 16, generator=generator), torch.randint(10, (16,), generator=generator))
        for _ in range(steps)
    ]
    torch._dynamo.reset()
    counters.clear()
    results = {}
    for kind, compile_config in (("eager", None), ("compiled", {"backend": "inductor"})):
        model, losses = _cnn(device), Losses()
        trainer = Trainer(
            model=model,
            train_dataloader=batches,
            optimizers=torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
            max_duration=f"{steps}ba",
            callbacks=[losses],
            device=device,
            seed=0,
            progress_bar=False,
            compile_config=compile_config,
        )
        start = time.perf_counter()
        trainer.fit()
        seconds = time.perf_counter() - start
        trainer.close()
        results[kind] = (losses.losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}, seconds)
    (eager_losses, eager_weights, _), (losses, weights, seconds) = results["eager"], results["compiled"]
    assert list(weights) == list(eager_weights), "parameter names changed: " + str(list(weights)[:3])
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 1, f"dynamo compiled {graphs} graphs for one shape"
    loss_diff = abs(losses[0] - eager_losses[0])
    diff = _max_diff(weights, eager_weights)
    assert loss_diff < 1e-4 and diff < 1e-3, f"|first loss| differs by {loss_diff}, weights by {diff}"
    return (
        f"{steps} steps ({seconds:.1f} s with the compilation): |first loss - eager| = {loss_diff:.1e}, "
        f"max |weights - eager| = {diff:.1e}, {graphs} graph"
    )


CHECKS: dict[str, Callable[[torch.device, int], str]] = {
    "nccl_init": check_nccl_init,
    "ddp": check_ddp,
    "fsdp": check_fsdp,
    "fsdp_bf16": check_fsdp_bf16,
    "fsdp_cpu_offload": check_fsdp_cpu_offload,
    "low_precision_norms": check_low_precision_norms,
    "auto_microbatch": check_auto_microbatch,
    "auto_microbatch_fsdp": check_auto_microbatch_fsdp,
    "optimizer_step_kinds": check_optimizer_step_kinds,
    "monitors": check_monitors,
    "export_and_generate": check_export_and_generate,
    "profiler": check_profiler,
    "compile": check_compile,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--checks", nargs="+", choices=list(CHECKS), default=list(CHECKS), help="default: all")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("No CUDA device: run on a GPU machine, or pass --device cpu to try the checks on gloo.", file=sys.stderr)
        return 2
    if "RANK" not in os.environ:  # not under torchrun: a world of one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    backend = "nccl" if device.type == "cuda" else "gloo"
    torch_dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120))
    environment = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None,
    }
    print(json.dumps(environment), flush=True)
    results: dict[str, Any] = {}
    for name in args.checks:
        check = CHECKS[name]
        start = time.perf_counter()
        try:
            detail, ok = check(device, args.steps), True
        except Exception as error:
            detail, ok = f"{type(error).__name__}: {error}", False
            traceback.print_exc()
        status = "SKIP" if detail.startswith("skipped") else "PASS" if ok else "FAIL"
        results[name] = {"status": status, "seconds": round(time.perf_counter() - start, 3), "detail": detail}
        print(f"{status} {name} ({results[name]['seconds']} s): {detail}", flush=True)
    torch_dist.destroy_process_group()
    print(json.dumps({"environment": environment, "results": results}))
    return 0 if all(r["status"] != "FAIL" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
