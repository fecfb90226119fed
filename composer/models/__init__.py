"""Models: the ComposerModel interface, a classifier wrapper, small reference networks, losses and metrics.

``import composer.models`` is cheap: each name is imported on first use, so that the Trainer (which needs only
:class:`ComposerModel`) does not import torchmetrics; the metrics import it when a model builds them.

Example:
    >>> from composer.models import MLP, ComposerClassifier
    >>> model = ComposerClassifier(MLP(in_features=4, hidden=(8,), num_classes=3), num_classes=3)
    >>> sorted(model.get_metrics(is_train=False))
    ['Accuracy', 'CrossEntropy']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composer._lazy import lazy_attributes

# Imported here rather than on first use: the function shares its module's name, and a lazy attribute would lose to
# the module once anything imports composer.models.simple_cnn. It imports torch, not torchmetrics.
from composer.models.simple_cnn import simple_cnn

if TYPE_CHECKING:
    from composer.models.base import ComposerModel
    from composer.models.classifier import ComposerClassifier
    from composer.models.gpt import GPT, GPTConfig
    from composer.models.huggingface import HuggingFaceModel
    from composer.models.language_metrics import BitsPerByte, Perplexity, TokenAccuracy
    from composer.models.loss import soft_cross_entropy
    from composer.models.metrics import Accuracy, CrossEntropy
    from composer.models.mlp import MLP
    from composer.models.resnet import BasicBlock, Bottleneck, ResNet, imagenet_resnet
    from composer.models.resnet_cifar import CIFARResNet, cifar_resnet
    from composer.models.simple_cnn import SimpleCNN

__all__ = ["MLP", "Accuracy", "ComposerClassifier", "ComposerModel", "CrossEntropy", "soft_cross_entropy"]
__all__ += ["BasicBlock", "Bottleneck", "CIFARResNet", "ResNet", "cifar_resnet", "imagenet_resnet"]
__all__ += ["GPT", "BitsPerByte", "GPTConfig", "HuggingFaceModel", "Perplexity", "TokenAccuracy"]
__all__ += ["SimpleCNN", "simple_cnn"]

# Public name -> the module that defines it.
_LAZY = {
    "ComposerModel": "composer.models.base",
    "ComposerClassifier": "composer.models.classifier",
    "GPT": "composer.models.gpt",
    "GPTConfig": "composer.models.gpt",
    "HuggingFaceModel": "composer.models.huggingface",
    "BitsPerByte": "composer.models.language_metrics",
    "Perplexity": "composer.models.language_metrics",
    "TokenAccuracy": "composer.models.language_metrics",
    "soft_cross_entropy": "composer.models.loss",
    "Accuracy": "composer.models.metrics",
    "CrossEntropy": "composer.models.metrics",
    "MLP": "composer.models.mlp",
    "BasicBlock": "composer.models.resnet",
    "Bottleneck": "composer.models.resnet",
    "ResNet": "composer.models.resnet",
    "imagenet_resnet": "composer.models.resnet",
    "CIFARResNet": "composer.models.resnet_cifar",
    "cifar_resnet": "composer.models.resnet_cifar",
    "SimpleCNN": "composer.models.simple_cnn",
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
