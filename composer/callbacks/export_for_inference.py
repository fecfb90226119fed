"""Exports the trained model for inference (TorchScript and ONNX) at the end of ``fit``, or when asked."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from composer.core.callback import Callback
from composer.core.hparams import hparams_for
from composer.core.logging.logger import Logger
from composer.core.state import State
from composer.utils import dist
from composer.utils.checkpoint.full_state import is_sharded
from composer.utils.export import EXPORT_FORMATS, SUFFIXES, ExportResult, export_for_inference

__all__ = ["ExportForInference", "ExportForInferenceHparams", "sample_input_from_batch"]


def sample_input_from_batch(batch: Any, rows: int = 2) -> torch.Tensor:
    """The network's inputs in a training batch, cut to ``rows`` rows and copied to the CPU: a tensor batch itself,
    the first element of an ``(inputs, targets)`` pair, or a dict batch's ``'input_ids'``.

    Args:
        batch: A training batch (``state.batch``).
        rows: How many rows to keep (an export's batch dimension stays dynamic, so few are needed).

    Returns:
        torch.Tensor: The inputs, ``rows`` rows at most.

    Example:
        >>> sample_input_from_batch((torch.zeros(8, 1, 4, 4), torch.zeros(8))).shape
        torch.Size([2, 1, 4, 4])
        >>> sample_input_from_batch({"input_ids": torch.zeros(4, 16, dtype=torch.long)}).shape
        torch.Size([2, 16])
    """
    inputs: Any = batch
    if isinstance(batch, Mapping):
        inputs = batch.get("input_ids")
    elif isinstance(batch, (tuple, list)) and batch:
        inputs = batch[0]
    if not isinstance(inputs, torch.Tensor) or inputs.ndim == 0:
        layout = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
        raise ValueError(
            f"ExportForInference cannot find the network's inputs in the training batch ({layout}); pass "
            "sample_input=, a tensor the network takes, e.g. torch.randn(1, 3, 32, 32)."
        )
    return inputs[:rows].detach().to("cpu", copy=True)


class ExportForInference(Callback):
    """Exports the trained network at the end of ``fit`` (``Event.FIT_END``) to TorchScript and ONNX, and checks it.

    Each format goes through :func:`composer.utils.export_for_inference` (a copy of the network, exported and
    checked); the results are kept in :attr:`results` and logged, and only global rank 0 writes files. Call
    :meth:`export` to export at any other time. The guide (``docs/guides/exporting-for-inference.md``) says which
    weights are exported.

    Args:
        save_path (str): The files' path without a suffix; ``.pt`` (TorchScript) and ``.onnx`` are appended unless
            it ends with one already. ``{run_name}`` is replaced by the Trainer's run name.
        save_format (str | Sequence[str]): ``'torchscript'``, ``'onnx'``, or both (the default).
        sample_input (Any, optional): An input of the network (a tensor or a tuple of tensors); default: the first
            two rows of the last training batch's inputs (:func:`sample_input_from_batch`).
        transforms (Sequence[Callable], optional): Functions applied to the copy before exporting (see
            :func:`~composer.utils.export_for_inference`'s ``transforms``).
        input_names (Sequence[str], optional): Names of the ONNX inputs.
        output_names (Sequence[str], optional): Names of the ONNX outputs.
        dynamic_batch (bool): Keep the batch dimension free.
        verify (bool): Run each file against the eager network (ONNX needs ``onnxruntime``).
        atol (float): Absolute tolerance of that check.
        rtol (float): Relative tolerance of that check.

    Example:
        >>> import tempfile
        >>> from composer import Trainer
        >>> from composer.models import simple_cnn
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> images = DataLoader(TensorDataset(torch.randn(8, 1, 8, 8), torch.arange(8) % 3), batch_size=4)
        >>> export = ExportForInference(tempfile.mkdtemp() + "/cnn", save_format="torchscript")
        >>> trainer = Trainer(model=simple_cnn(1, (8,), 3), train_dataloader=images, max_duration="2ba",
        ...                   callbacks=[export], progress_bar=False)
        >>> trainer.fit()
        >>> [(r.path.name, r.exporter) for r in export.results]
        [('cnn.pt', 'torch.jit.trace')]
        >>> torch.jit.load(str(export.results[0].path))(torch.randn(3, 1, 8, 8)).shape
        torch.Size([3, 3])
        >>> trainer.close()
    """

    def __init__(
        self,
        save_path: str | os.PathLike[str] = "exported/model",
        save_format: str | Sequence[str] = EXPORT_FORMATS,
        sample_input: Any = None,
        transforms: Sequence[Callable[[nn.Module], nn.Module | None]] | None = None,
        input_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
        dynamic_batch: bool = True,
        verify: bool = True,
        atol: float = 1e-4,
        rtol: float = 1e-4,
    ) -> None:
        formats = [save_format] if isinstance(save_format, str) else list(save_format)
        unknown = [f for f in formats if not isinstance(f, str) or f.lower() not in EXPORT_FORMATS]
        if not formats or unknown:
            raise ValueError(
                f"save_format={save_format!r} is not supported; choose one or more of {list(EXPORT_FORMATS)}."
            )
        if not str(save_path):
            raise ValueError("save_path='' names no file; give one, e.g. 'exported/model'.")
        self.save_path = str(save_path)
        self.save_formats = [f.lower() for f in formats]
        self.sample_input = sample_input
        self.transforms = list(transforms or ())
        self.input_names = input_names
        self.output_names = output_names
        self.dynamic_batch = dynamic_batch
        self.verify = verify
        self.atol = atol
        self.rtol = rtol
        self.results: list[ExportResult] = []

    def path_for(self, save_format: str, run_name: str | None = None) -> Path:
        """The file one format is written to: :attr:`save_path` with ``{run_name}`` filled in and the suffix added.

        Args:
            save_format: ``'torchscript'`` or ``'onnx'``.
            run_name: The run's name, for ``{run_name}``.

        Returns:
            Path: The file.
        """
        path = self.save_path.replace("{run_name}", run_name or "run")
        suffix = SUFFIXES[save_format]
        return Path(path if path.endswith(suffix) else path + suffix)

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger
        if is_sharded(state.model):
            raise ValueError(
                "ExportForInference cannot export a model sharded with FSDP (fsdp_config): the whole weights are on "
                "no single process. To fix, remove the callback, save a full checkpoint (state_dict_type='full'), "
                "and call composer.utils.export_for_inference on an unsharded model loaded from it."
            )

    def fit_end(self, state: State, logger: Logger) -> None:
        self.export(state, logger)

    def export(self, state: State, logger: Logger | None = None) -> list[ExportResult]:
        """Exports ``state.model`` in every format now (on global rank 0; other ranks return ``[]``).

        Args:
            state: The training state (its model, and its last batch when no ``sample_input`` was given).
            logger: Where to log ``export/<format>/max_abs_error`` (optional).

        Returns:
            list[ExportResult]: One per format, also kept in :attr:`results`.
        """
        if dist.get_global_rank() != 0:
            return []
        sample = self.sample_input
        if sample is None:
            if state.batch is None:
                raise ValueError(
                    "ExportForInference has no sample_input and the run has no training batch to take one from; "
                    "pass sample_input=, a tensor the network takes."
                )
            sample = sample_input_from_batch(state.batch)
        results = [
            export_for_inference(
                state.model,
                save_format,
                self.path_for(save_format, state.run_name),
                sample,
                transforms=self.transforms,
                input_names=self.input_names,
                output_names=self.output_names,
                dynamic_batch=self.dynamic_batch,
                verify=self.verify,
                atol=self.atol,
                rtol=self.rtol,
            )
            for save_format in self.save_formats
        ]
        self.results = results
        if logger is not None:
            logger.metric_fit(
                {
                    f"export/{r.save_format}/max_abs_error": r.max_abs_error
                    for r in results
                    if r.max_abs_error is not None
                }
            )
        return results


ExportForInferenceHparams = hparams_for(ExportForInference)
"""See :class:`ExportForInference`; the fields are its arguments (YAML key ``export_for_inference``)."""
