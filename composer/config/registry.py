"""The registries a recipe names things by: literal dicts from YAML key to config class.

Algorithms, models and datasets are listed here; optimizers, schedulers, callbacks and loggers keep their registries
next to their classes and are gathered into :data:`REGISTRIES`, which ``composer list`` prints.

Example:
    >>> sorted(REGISTRIES)
    ['algorithms', 'callbacks', 'datasets', 'loggers', 'models', 'optimizers', 'schedulers']
    >>> MODELS["simple_cnn"].__name__
    'SimpleCNNHparams'
"""

from __future__ import annotations

from composer.algorithms import (
    AlibiHparams,
    AugMixHparams,
    BlurPoolHparams,
    ChannelsLastHparams,
    ColOutHparams,
    CutMixHparams,
    CutOutHparams,
    EMAHparams,
    FactorizeHparams,
    GatedLinearUnitsHparams,
    GhostBatchNormHparams,
    GradientClippingHparams,
    GyroDropoutHparams,
    LabelSmoothingHparams,
    LayerFreezingHparams,
    LowPrecisionGroupNormHparams,
    LowPrecisionLayerNormHparams,
    MixUpHparams,
    NoOpModelHparams,
    ProgressiveResizingHparams,
    RandAugmentHparams,
    SAMHparams,
    ScaleScheduleHparams,
    SelectiveBackpropHparams,
    SeqLengthWarmupHparams,
    SqueezeExciteHparams,
    StochasticDepthHparams,
    SWAHparams,
    WeightStandardizationHparams,
)
from composer.callbacks import CALLBACK_HPARAMS
from composer.config.datasets import (
    CIFAR10Hparams,
    CIFAR100Hparams,
    DatasetHparams,
    DigitsHparams,
    ImageFolderHparams,
    PythonDocsHparams,
    SyntheticClassificationHparams,
    SyntheticTokensHparams,
    TextFilesHparams,
)
from composer.config.models import (
    CIFARResNetHparams,
    GPTHparams,
    HuggingFaceHparams,
    ImageNetResNetHparams,
    MLPHparams,
    ModelHparams,
    SimpleCNNHparams,
)
from composer.core.hparams import Hparams
from composer.loggers import LOGGER_HPARAMS
from composer.optim.optimizer_hparams import OPTIMIZERS
from composer.optim.scheduler import SCHEDULERS

__all__ = ["ALGORITHM_HPARAMS", "DATASETS", "MODELS", "REGISTRIES"]

ALGORITHM_HPARAMS: dict[str, type[Hparams]] = {
    "alibi": AlibiHparams,
    "augmix": AugMixHparams,
    "blurpool": BlurPoolHparams,
    "channels_last": ChannelsLastHparams,
    "colout": ColOutHparams,
    "cutmix": CutMixHparams,
    "cutout": CutOutHparams,
    "ema": EMAHparams,
    "factorize": FactorizeHparams,
    "gated_linear_units": GatedLinearUnitsHparams,
    "ghost_batchnorm": GhostBatchNormHparams,
    "gradient_clipping": GradientClippingHparams,
    "gyro_dropout": GyroDropoutHparams,
    "label_smoothing": LabelSmoothingHparams,
    "layer_freezing": LayerFreezingHparams,
    "low_precision_groupnorm": LowPrecisionGroupNormHparams,
    "low_precision_layernorm": LowPrecisionLayerNormHparams,
    "mixup": MixUpHparams,
    "no_op_model": NoOpModelHparams,
    "progressive_resizing": ProgressiveResizingHparams,
    "randaugment": RandAugmentHparams,
    "sam": SAMHparams,
    "scale_schedule": ScaleScheduleHparams,
    "selective_backprop": SelectiveBackpropHparams,
    "seq_length_warmup": SeqLengthWarmupHparams,
    "squeeze_excite": SqueezeExciteHparams,
    "stochastic_depth": StochasticDepthHparams,
    "swa": SWAHparams,
    "weight_standardization": WeightStandardizationHparams,
}
"""YAML key -> algorithm config class (the same keys as :data:`composer.algorithms.ALGORITHMS`)."""

MODELS: dict[str, type[ModelHparams]] = {
    "mlp": MLPHparams,
    "simple_cnn": SimpleCNNHparams,
    "cifar_resnet": CIFARResNetHparams,
    "imagenet_resnet": ImageNetResNetHparams,
    "gpt": GPTHparams,
    "huggingface": HuggingFaceHparams,
}
"""YAML key -> model config class."""

DATASETS: dict[str, type[DatasetHparams]] = {
    "digits": DigitsHparams,
    "synthetic_classification": SyntheticClassificationHparams,
    "synthetic_tokens": SyntheticTokensHparams,
    "cifar10": CIFAR10Hparams,
    "cifar100": CIFAR100Hparams,
    "image_folder": ImageFolderHparams,
    "python_docs": PythonDocsHparams,
    "text_files": TextFilesHparams,
}
"""YAML key -> dataset config class."""

REGISTRIES: dict[str, dict[str, type[Hparams]]] = {
    "algorithms": ALGORITHM_HPARAMS,
    "models": dict(MODELS),
    "datasets": dict(DATASETS),
    "optimizers": dict(OPTIMIZERS),
    "schedulers": dict(SCHEDULERS),
    "callbacks": CALLBACK_HPARAMS,
    "loggers": LOGGER_HPARAMS,
}
"""Kind -> registry, for ``composer list`` and for error messages."""
