"""Config classes for the models of :mod:`composer.models`, as YAML names them (``model: {cifar_resnet: {depth: 56}}``).

Each class's fields are the arguments of the model's builder; :meth:`ModelHparams.initialize_object` returns the
:class:`~composer.models.ComposerModel`.

Example:
    >>> from composer.config.models import SimpleCNNHparams
    >>> model = SimpleCNNHparams(in_channels=1, widths=[8, 16]).initialize_object()
    >>> type(model).__name__, type(model.module).__name__
    ('ComposerClassifier', 'SimpleCNN')
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar

from composer.core.hparams import Hparams, hparams
from composer.models.base import ComposerModel

__all__ = [
    "MODELS",
    "CIFARResNetHparams",
    "GPTHparams",
    "HuggingFaceHparams",
    "ImageNetResNetHparams",
    "MLPHparams",
    "ModelHparams",
    "SimpleCNNHparams",
]

_IMAGENET_DEPTHS = (18, 34, 50, 101, 152)


def _check_positive(config: Hparams, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        values = value if isinstance(value, list) else [value]
        if not values or any(v < 1 for v in values):
            raise ValueError(f"{name}={value!r} must be positive (a list of positive ints for widths and hidden).")


class ModelHparams(Hparams, abc.ABC):
    """The base of the model configs; :meth:`initialize_object` builds the model.

    ``input_fields`` and ``output_fields`` name the fields that decide what the model takes and how many outputs it
    gives, so that an error about a model and data that do not fit names the keys to change.
    """

    input_fields: ClassVar[tuple[str, ...]] = ()
    output_fields: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def initialize_object(self) -> ComposerModel:
        """Builds the model."""

    def initialize_structure(self) -> ComposerModel:
        """The model's modules without weights (on PyTorch's ``meta`` device): built in no time and memory.

        The recipe reads what it fills in from the model (ALiBi's paths, :mod:`composer.config.from_model`) from it.
        """
        import torch

        with torch.device("meta"):
            return self.initialize_object()

    def input_hint(self, sample_shape: list[int]) -> str:
        """What to set for the model to take samples of ``sample_shape`` (one sample, without the batch), or ``""``."""
        del sample_shape
        return ""


def _channels_hint(sample_shape: list[int]) -> str:
    return f"in_channels: {sample_shape[0]} (one sample has shape {sample_shape})" if len(sample_shape) == 3 else ""


@hparams
class MLPHparams(ModelHparams):
    """MLP classifier: flattened inputs, ReLU hidden layers (:class:`~composer.models.MLP`).

    Args:
        in_features: Features per sample after flattening (64 for 8x8 digits).
        hidden: Widths of the hidden layers. Default = [512, 512].
        num_classes: Output logits. Default = 10.
    """

    in_features: int
    hidden: list[int] = dataclasses.field(default_factory=lambda: [512, 512])
    num_classes: int = 10

    input_fields: ClassVar[tuple[str, ...]] = ("in_features",)
    output_fields: ClassVar[tuple[str, ...]] = ("num_classes",)

    def validate(self) -> None:
        """Checks that the sizes are positive."""
        _check_positive(self, "in_features", "num_classes")
        if any(width < 1 for width in self.hidden):
            raise ValueError(f"hidden={self.hidden!r} must hold positive widths (or be empty for a linear model).")

    def input_hint(self, sample_shape: list[int]) -> str:
        """The MLP flattens each sample: ``in_features`` is the number of values in one."""
        return f"in_features: {math.prod(sample_shape)} (the values in one sample)"

    def initialize_object(self) -> ComposerModel:
        """Returns the MLP wrapped in a :class:`~composer.models.ComposerClassifier`."""
        from composer.models import MLP, ComposerClassifier

        module = MLP(in_features=self.in_features, hidden=tuple(self.hidden), num_classes=self.num_classes)
        return ComposerClassifier(module, num_classes=self.num_classes)


@hparams
class SimpleCNNHparams(ModelHparams):
    """Small CNN for images of any size; the model of the built-in digits task (:func:`~composer.models.simple_cnn`).

    Args:
        in_channels: Channels of the input images. Default = 3.
        widths: Channels of each conv stage. Default = [16, 32, 64].
        num_classes: Output logits. Default = 10.
        dropout: Dropout probability before the classifier's linear layer (what GyroDropout replaces). Default = 0.
    """

    in_channels: int = 3
    widths: list[int] = dataclasses.field(default_factory=lambda: [16, 32, 64])
    num_classes: int = 10
    dropout: float = 0.0

    input_fields: ClassVar[tuple[str, ...]] = ("in_channels",)
    output_fields: ClassVar[tuple[str, ...]] = ("num_classes",)

    def validate(self) -> None:
        """Checks that the sizes are positive."""
        _check_positive(self, "in_channels", "widths", "num_classes")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: received {self.dropout!r}; expected a probability in [0, 1), such as 0.5.")

    def input_hint(self, sample_shape: list[int]) -> str:
        """Images are (channels, height, width): ``in_channels`` is the first."""
        return _channels_hint(sample_shape)

    def initialize_object(self) -> ComposerModel:
        """Returns the :class:`~composer.models.SimpleCNN` classifier."""
        from composer.models import simple_cnn

        return simple_cnn(
            in_channels=self.in_channels, widths=tuple(self.widths), num_classes=self.num_classes, dropout=self.dropout
        )


@hparams
class CIFARResNetHparams(ModelHparams):
    """CIFAR ResNet of depth ``6n + 2`` (ResNet-20, -56, ...) for 32x32 images (:class:`~composer.models.CIFARResNet`).

    Args:
        depth: 20, 32, 44, 56, 110 or any ``6n + 2``. Default = 56.
        num_classes: Output logits. Default = 10.
        in_channels: Channels of the input images. Default = 3.
    """

    depth: int = 56
    num_classes: int = 10
    in_channels: int = 3

    input_fields: ClassVar[tuple[str, ...]] = ("in_channels",)
    output_fields: ClassVar[tuple[str, ...]] = ("num_classes",)

    def validate(self) -> None:
        """Checks the depth's form and that the sizes are positive."""
        _check_positive(self, "num_classes", "in_channels")
        if self.depth < 8 or (self.depth - 2) % 6 != 0:
            raise ValueError(f"depth={self.depth!r} is not of the form 6n + 2 with n >= 1; use 20, 32, 44, 56 or 110.")

    def input_hint(self, sample_shape: list[int]) -> str:
        """Images are (channels, height, width): ``in_channels`` is the first."""
        return _channels_hint(sample_shape)

    def initialize_object(self) -> ComposerModel:
        """Returns the ResNet wrapped in a :class:`~composer.models.ComposerClassifier`."""
        from composer.models import CIFARResNet, ComposerClassifier

        module = CIFARResNet(depth=self.depth, num_classes=self.num_classes, in_channels=self.in_channels)
        return ComposerClassifier(module, num_classes=self.num_classes)


@hparams
class ImageNetResNetHparams(ModelHparams):
    """ImageNet ResNet-18/34/50/101/152 (:func:`~composer.models.imagenet_resnet`).

    Args:
        depth: 18, 34, 50, 101 or 152. Default = 50.
        num_classes: Output logits. Default = 1000.
    """

    depth: int = 50
    num_classes: int = 1000

    output_fields: ClassVar[tuple[str, ...]] = ("num_classes",)

    def validate(self) -> None:
        """Checks the depth and the class count."""
        _check_positive(self, "num_classes")
        if self.depth not in _IMAGENET_DEPTHS:
            raise ValueError(f"depth={self.depth!r} is not supported; choose one of {list(_IMAGENET_DEPTHS)}.")

    def initialize_object(self) -> ComposerModel:
        """Returns the ResNet classifier."""
        from composer.models import imagenet_resnet

        return imagenet_resnet(depth=self.depth, num_classes=self.num_classes)


@hparams
class GPTHparams(ModelHparams):
    """Compact GPT language model; the fields of :class:`~composer.models.GPTConfig` (:class:`~composer.models.GPT`).

    Args:
        vocab_size: Token ids (256 for bytes). Default = 256.
        max_sequence_length: Longest input the position embedding covers. Default = 256.
        n_layer: Transformer blocks. Default = 4.
        n_head: Attention heads. Default = 4.
        n_embd: Width; a multiple of ``n_head``. Default = 128.
        dropout: Dropout probability. Default = 0.0.
        tie_embeddings: Share the input and output embeddings. Default = False.
    """

    vocab_size: int = 256
    max_sequence_length: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    tie_embeddings: bool = False

    input_fields: ClassVar[tuple[str, ...]] = ("vocab_size", "max_sequence_length")
    output_fields: ClassVar[tuple[str, ...]] = ("vocab_size",)

    def validate(self) -> None:
        """Checks the shape as :class:`~composer.models.GPTConfig` does."""
        self._config()

    def input_hint(self, sample_shape: list[int]) -> str:
        """A sample is a sequence of token ids: it must fit ``max_sequence_length`` (and ``vocab_size``)."""
        return f"max_sequence_length: {sample_shape[-1]} or more (the tokens in one sample)" if sample_shape else ""

    def _config(self) -> Any:
        from composer.models.gpt import GPTConfig

        return GPTConfig(**dataclasses.asdict(self))

    def initialize_object(self) -> ComposerModel:
        """Returns the GPT model."""
        from composer.models.gpt import GPT

        return GPT(self._config())


@hparams
class HuggingFaceHparams(ModelHparams):
    """Hugging Face causal or masked language model, fresh or pretrained (:class:`~composer.models.HuggingFaceModel`).

    Builds ``AutoModelForCausalLM`` (or ``AutoModelForMaskedLM``) from ``AutoConfig.for_model(model_type, **config)``
    with fresh weights, or loads ``pretrained`` (a local folder or a hub name) with ``from_pretrained``. Needs the
    ``nlp`` extra (``pip install 'opencomposer[nlp]'``).

    Args:
        model_type: A ``transformers`` model type such as ``'gpt2'`` or ``'bert'``. Default = 'gpt2'.
        config: Fields of that model type's config (``{n_layer: 2, n_embd: 64}``). Default = {}.
        task: ``'causal_lm'`` or ``'masked_lm'``. Default = 'causal_lm'.
        pretrained: Load these weights instead of initializing fresh ones. Default = None.
    """

    model_type: str = "gpt2"
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    task: str = "causal_lm"
    pretrained: str | None = None

    input_fields: ClassVar[tuple[str, ...]] = ("config",)
    output_fields: ClassVar[tuple[str, ...]] = ("config",)

    def validate(self) -> None:
        """Checks the task name."""
        if self.task not in ("causal_lm", "masked_lm"):
            raise ValueError(f"task={self.task!r} is not supported; use 'causal_lm' or 'masked_lm'.")

    def initialize_object(self) -> ComposerModel:
        """Returns the wrapped model (raises ImportError naming the extra without ``transformers``)."""
        from composer.models.huggingface import HuggingFaceModel

        auto = self._auto_class()
        if self.pretrained is not None:
            model = auto.from_pretrained(self.pretrained, **self.config)
        else:
            model = auto.from_config(self._transformers_config())
        return HuggingFaceModel(model)

    def initialize_structure(self) -> ComposerModel:
        """The model without weights (on the ``meta`` device); a pretrained one from its config, its weights unread."""
        import torch

        from composer.models.huggingface import HuggingFaceModel

        auto, config = self._auto_class(), self._transformers_config()
        with torch.device("meta"):
            return HuggingFaceModel(auto.from_config(config))

    def _auto_class(self) -> Any:
        from composer.models.huggingface import require_transformers

        require_transformers("HuggingFaceHparams")
        import transformers

        return transformers.AutoModelForCausalLM if self.task == "causal_lm" else transformers.AutoModelForMaskedLM

    def _transformers_config(self) -> Any:
        import transformers

        if self.pretrained is not None:
            return transformers.AutoConfig.from_pretrained(self.pretrained, **self.config)
        return transformers.AutoConfig.for_model(self.model_type, **self.config)


MODELS: dict[str, type[ModelHparams]] = {
    "mlp": MLPHparams,
    "simple_cnn": SimpleCNNHparams,
    "cifar_resnet": CIFARResNetHparams,
    "imagenet_resnet": ImageNetResNetHparams,
    "gpt": GPTHparams,
    "huggingface": HuggingFaceHparams,
}
"""The model registry: each name a recipe's ``model:`` may use, mapped to its config class."""
