"""Models: the ComposerModel interface, a classifier wrapper, small reference networks, losses and metrics."""

from composer.models.base import ComposerModel
from composer.models.classifier import ComposerClassifier
from composer.models.loss import soft_cross_entropy
from composer.models.metrics import Accuracy, CrossEntropy
from composer.models.mlp import MLP

__all__ = ["MLP", "Accuracy", "ComposerClassifier", "ComposerModel", "CrossEntropy", "soft_cross_entropy"]
