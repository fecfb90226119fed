"""Callbacks that observe training; ``CALLBACKS`` maps each registry name to its class.

Callbacks never change the training state; the stoppers end a run through ``state.stop_training(reason)``.
"""

from __future__ import annotations

from composer.callbacks.activation_monitor import (
    ActivationMonitor,
    ActivationMonitorHparams,
    activation_stats,
    select_modules,
)
from composer.callbacks.checkpoint_saver import CheckpointSaver, CheckpointSaverHparams
from composer.callbacks.early_stopper import EarlyStopper, EarlyStopperHparams
from composer.callbacks.export_for_inference import (
    ExportForInference,
    ExportForInferenceHparams,
    sample_input_from_batch,
)
from composer.callbacks.generate import ByteTokenizer, Generate, GenerateHparams, generate
from composer.callbacks.grad_monitor import GradMonitor, GradMonitorHparams, grad_norms
from composer.callbacks.image_visualizer import ImageVisualizer, ImageVisualizerHparams, log_images, make_image_grid
from composer.callbacks.lr_monitor import LRMonitor, LRMonitorHparams
from composer.callbacks.memory_monitor import MemoryMonitor, MemoryMonitorHparams, memory_usage
from composer.callbacks.metric_stopper import MetricStopper, infer_mode, known_metric_names
from composer.callbacks.nan_monitor import NaNMonitor, NaNMonitorHparams, NonFiniteLossError
from composer.callbacks.optimizer_monitor import (
    OptimizerMonitor,
    OptimizerMonitorHparams,
    optimizer_norms,
    parameter_updates,
    snapshot_parameters,
    tensor_norms,
)
from composer.callbacks.runtime_estimator import (
    RuntimeEstimator,
    RuntimeEstimatorHparams,
    estimate_remaining_seconds,
    remaining_schedule,
)
from composer.callbacks.speed_monitor import SpeedMonitor, SpeedMonitorHparams
from composer.callbacks.system_metrics_monitor import (
    SystemMetricsMonitor,
    SystemMetricsMonitorHparams,
    gpu_metrics,
    open_nvml,
    system_metrics,
)
from composer.callbacks.threshold_stopper import ThresholdStopper, ThresholdStopperHparams
from composer.core.callback import Callback
from composer.core.hparams import Hparams

__all__ = [
    "CALLBACKS",
    "CALLBACK_HPARAMS",
    "ActivationMonitor",
    "ActivationMonitorHparams",
    "ByteTokenizer",
    "Callback",
    "CheckpointSaver",
    "CheckpointSaverHparams",
    "EarlyStopper",
    "EarlyStopperHparams",
    "ExportForInference",
    "ExportForInferenceHparams",
    "Generate",
    "GenerateHparams",
    "GradMonitor",
    "GradMonitorHparams",
    "ImageVisualizer",
    "ImageVisualizerHparams",
    "LRMonitor",
    "LRMonitorHparams",
    "MemoryMonitor",
    "MemoryMonitorHparams",
    "MetricStopper",
    "NaNMonitor",
    "NaNMonitorHparams",
    "NonFiniteLossError",
    "OptimizerMonitor",
    "OptimizerMonitorHparams",
    "RuntimeEstimator",
    "RuntimeEstimatorHparams",
    "SpeedMonitor",
    "SpeedMonitorHparams",
    "SystemMetricsMonitor",
    "SystemMetricsMonitorHparams",
    "ThresholdStopper",
    "ThresholdStopperHparams",
    "activation_stats",
    "estimate_remaining_seconds",
    "generate",
    "gpu_metrics",
    "grad_norms",
    "infer_mode",
    "known_metric_names",
    "log_images",
    "make_image_grid",
    "memory_usage",
    "open_nvml",
    "optimizer_norms",
    "parameter_updates",
    "remaining_schedule",
    "sample_input_from_batch",
    "select_modules",
    "snapshot_parameters",
    "system_metrics",
    "tensor_norms",
]

CALLBACKS: dict[str, type[Callback]] = {
    "activation_monitor": ActivationMonitor,
    "checkpoint_saver": CheckpointSaver,
    "early_stopper": EarlyStopper,
    "export_for_inference": ExportForInference,
    "generate": Generate,
    "grad_monitor": GradMonitor,
    "image_visualizer": ImageVisualizer,
    "lr_monitor": LRMonitor,
    "memory_monitor": MemoryMonitor,
    "nan_monitor": NaNMonitor,
    "optimizer_monitor": OptimizerMonitor,
    "runtime_estimator": RuntimeEstimator,
    "speed_monitor": SpeedMonitor,
    "system_metrics_monitor": SystemMetricsMonitor,
    "threshold_stopper": ThresholdStopper,
}
"""The callback registry: each name a recipe's ``callbacks:`` may use, mapped to its class."""

CALLBACK_HPARAMS: dict[str, type[Hparams]] = {
    "activation_monitor": ActivationMonitorHparams,
    "checkpoint_saver": CheckpointSaverHparams,
    "early_stopper": EarlyStopperHparams,
    "export_for_inference": ExportForInferenceHparams,
    "generate": GenerateHparams,
    "grad_monitor": GradMonitorHparams,
    "image_visualizer": ImageVisualizerHparams,
    "lr_monitor": LRMonitorHparams,
    "memory_monitor": MemoryMonitorHparams,
    "nan_monitor": NaNMonitorHparams,
    "optimizer_monitor": OptimizerMonitorHparams,
    "runtime_estimator": RuntimeEstimatorHparams,
    "speed_monitor": SpeedMonitorHparams,
    "system_metrics_monitor": SystemMetricsMonitorHparams,
    "threshold_stopper": ThresholdStopperHparams,
}
"""Each registry name mapped to the config class (``*Hparams``) that builds its callback from a recipe."""
