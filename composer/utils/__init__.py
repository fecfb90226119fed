"""Helpers by topic: seeding, model surgery, checkpoints, export for inference."""

from composer.utils.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_model_state,
    read_checkpoint,
    save_checkpoint,
)
from composer.utils.export import ExportError, ExportResult, export_for_inference
from composer.utils.module_surgery import count_module_instances, replace_module_classes, update_optimizer_params
from composer.utils.seeding import configure_deterministic_mode, new_seed, seed_all

__all__ = [
    "CheckpointError",
    "ExportError",
    "ExportResult",
    "configure_deterministic_mode",
    "count_module_instances",
    "export_for_inference",
    "load_checkpoint",
    "load_model_state",
    "new_seed",
    "read_checkpoint",
    "replace_module_classes",
    "save_checkpoint",
    "seed_all",
    "update_optimizer_params",
]
