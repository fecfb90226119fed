"""How to build each registered algorithm for the registry-wide contract test.

One entry per name in ``composer.algorithms.ALGORITHMS``: a function returning ``(algorithm, model, dataloader)`` for a
short CPU run (2 batches). Keep each entry small; add yours with one small edit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SETTINGS"]


def _training_dynamics(name: str) -> tuple[Any, Any, Any]:
    # A tiny conv net on 8x8 images (2 batches of 4): image batches for resizing, BN for SB's selection pass.
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import LayerFreezing, ProgressiveResizing, SelectiveBackprop
    from composer.models import ComposerClassifier

    algorithm = {
        "layer_freezing": lambda: LayerFreezing(freeze_start=0.0, freeze_level=1.0),
        "progressive_resizing": lambda: ProgressiveResizing(mode="resize", initial_scale=0.5, finetune_fraction=0.2),
        "selective_backprop": lambda: SelectiveBackprop(start=0.0, end=1.0, keep=0.5, scale_factor=0.5, interrupt=0),
    }[name]()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 3),
    )
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g))
    return algorithm, ComposerClassifier(net, num_classes=3), DataLoader(data, batch_size=4)


def _vision_augmentation(name: str) -> tuple[Any, Any, Any]:
    # ResNet-8 on 8x8 images (2 batches of 4), for the batch augmentations and label smoothing.
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import ColOut, CutMix, CutOut, LabelSmoothing, MixUp
    from composer.models.resnet_cifar import cifar_resnet

    algorithm = {
        "colout": lambda: ColOut(p_row=0.25, p_col=0.25, batch=True),
        "cutmix": lambda: CutMix(alpha=1.0),
        "cutout": lambda: CutOut(n_holes=1, length=4),
        "label_smoothing": lambda: LabelSmoothing(alpha=0.1),
        "mixup": lambda: MixUp(alpha=0.2),
    }[name]()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g))
    return algorithm, cifar_resnet(depth=8, num_classes=4), DataLoader(data, batch_size=4)


def _optimization(name: str) -> tuple[Any, Any, Any]:
    # An MLP with batch norm (SWA recomputes its statistics) on 8 features, 2 batches of 4.
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import EMA, SAM, SWA, GradientClipping, ScaleSchedule
    from composer.models import ComposerClassifier

    algorithm = {
        "ema": lambda: EMA(half_life="2ba"),
        "gradient_clipping": lambda: GradientClipping(clipping_type="adaptive", clipping_threshold=0.1),
        "sam": lambda: SAM(rho=0.05),
        "scale_schedule": lambda: ScaleSchedule(ratio=1.0),  # the contract test checks the batch count
        "swa": lambda: SWA(swa_start=0.0, anneal_epochs=1, swa_lr=0.01),
    }[name]()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g))
    return algorithm, ComposerClassifier(net, num_classes=3), DataLoader(data, batch_size=4)


def _dataset_augmentation(name: str) -> tuple[Any, Any, Any]:
    # torchvision's FakeData: 8 random 8x8 RGB PIL images with a Compose([ToTensor()]) transform to insert into.
    import torch
    from torch.utils.data import DataLoader
    from torchvision import transforms
    from torchvision.datasets import FakeData

    from composer.algorithms import AugMix, RandAugment
    from composer.models import ComposerClassifier

    algorithm = {"augmix": lambda: AugMix(severity=3), "randaugment": lambda: RandAugment(severity=9, depth=2)}[name]()
    torch.manual_seed(0)
    data = FakeData(8, (3, 8, 8), num_classes=3, transform=transforms.Compose([transforms.ToTensor()]))
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3))
    return algorithm, ComposerClassifier(net, num_classes=3), DataLoader(data, batch_size=4)


def _vision_surgery(name: str) -> tuple[Any, Any, Any]:
    # ResNet-8 on 16x16 images (2 batches of 4); settings under which every surgery replaces something.
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import (
        BlurPool,
        ChannelsLast,
        Factorize,
        GhostBatchNorm,
        SqueezeExcite,
        StochasticDepth,
        WeightStandardization,
    )
    from composer.models.resnet_cifar import cifar_resnet

    algorithm = {
        "blurpool": lambda: BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True),
        "channels_last": lambda: ChannelsLast(),
        # ResNet-8's 32- and 64-channel convolutions at a quarter of their width, and the classifier at rank 2.
        "factorize": lambda: Factorize(min_channels=32, latent_channels=0.25, min_features=8, latent_features=2),
        "ghost_batchnorm": lambda: GhostBatchNorm(ghost_batch_size=2),
        "squeeze_excite": lambda: SqueezeExcite(latent_channels=8, min_channels=32),
        "stochastic_depth": lambda: StochasticDepth(
            stochastic_method="block", target_layer_name="ResNetBasicBlock", drop_rate=0.5, drop_warmup=0.5
        ),
        "weight_standardization": lambda: WeightStandardization(n_last_layers_ignore=0),
    }[name]()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g))
    return algorithm, cifar_resnet(depth=8, num_classes=10), DataLoader(data, batch_size=4)


def _language_model(name: str) -> tuple[Any, Any, Any]:
    # A one-layer byte-level GPT on 8 windows of 16 bytes (2 batches of 4 dict batches).
    import torch
    from torch.utils.data import DataLoader

    from composer.algorithms import Alibi, GatedLinearUnits, GyroDropout, LowPrecisionLayerNorm, SeqLengthWarmup
    from composer.datasets import ByteTextDataset
    from composer.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, max_sequence_length=32))
    algorithm = {
        "alibi": lambda: Alibi.from_model(model, max_sequence_length=64, train_sequence_length_scaling=0.5),
        "seq_length_warmup": lambda: SeqLengthWarmup(
            duration=0.5, min_seq_length=8, max_seq_length=16, step_size=4, truncate=False
        ),
        "gated_linear_units": lambda: GatedLinearUnits(activation="silu"),
        "low_precision_layernorm": lambda: LowPrecisionLayerNorm(),  # fp32 here: it warns and swaps (identity)
        "gyro_dropout": lambda: GyroDropout(p=0.5, sigma=8, tau=2),  # replaces the GPT's nn.Dropout(0.0) modules
    }[name]()
    data = ByteTextDataset(b"The quick brown fox jumps over the lazy dog. " * 3, seq_len=16)
    return algorithm, model, DataLoader(data, batch_size=4)


def _no_op_model(name: str) -> tuple[Any, Any, Any]:
    # The stand-in replaces ResNet-8 at INIT; it trains on the same 16x16 images (2 batches of 4).
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import NoOpModel
    from composer.models.resnet_cifar import cifar_resnet

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g))
    return {"no_op_model": NoOpModel}[name](), cifar_resnet(depth=8, num_classes=10), DataLoader(data, batch_size=4)


def _groupnorm_cnn(name: str) -> tuple[Any, Any, Any]:
    # A conv net with GroupNorm on 8x8 images (2 batches of 4), for LowPrecisionGroupNorm.
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from composer.algorithms import LowPrecisionGroupNorm
    from composer.models import ComposerClassifier

    algorithm = {"low_precision_groupnorm": lambda: LowPrecisionGroupNorm()}[name]()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.GroupNorm(2, 8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 3),
    )
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g))
    return algorithm, ComposerClassifier(net, num_classes=3), DataLoader(data, batch_size=4)


# name -> () -> (algorithm instance, ComposerModel, train dataloader)
SETTINGS: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
    "augmix": lambda: _dataset_augmentation("augmix"),
    "randaugment": lambda: _dataset_augmentation("randaugment"),
    "colout": lambda: _vision_augmentation("colout"),
    "cutmix": lambda: _vision_augmentation("cutmix"),
    "cutout": lambda: _vision_augmentation("cutout"),
    "label_smoothing": lambda: _vision_augmentation("label_smoothing"),
    "mixup": lambda: _vision_augmentation("mixup"),
    "layer_freezing": lambda: _training_dynamics("layer_freezing"),
    "progressive_resizing": lambda: _training_dynamics("progressive_resizing"),
    "selective_backprop": lambda: _training_dynamics("selective_backprop"),
    "ema": lambda: _optimization("ema"),
    "gradient_clipping": lambda: _optimization("gradient_clipping"),
    "sam": lambda: _optimization("sam"),
    "scale_schedule": lambda: _optimization("scale_schedule"),
    "swa": lambda: _optimization("swa"),
    "blurpool": lambda: _vision_surgery("blurpool"),
    "channels_last": lambda: _vision_surgery("channels_last"),
    "factorize": lambda: _vision_surgery("factorize"),
    "ghost_batchnorm": lambda: _vision_surgery("ghost_batchnorm"),
    "squeeze_excite": lambda: _vision_surgery("squeeze_excite"),
    "stochastic_depth": lambda: _vision_surgery("stochastic_depth"),
    "weight_standardization": lambda: _vision_surgery("weight_standardization"),
    "no_op_model": lambda: _no_op_model("no_op_model"),
    "alibi": lambda: _language_model("alibi"),
    "seq_length_warmup": lambda: _language_model("seq_length_warmup"),
    "gated_linear_units": lambda: _language_model("gated_linear_units"),
    "low_precision_layernorm": lambda: _language_model("low_precision_layernorm"),
    "gyro_dropout": lambda: _language_model("gyro_dropout"),
    "low_precision_groupnorm": lambda: _groupnorm_cnn("low_precision_groupnorm"),
}
