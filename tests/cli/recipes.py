"""Tiny recipes for the command-line tests: an MLP on synthetic data, a few batches."""

from __future__ import annotations

from pathlib import Path

__all__ = ["IMAGE_RECIPE", "TINY_RECIPE", "write_recipe"]

TINY_RECIPE = """
model: {mlp: {in_features: 16, hidden: [8]}}
train_dataset: {synthetic_classification: {shape: [16], num_samples: 32}}
eval_dataset: {synthetic_classification: {shape: [16], num_samples: 16}}
train_batch_size: 8
max_duration: 2ba
optimizer: {sgd: {lr: 0.1}}
progress_bar: false
seed: 0
"""

# A small CNN on synthetic images, for the methods that need convolutions; no evaluation.
IMAGE_RECIPE = """
model: {simple_cnn: {widths: [4], num_classes: 4}}
train_dataset: {synthetic_classification: {shape: [3, 8, 8], num_classes: 4, num_samples: 16}}
train_batch_size: 8
max_duration: 2ba
progress_bar: false
seed: 0
"""


def write_recipe(folder: Path, name: str = "tiny", extra: str = "") -> Path:
    """Writes the tiny recipe (plus ``extra`` YAML lines) to ``folder/name.yaml``."""
    path = folder / f"{name}.yaml"
    path.write_text(TINY_RECIPE + extra)
    return path
