"""Models: the ComposerModel interface, a classifier wrapper, small reference networks, losses and metrics."""

from composer.models.base import ComposerModel
from composer.models.classifier import ComposerClassifier
from composer.models.gpt import GPT, GPTConfig
from composer.models.huggingface import HuggingFaceModel
from composer.models.language_metrics import Perplexity, TokenAccuracy
from composer.models.loss import soft_cross_entropy
from composer.models.metrics import Accuracy, CrossEntropy
from composer.models.mlp import MLP
from composer.models.resnet import BasicBlock, Bottleneck, ResNet, imagenet_resnet
from composer.models.resnet_cifar import CIFARResNet, cifar_resnet
from composer.models.simple_cnn import SimpleCNN, simple_cnn

__all__ = ["MLP", "Accuracy", "ComposerClassifier", "ComposerModel", "CrossEntropy", "soft_cross_entropy"]
__all__ += ["BasicBlock", "Bottleneck", "CIFARResNet", "ResNet", "cifar_resnet", "imagenet_resnet"]
__all__ += ["GPT", "GPTConfig", "HuggingFaceModel", "Perplexity", "TokenAccuracy"]
__all__ += ["SimpleCNN", "simple_cnn"]
