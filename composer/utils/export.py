"""Exporting a trained model for inference, as TorchScript or ONNX, checked by running it against the eager model.

The export works on a copy of the network: the model inside DDP / DataParallel / ``torch.compile`` wrappers (keys and
module names stay those of the bare model), and, for a model that keeps its network in ``.module``
(:class:`~composer.models.ComposerClassifier`), that network, which takes the inputs rather than an ``(inputs,
targets)`` batch. The copy moves to the CPU, switches to eval mode and loses its forward hooks, so:

* surgery that changes what the network computes (BlurPool, SqueezeExcite, ChannelsLast's layout, Alibi) is in the
  export, because it is part of the modules;
* training-only behaviour is neutral, because it depends on ``module.training``: StochasticDepth's blocks scale the
  residual branch by its survival rate in eval mode and draw nothing, dropout is the identity, BatchNorm uses its
  running statistics. The check below refuses a graph that still draws random numbers;
* hooks installed on the trained model (a monitor's forward hooks, Alibi's input-length check) observe training
  and do not run in the export.

ONNX goes through ``torch.onnx.export(..., dynamo=True)`` (the ``torch.export``-based exporter), with the batch
dimension dynamic. When that exporter cannot handle the model (or ``onnxscript``, which it needs, is missing), the
TorchScript-based exporter is used instead, with a warning that gives the reason; :class:`ExportResult` records which
one ran. TorchScript goes through ``torch.jit.trace``.

``onnx``, ``onnxscript`` and ``onnxruntime`` are imported only when an ONNX export runs (``pip install
'opencomposer[onnx]'``).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from composer.core.state import unwrap_model
from composer.utils.checkpoint.full_state import is_sharded

__all__ = [
    "EXPORT_FORMATS",
    "ExportError",
    "ExportResult",
    "export_for_inference",
    "inference_network",
    "is_onnx_available",
]

EXPORT_FORMATS = ("torchscript", "onnx")
"""The formats :func:`export_for_inference` writes."""

SUFFIXES = {"torchscript": ".pt", "onnx": ".onnx"}

# Graph operations that draw random numbers: an inference graph must have none.
_RANDOM_TORCHSCRIPT_OPS = ("aten::rand", "aten::bernoulli", "aten::normal", "aten::multinomial", "aten::randint")
_RANDOM_ONNX_OPS = (
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
    "Bernoulli",
    "Multinomial",
)

Transform = Callable[[nn.Module], nn.Module | None]


class ExportError(ValueError):
    """The exported model does not compute what the eager model does (or draws random numbers)."""


class ExportResult(NamedTuple):
    """What :func:`export_for_inference` wrote and how well the export matched the eager model.

    Args:
        path: The file written.
        save_format: ``'torchscript'`` or ``'onnx'``.
        exporter: ``'torch.jit.trace'``, ``'torch.onnx.export(dynamo=True)'`` or ``'torch.onnx.export(dynamo=False)'``.
        max_abs_error: The largest absolute difference between the export's outputs and the eager model's on the
            verification inputs (None when not verified).
        fallback_reason: Why the dynamo-based ONNX exporter was not used (None when it was, or for TorchScript).

    Example:
        >>> from pathlib import Path
        >>> ExportResult(Path("m.pt"), "torchscript", "torch.jit.trace", 0.0, None).exporter
        'torch.jit.trace'
    """

    path: Path
    save_format: str
    exporter: str
    max_abs_error: float | None
    fallback_reason: str | None


def is_onnx_available() -> bool:
    """Whether ``onnx`` and ``onnxruntime`` are installed (``pip install 'opencomposer[onnx]'``), without importing them.

    Returns:
        bool: True when both can be imported.

    Example:
        >>> isinstance(is_onnx_available(), bool)
        True
    """
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


def _require(package: str, why: str) -> None:
    if importlib.util.find_spec(package) is None:
        raise ImportError(
            f"{why} needs the {package} package, which is not installed. To fix, install the onnx extra: "
            "pip install 'opencomposer[onnx]'."
        )


def inference_network(model: nn.Module) -> nn.Module:
    """The network an export contains: ``model`` without DDP / DataParallel / ``torch.compile`` wrappers, and the
    ``.module`` of a model that keeps its network there (:class:`~composer.models.ComposerClassifier`).

    Args:
        model: The trained model, wrapped or not.

    Returns:
        nn.Module: The network itself (not a copy).

    Raises:
        ValueError: For a HuggingFaceModel, which takes a dict batch (export a module that takes tensors instead).

    Example:
        >>> from composer.models import simple_cnn
        >>> classifier = simple_cnn(in_channels=1, widths=(8,), num_classes=3)
        >>> type(inference_network(classifier)).__name__
        'SimpleCNN'
    """
    network = unwrap_model(model)
    if isinstance(getattr(network, "model", None), nn.Module) and hasattr(network, "shift_labels"):
        raise ValueError(
            f"model is a {type(network).__name__}, whose forward takes a dict batch and returns a Hugging Face output "
            "(with its key/value cache), which neither exporter traces. To fix, export a module that maps tensors to "
            "tensors, e.g. one whose forward(input_ids) returns model.model(input_ids=input_ids, "
            "use_cache=False).logits."
        )
    inner = getattr(network, "module", None)
    # A ComposerModel (it has a loss) that wraps its network: export the network, which takes the bare inputs.
    if isinstance(inner, nn.Module) and callable(getattr(network, "loss", None)):
        network = unwrap_model(inner)
    return network


def _check_format(save_format: str) -> str:
    if not isinstance(save_format, str) or save_format.lower() not in EXPORT_FORMATS:
        raise ValueError(f"save_format={save_format!r} is not supported; choose one of {list(EXPORT_FORMATS)}.")
    return save_format.lower()


def _check_inputs(sample_input: Any) -> tuple[torch.Tensor, ...]:
    if sample_input is None:
        raise ValueError(
            "sample_input=None: an export traces the network on an example input. Pass a tensor (or a tuple of "
            "tensors, the network's positional arguments) of the shape it takes, e.g. sample_input=torch.randn(1, 3, "
            "32, 32); the batch size may differ from the one used for inference."
        )
    inputs = tuple(sample_input) if isinstance(sample_input, (tuple, list)) else (sample_input,)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        kinds = [type(x).__name__ for x in inputs]
        raise ValueError(
            f"sample_input must be a tensor or a non-empty tuple of tensors (the network's positional arguments); got "
            f"{type(sample_input).__name__} of {kinds}. For a ComposerClassifier pass the inputs, not the (inputs, "
            "targets) batch."
        )
    if any(x.ndim == 0 for x in inputs):
        raise ValueError("sample_input tensors need a batch dimension (dimension 0); got a 0-d tensor.")
    return tuple(x.detach().cpu() for x in inputs)


def _check_path(save_path: str | os.PathLike[str], save_format: str) -> Path:
    path = Path(save_path)
    if path.is_dir():
        raise ValueError(
            f"save_path={str(save_path)!r} is a folder; give a file name, e.g. {str(path / ('model' + SUFFIXES[save_format]))!r}."
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.parent / f".{path.name}.{os.getpid()}.probe"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"save_path={str(save_path)!r} cannot be written ({error}); choose a path in a writable folder."
        ) from None
    return path


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a network's output (a tensor, or tuples, lists and dicts of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in _flat_tensors(item)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flat_tensors(item)]
    return []


def _batch_of(inputs: tuple[torch.Tensor, ...], size: int) -> tuple[torch.Tensor, ...]:
    """The inputs with ``size`` rows, repeating the sample's rows as needed (same values, another batch size)."""
    out = []
    for x in inputs:
        index = torch.arange(size) % x.shape[0]
        out.append(x[index].contiguous())
    return tuple(out)


def _prepare(
    model: nn.Module, surgery_algs: Sequence[Transform] | None, transforms: Sequence[Transform] | None
) -> nn.Module:
    network = inference_network(model)
    if is_sharded(network):
        raise ValueError(
            "model is sharded with FSDP: export_for_inference needs the whole weights on one process. To fix, save a "
            "full checkpoint (state_dict_type='full'), load it into an unsharded model and export that one."
        )
    network = copy.deepcopy(network).cpu()
    for function in [*(surgery_algs or ()), *(transforms or ())]:
        changed = function(network)
        if isinstance(changed, nn.Module):
            network = changed
    network.eval()
    network.requires_grad_(False)
    for module in network.modules():  # observers of training (monitors, input checks) stay out of the export
        module._forward_hooks.clear()
        module._forward_pre_hooks.clear()
    return network


def _default_names(stem: str, count: int) -> list[str]:
    return [stem] + [f"{stem}_{i}" for i in range(1, count)]


def _trace(network: nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> str:
    with warnings.catch_warnings():
        # torch.jit is deprecated in torch 2.x but still the way to write a TorchScript file.
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..* is deprecated", category=Warning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # type: ignore[attr-defined]
        traced = torch.jit.trace(network, inputs, check_trace=False, strict=False)  # type: ignore[no-untyped-call]
        torch.jit.save(traced, str(path))
    return "torch.jit.trace"


def _onnx_export(
    network: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    path: Path,
    input_names: list[str],
    output_names: list[str],
    dynamic_batch: bool,
    opset_version: int | None,
    dynamo: bool,
) -> tuple[str, str | None]:
    _require("onnx", "An ONNX export")

    def export(**exporter: Any) -> None:  # torch.onnx.export with what both exporters take; its warnings hidden
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation: the reason is given below
            torch.onnx.export(
                network,
                inputs,
                str(path),
                input_names=input_names,
                output_names=output_names,
                opset_version=opset_version,
                **exporter,
            )

    reason: str | None = None
    if dynamo and importlib.util.find_spec("onnxscript") is None:
        reason = "onnxscript, which the dynamo-based exporter needs, is not installed"
    elif dynamo:
        batch = torch.export.Dim("batch", min=1)
        shapes = tuple({0: batch} for _ in inputs) if dynamic_batch else None
        try:
            export(dynamo=True, dynamic_shapes=shapes, external_data=False, verbose=False)
            return "torch.onnx.export(dynamo=True)", None
        except Exception as error:  # the exporter raises many kinds of errors; the message says which
            reason = f"the dynamo-based exporter failed: {type(error).__name__}: {str(error).strip().splitlines()[0]}"
    if reason is not None:
        warnings.warn(
            f"ONNX export of {type(network).__name__} uses the TorchScript-based exporter: {reason}.", stacklevel=3
        )
    axes = {name: {0: "batch"} for name in [*input_names, *output_names]} if dynamic_batch else None
    export(dynamo=False, dynamic_axes=axes)
    return "torch.onnx.export(dynamo=False)", reason


def _run_torchscript(path: Path, inputs: tuple[torch.Tensor, ...]) -> tuple[list[torch.Tensor], list[str]]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..* is deprecated", category=Warning)
        loaded = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
    graph = str(loaded.inlined_graph)
    random_ops = sorted({op for op in _RANDOM_TORCHSCRIPT_OPS if op + "(" in graph or op + "_" in graph})
    with torch.no_grad():
        return _flat_tensors(loaded(*inputs)), random_ops


def _run_onnx(path: Path, inputs: tuple[torch.Tensor, ...]) -> tuple[list[torch.Tensor], list[str]]:
    _require("onnxruntime", "Verifying an ONNX export")
    import onnx
    import onnxruntime

    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    random_ops = sorted({node.op_type for node in proto.graph.node if node.op_type in _RANDOM_ONNX_OPS})
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {arg.name: x.numpy() for arg, x in zip(session.get_inputs(), inputs)}
    return [torch.from_numpy(out) for out in session.run(None, feed)], random_ops


def _verify(
    network: nn.Module,
    save_format: str,
    path: Path,
    inputs: tuple[torch.Tensor, ...],
    atol: float,
    rtol: float,
    dynamic_batch: bool,
) -> float:
    sizes = [inputs[0].shape[0]] + ([inputs[0].shape[0] + 1] if dynamic_batch else [])
    worst = 0.0
    for size in sizes:
        batch = _batch_of(inputs, size)
        with torch.no_grad():
            expected = [t.float() for t in _flat_tensors(network(*batch))]
        run = _run_torchscript if save_format == "torchscript" else _run_onnx
        got, random_ops = run(path, batch)
        if random_ops:
            raise ExportError(
                f"The {save_format} export of {type(network).__name__} draws random numbers ({random_ops}) in eval "
                "mode, so its outputs are not reproducible. A module samples even when not training; make it "
                "deterministic in eval mode (check module.training) or remove it with surgery_algs/transforms."
            )
        if len(got) != len(expected):
            raise ExportError(
                f"The {save_format} export returns {len(got)} tensors but the eager network {len(expected)}; "
                "pass output_names matching the network's outputs, or return tensors only."
            )
        for index, (a, b) in enumerate(zip(got, expected)):
            if a.shape != b.shape:
                raise ExportError(
                    f"Output {index} of the {save_format} export has shape {tuple(a.shape)} for a batch of {size}, "
                    f"the eager network {tuple(b.shape)}: the export does not follow the batch size (a shape read "
                    "into a Python number while tracing). Pass dynamic_batch=False to export a fixed batch size."
                )
            error = (a.float() - b).abs()
            worst = max(worst, float(error.max()) if error.numel() else 0.0)
            if not torch.allclose(a.float(), b, atol=atol, rtol=rtol):
                raise ExportError(
                    f"Output {index} of the {save_format} export differs from the eager network by up to "
                    f"{float(error.max()):.3g} (atol={atol}, rtol={rtol}) on a batch of {size}. Raise atol/rtol if the "
                    "difference is rounding, or pass verify=False to keep the file unchecked."
                )
    return worst


def export_for_inference(
    model: nn.Module,
    save_format: str,
    save_path: str | os.PathLike[str],
    sample_input: Any = None,
    *,
    surgery_algs: Sequence[Transform] | None = None,
    transforms: Sequence[Transform] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_batch: bool = True,
    onnx_opset_version: int | None = None,
    dynamo: bool = True,
    verify: bool = True,
    atol: float = 1e-4,
    rtol: float = 1e-4,
) -> ExportResult:
    """Writes ``model``'s network to ``save_path`` as TorchScript or ONNX, then runs the file to check it.

    The model is left as it is; with ``verify`` the file is run and checked (``docs/guides/exporting-for-inference.md``).

    Args:
        model: The trained model: a ComposerModel or plain ``nn.Module``, maybe wrapped in DDP or ``torch.compile``.
        save_format: ``'torchscript'`` or ``'onnx'``.
        save_path: The file to write (its folder is created).
        sample_input: An input of the network: a tensor, or a tuple of tensors passed as positional arguments (for a
            ComposerClassifier, the images; for the GPT, the token ids), of any batch size.
        surgery_algs: Functions applied to the copy before the export, e.g. ``composer.functional.apply_blurpool``.
        transforms: More functions applied after ``surgery_algs`` (quantization, fusion), in the same way.
        input_names: Names of the ONNX inputs (default ``input``, ``input_1``, ...).
        output_names: Names of the ONNX outputs (default ``output``, ``output_1``, ...).
        dynamic_batch: Keep dimension 0 of inputs and outputs free, so the file runs at any batch size.
        onnx_opset_version: The ONNX opset (default: the exporter's).
        dynamo: Use the ``torch.export``-based ONNX exporter; False uses the TorchScript-based one.
        verify: Run the file and compare it with the eager network (needs ``onnxruntime`` for ONNX).
        atol: Absolute tolerance of the comparison.
        rtol: Relative tolerance of the comparison.

    Returns:
        ExportResult: The path, the exporter used, and the largest difference from the eager network.

    Raises:
        ValueError: For an unknown ``save_format``, a bad ``sample_input`` or ``save_path``, or an FSDP model.
        ExportError: When the exported file does not compute what the eager network does.
        ImportError: For an ONNX export without ``onnx`` (or a verification without ``onnxruntime``).

    Example:
        >>> import tempfile, torch
        >>> from composer.models import simple_cnn
        >>> model = simple_cnn(in_channels=1, widths=(8, 16), num_classes=10)
        >>> result = export_for_inference(model, "torchscript", tempfile.mkdtemp() + "/cnn.pt",
        ...                               sample_input=torch.randn(2, 1, 16, 16))
        >>> result.exporter, result.max_abs_error < 1e-5
        ('torch.jit.trace', True)
        >>> torch.jit.load(str(result.path))(torch.randn(5, 1, 16, 16)).shape  # any batch size
        torch.Size([5, 10])
    """
    save_format = _check_format(save_format)
    inputs = _check_inputs(sample_input)
    path = _check_path(save_path, save_format)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name}={value!r} must be a non-negative number, e.g. 1e-4.")
    if input_names is not None and len(input_names) != len(inputs):
        raise ValueError(
            f"input_names={list(input_names)} names {len(input_names)} inputs but sample_input has {len(inputs)}."
        )
    network = _prepare(model, surgery_algs, transforms)
    if dynamic_batch and inputs[0].shape[0] == 1:
        inputs = _batch_of(inputs, 2)  # torch.export specializes a dimension of size 1
    fallback: str | None = None
    if save_format == "torchscript":
        exporter = _trace(network, inputs, path)
    else:
        names = list(input_names) if input_names is not None else _default_names("input", len(inputs))
        if output_names is None:
            with torch.no_grad():
                output_names = _default_names("output", len(_flat_tensors(network(*inputs))))
        exporter, fallback = _onnx_export(
            network, inputs, path, names, list(output_names), dynamic_batch, onnx_opset_version, dynamo
        )
    error = _verify(network, save_format, path, inputs, atol, rtol, dynamic_batch) if verify else None
    return ExportResult(path, save_format, exporter, error, fallback)
