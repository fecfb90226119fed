"""Metrics under MosaicML Composer v0.32.1's module name: ``from composer.metrics import CrossEntropy`` works.

The classification metrics are this library's (:mod:`composer.models.metrics`: ``Accuracy``, ``CrossEntropy``),
and so are the per-token ones (``Perplexity``, ``TokenAccuracy``); v0.32.1's names for the language-model metrics
(``LanguageCrossEntropy``, ``LanguagePerplexity``, ``MaskedAccuracy``) and ``LossMetric`` are here too. v0.32.1's
``MAP``, ``MIoU``, ``Dice`` and ``BinaryF1Score`` are not: importing one says which torchmetrics class to use.
"""

from composer.metrics.language import LanguageCrossEntropy, LanguagePerplexity, MaskedAccuracy
from composer.metrics.loss_metric import LossMetric
from composer.models.language_metrics import Perplexity, TokenAccuracy
from composer.models.metrics import Accuracy, CrossEntropy
from composer.utils.porting import pointer_getattr

__all__ = [
    "Accuracy",
    "CrossEntropy",
    "LanguageCrossEntropy",
    "LanguagePerplexity",
    "LossMetric",
    "MaskedAccuracy",
    "Perplexity",
    "TokenAccuracy",
]

__getattr__ = pointer_getattr(
    __name__,
    {
        "MAP": "use torchmetrics.detection.MeanAveragePrecision (it needs pycocotools).",
        "MIoU": "use torchmetrics.classification.MulticlassJaccardIndex(num_classes, average='macro').",
        "Dice": "use torchmetrics.segmentation.DiceScore(num_classes).",
        "BinaryF1Score": "use torchmetrics.classification.BinaryF1Score.",
    },
)
