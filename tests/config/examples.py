"""Example fields for every registered config class: the required fields, and files where a class reads one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["example_fields"]

_ALIBI_FOR_GPT = {
    "position_embedding_attribute": "wpe",
    "attention_module_name": "composer.models.gpt.CausalSelfAttention",
    "attr_to_replace": "forward",
    "alibi_attention": "composer.algorithms.alibi.policies.gpt_alibi_forward",
}


def example_fields(kind: str, name: str, tmp_path: Path) -> dict[str, Any]:
    """Fields that make ``REGISTRIES[kind][name]`` valid and buildable (files are created under ``tmp_path``)."""
    if kind == "datasets" and name in ("cifar10", "cifar100"):
        from tests.datasets.cifar_archive import write_cifar_archive

        return {"path": str(write_cifar_archive(tmp_path, num_classes=int(name[5:])))}
    if kind == "datasets" and name == "image_folder":
        from PIL import Image

        for label in ("a", "b"):
            (tmp_path / "images" / label).mkdir(parents=True)
            Image.new("RGB", (12, 12), (9, 9, 9)).save(tmp_path / "images" / label / "0.png")
        return {"path": str(tmp_path / "images"), "crop_size": 8, "resize_size": 10, "num_workers": 0}
    if kind == "datasets" and name == "text_files":
        (tmp_path / "text.txt").write_text("Some text to model, byte by byte. " * 20)
        return {"paths": [str(tmp_path / "text.txt")], "seq_len": 16}
    if kind == "datasets" and name == "hf_dataset":
        (tmp_path / "rows.jsonl").write_text('{"text": "Some text to model, byte by byte."}\n' * 20)
        return {"path": str(tmp_path / "rows.jsonl"), "text_column": "text", "seq_len": 16, "cache_dir": str(tmp_path)}
    if kind == "datasets" and name == "streaming":
        from tests.datasets.test_streaming import write_shards

        return {"path": str(write_shards(tmp_path / "shards"))}
    if kind == "loggers" and name in ("csv", "file"):
        return {"filename": str(tmp_path / f"log.{name}")}
    examples: dict[tuple[str, str], dict[str, Any]] = {
        ("algorithms", "alibi"): _ALIBI_FOR_GPT,
        ("algorithms", "cutout"): {"n_holes": 1, "length": 4},
        ("callbacks", "generate"): {"prompts": ["def ", "import "], "max_new_tokens": 4},
        ("algorithms", "ghost_batchnorm"): {"ghost_batch_size": 2},
        ("algorithms", "gradient_clipping"): {"clipping_type": "norm", "clipping_threshold": 1.0},
        ("algorithms", "label_smoothing"): {"alpha": 0.1},
        ("algorithms", "mixup"): {"alpha": 0.2},
        ("algorithms", "scale_schedule"): {"ratio": 0.5},
        ("algorithms", "selective_backprop"): {
            "start": 0.5,
            "end": 0.9,
            "keep": 0.5,
            "scale_factor": 0.5,
            "interrupt": 2,
        },
        ("algorithms", "stochastic_depth"): {"stochastic_method": "block", "target_layer_name": "ResNetBottleneck"},
        ("models", "mlp"): {"in_features": 64, "hidden": [16]},
        ("models", "imagenet_resnet"): {"depth": 18, "num_classes": 10},
        ("models", "cifar_resnet"): {"depth": 8},
        ("models", "gpt"): {"n_layer": 1, "n_embd": 32},
        ("models", "huggingface"): {"config": {"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 64}},
        ("datasets", "python_docs"): {"seq_len": 32},
        ("optimizers", "sgd"): {"lr": 0.1},
        ("optimizers", "decoupled_sgdw"): {"lr": 0.1, "momentum": 0.9},
        ("optimizers", "rmsprop"): {"lr": 0.01},
        ("schedulers", "exponential"): {"gamma": 0.9},
        ("schedulers", "step"): {"step_size": "2ba"},
        ("schedulers", "multistep"): {"milestones": ["2ba", "4ba"]},
        ("schedulers", "polynomial"): {"power": 2.0},
        ("schedulers", "multistep_with_warmup"): {"warmup_time": "1ba", "milestones": ["2ba"]},
        ("schedulers", "linear_decay_with_warmup"): {"warmup_time": "1ba"},
        ("schedulers", "cosine_decay_with_warmup"): {"warmup_time": "1ba"},
        ("callbacks", "early_stopper"): {"monitor": "metrics/eval/Accuracy"},
        ("callbacks", "threshold_stopper"): {"monitor": "metrics/eval/Accuracy", "threshold": 0.9},
        ("loggers", "remote_uploader"): {"remote_folder": "s3://logs/{run_name}", "upload_interval": "2ba"},
    }
    return dict(examples.get((kind, name), {}))
